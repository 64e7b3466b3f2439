"""Export round trips, the implementations of the area ``export``: one per way a model
leaves eager PyTorch for deployment.

Contract (``--impl export=module:attr``): ``fn(module, example_args, dynamic_shapes) ->
program``, where ``program(*args)`` returns the module's outputs (a tuple of tensors) for
inputs of the example's structure at any size the program supports, and raises an
exception at a size it does not support (never wrong numbers). ``dynamic_shapes`` is what
``torch.export.export`` takes: ``None`` (static), or per input name a ``{dim: Dim}``
(``Dim("batch", min=1, max=64)``, ``Dim("seq", ...)`` or ``Dim.AUTO``). The program may
carry ``dynamic_dims`` (``{input name: {dim: [min, max]}}`` for the dims that stayed
dynamic, None for an unbounded or unknown end) and ``artefact`` (what it wrote); the
report shows both. An ``ImportError`` while building means a missing dependency (the case
is skipped, with the message). Declared features: ``dynamic.batch``, ``dynamic.seq`` (the
program keeps that dim dynamic when asked with a named ``Dim``).

``export`` and ``export.strict`` are the public API as a user calls it, nothing patched:
``torch.export.export(LSTM, dynamic_shapes={.. Dim("seq") ..})`` unrolls the time loop and
raises "Constraints violated (seq)" (the matrix's expected failures say so, with links).
``export.while_loop`` is the same call inside torch's private while-loop LSTM / GRU
decompositions (``torch.export._patches``; torch's own test of the patch, test_export.py
``test_dynamic_lstm``, does the same), and the paths built on an export (saved, decomposed,
aoti, executorch) start from that trace, so that their own stages are tested at a dynamic
length too. Each program says which trace it came from (``trace``, in the report's notes).
The decompositions are entered only when a dim named "seq" is requested dynamic.

``torch.export.load`` and ``aoti_load_package`` load code: these paths only load files
they wrote themselves, into a private temporary directory of this process.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import hashlib
import itertools
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch
from torch.export import ExportedProgram

FEATURES = ["dynamic.batch", "dynamic.seq"]
_DIR: Path | None = None
_COUNT = itertools.count()


def private_dir() -> Path:
    """A temporary directory only this process writes to (removed at exit)."""
    global _DIR
    if _DIR is None:
        _DIR = Path(tempfile.mkdtemp(prefix="conformance-export-"))
        atexit.register(shutil.rmtree, _DIR, True)
    return _DIR


def _artefact(suffix: str) -> Path:
    return private_dir() / f"program{next(_COUNT)}{suffix}"


def _declare(fn: Callable[..., Any], name: str, *, dtypes: list[str], devices: list[str],
             features: list[str], requires: list[str] | None = None) -> None:
    fn.conformance_name = name  # type: ignore[attr-defined]
    fn.conformance_dtypes = dtypes  # type: ignore[attr-defined]
    fn.conformance_devices = devices  # type: ignore[attr-defined]
    fn.conformance_features = features  # type: ignore[attr-defined]
    if requires:
        fn.conformance_requires = requires  # type: ignore[attr-defined]


def _wants_dynamic_seq(dynamic_shapes: Any) -> bool:
    if not isinstance(dynamic_shapes, dict):
        return False
    dims = [d for spec in dynamic_shapes.values() if isinstance(spec, dict)
            for d in spec.values()]
    return any(getattr(d, "__name__", None) == "seq" for d in dims)


def _clear_dispatch_caches() -> None:
    # The patches set the ops' py_kernels directly, which does not clear the ops' dispatch
    # caches: once aten.lstm / aten.gru ran in the process, entering or leaving the patch
    # has no effect until the cache is cleared (test_regressions.py has the case).
    for op in (torch.ops.aten.lstm.input, torch.ops.aten.gru.input):
        cache = getattr(op, "_dispatch_cache", None)
        if isinstance(cache, dict):
            cache.clear()


@contextlib.contextmanager
def _while_loops(enabled: bool) -> Iterator[None]:
    """torch's while-loop LSTM / GRU decompositions, where the build has them."""
    with contextlib.ExitStack() as stack:
        if enabled:
            try:
                from torch.export import _patches
            except ImportError:
                _patches = None
            for name in ("register_lstm_while_loop_decomposition",
                         "register_gru_while_loop_decomposition"):
                register = getattr(_patches, name, None)
                if register is not None:
                    stack.enter_context(register())
            stack.callback(_clear_dispatch_caches)
            _clear_dispatch_caches()
        yield


def dynamic_dims(ep: ExportedProgram) -> dict[str, dict[int, list[int | None]]]:
    """Per user input, the dims of the exported program that stayed symbolic, with the
    range of sizes the program admits (``[min, max]``, None for unbounded or unknown)."""
    user = set(ep.graph_signature.user_inputs)
    out: dict[str, dict[int, list[int | None]]] = {}
    for node in ep.graph.nodes:
        if node.op != "placeholder" or node.name not in user:
            continue
        shape = getattr(node.meta.get("val"), "shape", ())
        out[node.name] = {}
        for i, size in enumerate(shape):
            expr = getattr(getattr(size, "node", None), "expr", None)
            if isinstance(size, int) or getattr(expr, "is_number", False):
                continue  # static, or a SymInt specialised to a constant
            vr = ep.range_constraints.get(expr)
            bounds: list[int | None] = [None, None]
            if vr is not None:
                bounds = [_finite(vr.lower), _finite(vr.upper)]
            out[node.name][i] = bounds
    return out


def _finite(value: Any) -> int | None:
    try:
        return int(value)
    except Exception:  # sympy's infinities (int_oo) do not convert
        return None


# The paths built on an export (saved, decomposed, aoti, executorch) start from the program
# the ``export`` path traced for the same module, inputs and dynamic shapes in this process
# (a deep copy: none of them sees what another did to its program); tracing it again cost
# 0.4 to 2.4 s a round trip on 2 cores. ``export`` itself always traces.
_TRACED: dict[str, ExportedProgram] = {}
_TRACED_MAX = 64


def _content_key(module: torch.nn.Module, args: tuple, dynamic_shapes: Any,
                 strict: bool) -> str:
    """A hash of the module's structure and every byte of its state and of the inputs."""
    h = hashlib.blake2b(digest_size=20)
    h.update(f"{type(module).__qualname__}|{module!r}|{dynamic_shapes!r}|{strict}|".encode())
    named = [*module.state_dict().items(), *((f"arg{i}", a) for i, a in enumerate(args))]
    for name, t in named:
        if not isinstance(t, torch.Tensor):
            h.update(f"{name} {t!r}|".encode())
            continue
        h.update(f"{name} {t.dtype} {tuple(t.shape)} {t.device}|".encode())
        flat = t.detach().contiguous().reshape(-1).cpu()
        if flat.numel():
            h.update(flat.view(torch.uint8).numpy().data)
    return h.hexdigest()


PUBLIC = "torch.export.export"
PATCHED = "torch.export.export + torch.export._patches while-loop LSTM/GRU decompositions"


def trace_of(dynamic_shapes: Any, while_loop: bool) -> str:
    """Which trace ``exported`` makes for these dynamic shapes."""
    return PATCHED if while_loop and _wants_dynamic_seq(dynamic_shapes) else PUBLIC


def exported(module: torch.nn.Module, args: tuple, dynamic_shapes: Any, *,
             strict: bool = False, reuse: bool = True, while_loop: bool = True
             ) -> ExportedProgram:
    """``torch.export.export``; ``while_loop``: inside the private while-loop decompositions
    when a dim named "seq" is dynamic; ``reuse``: a copy of this process's earlier trace of
    the same content, if any."""
    patched = trace_of(dynamic_shapes, while_loop) == PATCHED
    key = _content_key(module, args, dynamic_shapes, strict) + ("+while" if patched else "")
    if reuse and key in _TRACED:
        return copy.deepcopy(_TRACED[key])
    with _while_loops(patched):
        ep = torch.export.export(module, args, dynamic_shapes=dynamic_shapes, strict=strict)
    if len(_TRACED) >= _TRACED_MAX:
        _TRACED.pop(next(iter(_TRACED)))
    _TRACED[key] = copy.deepcopy(ep)
    return ep


class Program:
    """A callable round-trip result with what the report shows about it."""

    def __init__(self, run: Callable[..., Any], dims: dict[str, list[int]] | None,
                 artefact: Path | None = None, trace: str | None = None) -> None:
        self._run = run
        self.dynamic_dims = dims
        self.artefact = str(artefact) if artefact else None
        self.trace = trace

    def __call__(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self._run(*args)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def eager(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """The module itself: the reference point (any shape)."""
    return Program(module, None)


def export(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """``torch.export.export`` (non-strict, the default) -> ``.module()``: the public API,
    nothing patched."""
    ep = exported(module, args, dynamic_shapes, reuse=False, while_loop=False)
    return Program(ep.module(), dynamic_dims(ep), trace=PUBLIC)


def export_while_loop(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """``torch.export.export`` inside torch's private while-loop LSTM / GRU decompositions
    (``torch.export._patches``) -> ``.module()``: a dynamic length for LSTM and GRU."""
    ep = exported(module, args, dynamic_shapes, reuse=False)
    return Program(ep.module(), dynamic_dims(ep), trace=trace_of(dynamic_shapes, True))


def export_strict(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """``torch.export.export(strict=True)`` (TorchDynamo traces) -> ``.module()``: the public
    API, nothing patched."""
    ep = exported(module, args, dynamic_shapes, strict=True, reuse=False, while_loop=False)
    return Program(ep.module(), dynamic_dims(ep), trace=PUBLIC)


def export_saved(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Export, ``torch.export.save`` to a ``.pt2``, ``torch.export.load`` it back."""
    path = _artefact(".pt2")
    torch.export.save(exported(module, args, dynamic_shapes), path)
    ep = torch.export.load(path)
    return Program(ep.module(), dynamic_dims(ep), path, trace_of(dynamic_shapes, True))


def export_decomposed(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Export, then ``run_decompositions()`` to the core ATen opset."""
    with _while_loops(_wants_dynamic_seq(dynamic_shapes)):  # else they decompose unrolled
        ep = exported(module, args, dynamic_shapes).run_decompositions()
    return Program(ep.module(), dynamic_dims(ep), trace=trace_of(dynamic_shapes, True))


def aoti(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Export, ``aoti_compile_and_package`` (C++ / device code), ``aoti_load_package``."""
    ep = exported(module, args, dynamic_shapes)
    path = _artefact(".pt2")
    torch._inductor.aoti_compile_and_package(ep, package_path=str(path))
    return Program(torch._inductor.aoti_load_package(str(path)), dynamic_dims(ep), path,
                   trace_of(dynamic_shapes, True))


def executorch(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Export, ``to_edge_transform_and_lower`` with the XNNPACK partitioner, ``.pte``, run
    by ``executorch.runtime`` (CPU)."""
    try:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackPartitioner,
        )
        from executorch.exir import to_edge_transform_and_lower
        from executorch.runtime import Runtime
    except Exception as exc:  # e.g. a wheel built for another torch
        raise ImportError(f"executorch does not load with torch {torch.__version__}: "
                          f"{type(exc).__name__}: {exc}") from None

    ep = exported(module, args, dynamic_shapes)
    with _while_loops(_wants_dynamic_seq(dynamic_shapes)):
        program = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
        buffer = program.to_executorch().buffer
    path = _artefact(".pte")
    path.write_bytes(buffer)
    method = Runtime.get().load_program(path).load_method("forward")

    def run(*inputs: torch.Tensor) -> list[torch.Tensor]:
        # the runtime reads data_ptr as contiguous: hand it contiguous tensors
        return method.execute([t.contiguous() for t in inputs])

    return Program(run, dynamic_dims(ep), path, trace_of(dynamic_shapes, True))


_FLOATS = ["float32", "bfloat16", "float16"]
_GPU = ["cpu", "cuda", "rocm", "xpu"]
_declare(eager, "eager", dtypes=_FLOATS, devices=[*_GPU, "mps"], features=FEATURES)
_declare(export, "export", dtypes=_FLOATS, devices=[*_GPU, "mps"], features=FEATURES)
_declare(export_while_loop, "export.while_loop", dtypes=_FLOATS, devices=[*_GPU, "mps"],
         features=FEATURES)
_declare(export_strict, "export.strict", dtypes=_FLOATS, devices=[*_GPU, "mps"],
         features=FEATURES)
_declare(export_saved, "export.saved", dtypes=_FLOATS, devices=[*_GPU, "mps"],
         features=FEATURES)
_declare(export_decomposed, "export.decomposed", dtypes=_FLOATS, devices=[*_GPU, "mps"],
         features=FEATURES)
_declare(aoti, "aoti", dtypes=["float32"], devices=_GPU, features=FEATURES)
_declare(executorch, "executorch", dtypes=["float32"], devices=["cpu"], features=FEATURES,
         requires=["executorch"])
