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

Saved artefacts leave the process: ``export.saved`` (.pt2) and ``aoti`` / ``aoti.checked``
(an AOTInductor package) are loaded and run by a fresh Python process
(impls/export_loader.py: a new interpreter, calls over a pipe, a refusal there raised here),
so a program that only works where it was built fails. ``aoti`` runs the package in the
runtime's default environment (AOTI_RUNTIME_CHECK_INPUTS unset), ``aoti.checked`` with
AOTI_RUNTIME_CHECK_INPUTS=1; both share one compiled package per exported content.
``executorch`` lowers with the XNNPACK partitioner and ``executorch.portable`` without one
(portable kernels only); an ExecuTorch program carries ``delegated`` (per backend, the ops
it took, and the ops "not delegated"), which the report's notes show.

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

from impls.export_loader import fresh

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
    """Export, ``torch.export.save`` to a ``.pt2``; a fresh Python process (impls/export_loader.py)
    ``torch.export.load``s it and runs it: nothing of this process's state comes along."""
    server = fresh()  # a process that has loaded nothing (impls/export_loader.py)
    path = _artefact(".pt2")
    torch.export.save(exported(module, args, dynamic_shapes), path)
    server.load("export.saved", path)
    ep = torch.export.load(path)  # this process reads the file for the report's dims only
    return Program(server, dynamic_dims(ep), path, trace_of(dynamic_shapes, True))


def export_decomposed(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Export, then ``run_decompositions()`` to the core ATen opset."""
    with _while_loops(_wants_dynamic_seq(dynamic_shapes)):  # else they decompose unrolled
        ep = exported(module, args, dynamic_shapes).run_decompositions()
    return Program(ep.module(), dynamic_dims(ep), trace=trace_of(dynamic_shapes, True))


# One AOTInductor package per exported content in this process: ``aoti`` and ``aoti.checked``
# differ only in the runtime environment of the process that loads it (a C++ build costs
# ~20 s of a 2-core machine; the second path then costs the load only).
_PACKAGES: dict[str, Path] = {}
CHECK_INPUTS = "AOTI_RUNTIME_CHECK_INPUTS"


def aoti_package(module: torch.nn.Module, args: tuple, dynamic_shapes: Any
                 ) -> tuple[Path, ExportedProgram]:
    """``aoti_compile_and_package`` of the export (reused for the same content)."""
    ep = exported(module, args, dynamic_shapes)
    key = _content_key(module, args, dynamic_shapes, False) + trace_of(dynamic_shapes, True)
    path = _PACKAGES.get(key)
    if path is None or not path.exists():
        path = _artefact(".pt2")
        torch._inductor.aoti_compile_and_package(ep, package_path=str(path))
        _PACKAGES[key] = path
    return path, ep


def _aoti(module: torch.nn.Module, args: tuple, dynamic_shapes: Any, check: bool) -> Program:
    server = fresh({CHECK_INPUTS: "1" if check else None})
    path, ep = aoti_package(module, args, dynamic_shapes)
    server.load("aoti", path)
    return Program(server, dynamic_dims(ep), path, trace_of(dynamic_shapes, True))


def aoti(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Export, ``aoti_compile_and_package`` (C++ / device code); a fresh Python process
    ``aoti_load_package``s it and runs it in the runtime's default environment (no
    AOTI_RUNTIME_CHECK_INPUTS: the package does not check its inputs' sizes)."""
    return _aoti(module, args, dynamic_shapes, check=False)


def aoti_checked(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """``aoti``'s package, loaded and run by a fresh Python process with
    AOTI_RUNTIME_CHECK_INPUTS=1 (the package checks its inputs' dtypes, static sizes and
    dynamic ranges before running)."""
    return _aoti(module, args, dynamic_shapes, check=True)


def _executorch_modules() -> Any:
    try:
        from executorch import exir
        from executorch.runtime import Runtime
    except Exception as exc:  # e.g. a wheel built for another torch
        raise ImportError(f"executorch does not load with torch {torch.__version__}: "
                          f"{type(exc).__name__}: {exc}") from None
    return exir, Runtime


def delegated_ops(graph_module: torch.fx.GraphModule) -> dict[str, dict[str, int]]:
    """Per backend, the ops it took (``{"XnnpackBackend": {"aten.linear.default": 2}}``), and
    under "not delegated" the ops left to the portable kernels; from ExecuTorch's
    ``executorch.devtools.backend_debug.get_delegation_info`` (its counts per operator) and
    the lowered modules' backend ids."""
    from executorch.devtools.backend_debug import get_delegation_info

    info = get_delegation_info(graph_module)
    backends = sorted({getattr(m, "backend_id", "?") for m in graph_module.modules()
                       if type(m).__name__ == "LoweredBackendModule"}) or ["delegated"]
    taken = {op: b.delegated for op, b in info.delegation_by_operator.items() if b.delegated}
    left = {op: b.non_delegated for op, b in info.delegation_by_operator.items()
            if b.non_delegated}
    out = {" + ".join(backends): dict(sorted(taken.items()))} if taken else {}
    out["not delegated"] = dict(sorted(left.items()))
    return out


def _executorch(module: torch.nn.Module, args: tuple, dynamic_shapes: Any,
                xnnpack: bool) -> Program:
    exir, Runtime = _executorch_modules()
    partitioner = []
    if xnnpack:
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import (
            XnnpackPartitioner,
        )
        partitioner = [XnnpackPartitioner()]
    ep = exported(module, args, dynamic_shapes)
    with _while_loops(_wants_dynamic_seq(dynamic_shapes)):
        edge = exir.to_edge_transform_and_lower(ep, partitioner=partitioner)
        delegated = delegated_ops(edge.exported_program().graph_module)
        buffer = edge.to_executorch().buffer
    path = _artefact(".pte")
    path.write_bytes(buffer)
    method = Runtime.get().load_program(path).load_method("forward")

    def run(*inputs: torch.Tensor) -> list[torch.Tensor]:
        # the runtime reads data_ptr as contiguous: hand it contiguous tensors
        return method.execute([t.contiguous() for t in inputs])

    program = Program(run, dynamic_dims(ep), path, trace_of(dynamic_shapes, True))
    program.delegated = delegated  # type: ignore[attr-defined]
    return program


def executorch(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Export, ``to_edge_transform_and_lower`` with the XNNPACK partitioner, ``.pte``, run
    by ``executorch.runtime`` (CPU). ``program.delegated``: which ops XNNPACK took."""
    return _executorch(module, args, dynamic_shapes, xnnpack=True)


def executorch_portable(module: torch.nn.Module, args: tuple, dynamic_shapes: Any) -> Program:
    """Export, ``to_edge_transform_and_lower`` without a partitioner (every op on ExecuTorch's
    portable kernels), ``.pte``, run by ``executorch.runtime`` (CPU)."""
    return _executorch(module, args, dynamic_shapes, xnnpack=False)


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
_declare(aoti_checked, "aoti.checked", dtypes=["float32"], devices=_GPU, features=FEATURES)
_declare(executorch, "executorch", dtypes=["float32"], devices=["cpu"], features=FEATURES,
         requires=["executorch"])
_declare(executorch_portable, "executorch.portable", dtypes=["float32"], devices=["cpu"],
         features=FEATURES, requires=["executorch"])
