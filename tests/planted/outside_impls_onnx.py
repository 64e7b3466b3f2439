"""A correct outside implementation of the export area: an ONNX Runtime round trip
(``torch.onnx.export(dynamo=True)``, then ``onnxruntime.InferenceSession``), plugged in with
``--impl export=planted.outside_impls_onnx:onnxruntime_roundtrip``. Written like
``outside_impls.py`` (a helper's, from the contract in ``impls/export.py``); it needs the
``onnx``, ``onnxruntime`` and ``onnxscript`` packages (not in the dev extra: without them
its cases are skipped, as the contract says for a missing dependency). Where ONNX export
cannot keep a requested dim dynamic (a plain ``nn.RNN``'s sequence length; an LSTM with
``proj_size``) it raises at build time rather than return a fixed-size program.
"""

from __future__ import annotations

import contextlib
import copy
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from .outside_impls import (
    _COUNT,
    _bound,
    _input_names,
    _is_named,
    _private_dir,
    _requested,
)

# ------------------------------------------------------------- export: ONNX Runtime


class _OnnxProgram:
    """An ONNX Runtime session: ``program(*args)`` -> a flat tuple of tensors.

    Before running, every input is checked against what the exported graph admits: its
    rank, its static dims (the example's size), and for a dynamic dim the range the
    export was traced for (``dynamic_dims``); any other size raises ``ValueError``."""

    def __init__(self, session: Any, feeds: list[str], names: list[str], artefact: Path,
                 shapes: list[list[int | None]], dims: dict[str, dict[int, list]]) -> None:
        self._session = session
        self._feeds = feeds  # the session's input name of each positional argument
        self._names = names  # the module's name of each positional argument
        self._shapes = shapes  # per argument, the static size of each dim (None: dynamic)
        self.artefact = str(artefact)
        self.dynamic_dims = dims  # per argument name, {dim: [min, max]}

    def _check(self, args: tuple) -> None:
        if len(args) != len(self._feeds):
            raise TypeError(f"onnxruntime: expected {len(self._feeds)} inputs, got "
                            f"{len(args)}")
        for name, shape, arg in zip(self._names, self._shapes, args, strict=True):
            got = tuple(arg.shape)
            if len(got) != len(shape):
                raise ValueError(f"onnxruntime: input {name!r} must be {len(shape)}-d, "
                                 f"got shape {got}")
            for dim, (want, size) in enumerate(zip(shape, got, strict=True)):
                if want is not None and size != want:
                    raise ValueError(f"onnxruntime: dim {dim} of input {name!r} was "
                                     f"exported static ({want}); got size {size} "
                                     f"(shape {got})")
                lo, hi = self.dynamic_dims.get(name, {}).get(dim, [None, None])
                if want is None and ((lo is not None and size < lo)
                                     or (hi is not None and size > hi)):
                    raise ValueError(f"onnxruntime: dim {dim} of input {name!r} was "
                                     f"exported for sizes [{lo}, {hi}]; got {size}")

    def __call__(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        self._check(args)
        feeds = {name: a.detach().cpu().contiguous().numpy()
                 for name, a in zip(self._feeds, args, strict=True)}
        outs = self._session.run(None, feeds)
        return tuple(torch.from_numpy(o.copy()) for o in outs)


def _input_spec(onnx_program: Any) -> tuple[list[str], list[list[int | None]],
                                            list[dict[int, list[int | None]]]]:
    """Per graph input of the exported model: its name, the static size of each dim (None
    where it stayed dynamic), and for each dynamic dim the range of sizes the export was
    traced for. A dim is dynamic only where the ONNX graph and torch's final program
    (``onnx_program.exported_program``, after torch.onnx's decompositions) both keep it
    symbolic: a symbol a decomposition replaced by a number can survive in the graph as
    a symbolic dim named after that number ("4")."""
    ep = onnx_program.exported_program
    user = set(ep.graph_signature.user_inputs)
    traced: dict[str, tuple] = {}
    for node in ep.graph.nodes:
        if node.op == "placeholder" and node.name in user:
            traced[node.name] = tuple(getattr(node.meta.get("val"), "shape", ()))
    names: list[str] = []
    shapes: list[list[int | None]] = []
    ranges: list[dict[int, list[int | None]]] = []
    for value in onnx_program.model.graph.inputs:
        names.append(value.name)
        sizes = traced.get(value.name, ())
        shape: list[int | None] = []
        bounds: dict[int, list[int | None]] = {}
        for dim, size in enumerate(value.shape or ()):
            if isinstance(size, int):
                shape.append(size)
                continue
            symbol = str(getattr(size, "value", None) or "")
            if symbol.isdigit():
                shape.append(int(symbol))
                continue
            torch_size = sizes[dim] if dim < len(sizes) else None
            expr = getattr(getattr(torch_size, "node", None), "expr", None)
            if isinstance(torch_size, int) or getattr(expr, "is_number", False):
                shape.append(int(torch_size))
                continue
            vr = ep.range_constraints.get(expr) if expr is not None else None
            lo, hi = (None, None) if vr is None else (_bound(vr.lower), _bound(vr.upper))
            if lo is not None and lo == hi:  # a range of one size: static
                shape.append(lo)
                continue
            shape.append(None)
            bounds[dim] = [lo, hi]
        shapes.append(shape)
        ranges.append(bounds)
    return names, shapes, ranges


def _lost_dims(requested: dict[str, dict[int, Any]], names: list[str],
               shapes: list[list[int | None]]) -> list[str]:
    """The dims asked for with a named ``Dim`` that the exported graph has static
    (``names``: the module's name of each positional input, ``shapes`` its graph input's
    static sizes, as ``_input_spec`` reads them)."""
    lost = []
    for pos, name in enumerate(names):
        for dim, d in requested.get(name, {}).items():
            if (d is not None and _is_named(d) and pos < len(shapes)
                    and int(dim) < len(shapes[pos]) and shapes[pos][int(dim)] is not None):
                lost.append(f"dim {dim} of {name!r} (Dim {d.__name__!r}) is fixed to "
                            f"{shapes[pos][int(dim)]}")
    return lost


@contextlib.contextmanager
def _rnn_kernels(while_loops: bool) -> Iterator[None]:
    """torch's while-loop LSTM / GRU kernels (``torch.export._patches``) if asked, with
    the caches that can undo them cleared on the way in and out."""
    with contextlib.ExitStack() as stack:
        if while_loops:
            from torch.export._patches import (
                register_gru_while_loop_decomposition,
                register_lstm_while_loop_decomposition,
            )

            stack.enter_context(register_lstm_while_loop_decomposition())
            stack.enter_context(register_gru_while_loop_decomposition())
        stack.callback(_forget_rnn_kernels, while_loops)  # on the way out, past the patch
        _forget_rnn_kernels(while_loops)
        yield


def _onnx_export(model: torch.nn.Module, args: tuple, dynamic_shapes: Any,
                 names: list[str], while_loops: bool) -> Any:
    """``torch.export.export`` of ``dynamic_shapes`` as given, or as torch's suggested
    fixes refine them, then ``torch.onnx.export(program, dynamo=True)``, both under the
    same LSTM / GRU kernels: torch.onnx's decompositions trace ``aten.lstm`` /
    ``aten.gru`` again, and the default kernels would fix the sequence length there.

    The export is torch.onnx's own capture's: non-strict, ``backed_size_oblivious`` and
    ``prefer_deferred_runtime_asserts_over_guards`` (torch.onnx's default), so that a
    ``Dim`` with ``min=1`` stays dynamic where the trace took a branch for sizes other
    than 1 (an ``nn.LSTM``'s states, ``nn.TransformerEncoderLayer``): the guard becomes a
    runtime assertion in the program (``Ne(batch, 1)``), which the ONNX translation drops,
    as torch.onnx.export does; ONNX's ops broadcast at run time, whatever the size."""
    from torch.export.dynamic_shapes import refine_dynamic_shapes_from_suggested_fixes
    from torch.fx.experimental import _config as fx_config

    def export(shapes: Any) -> Any:
        with fx_config.patch(backed_size_oblivious=True):
            return torch.export.export(model, args, dynamic_shapes=shapes, strict=False,
                                       prefer_deferred_runtime_asserts_over_guards=True)

    with _rnn_kernels(while_loops):
        try:
            ep = export(dynamic_shapes)
        except torch._dynamo.exc.UserError as exc:
            # torch's suggested fixes, as torch.onnx applies them, where they keep every
            # dim asked for with a named Dim dynamic (a narrower range); one that fixes
            # such a dim to one size is the refusal itself
            try:
                refined = refine_dynamic_shapes_from_suggested_fixes(exc.msg, dynamic_shapes)
            except Exception:
                raise exc from None
            asked, kept = (_requested(shapes, names) for shapes in (dynamic_shapes, refined))
            if any(_is_named(d) and not _is_named(kept.get(name, {}).get(dim))
                   for name, spec in asked.items() for dim, d in spec.items()):
                raise exc from None
            ep = export(refined)
        if _projected_lstms(ep):
            # torch.onnx would translate them to the ONNX LSTM op, which has no
            # projection (onnxscript's aten_lstm ignores it: a graph ONNX Runtime refuses
            # to load, or one that computes something else): decompose them here, with
            # the kernels in force (unrolled, or a while loop for an ONNX Loop)
            try:
                ep = ep.run_decompositions({torch.ops.aten.lstm.input: _lstm_kernel})
            except Exception as exc:
                how = "with its while-loop kernel" if while_loops else "unrolled"
                raise RuntimeError(
                    f"onnxruntime: an LSTM with a projection (proj_size) has no ONNX "
                    f"translation in torch.onnx (the ONNX LSTM op has no projection) and "
                    f"torch {torch.__version__} cannot decompose it {how} "
                    f"(run_decompositions): {type(exc).__name__}: {exc}") from exc
        onnx_program = torch.onnx.export(ep, args, dynamo=True, verbose=False,
                                         optimize=False)
    if onnx_program is None:
        raise RuntimeError("onnxruntime: torch.onnx.export(dynamo=True) returned no program")
    return onnx_program


def _has_while_loops() -> bool:
    try:
        from torch.export import _patches
    except ImportError:
        return False
    return all(hasattr(_patches, f"register_{rnn}_while_loop_decomposition")
               for rnn in ("lstm", "gru"))


def _forget_rnn_kernels(while_loops: bool) -> None:
    """Traced through torch's while-loop LSTM / GRU kernels (``torch.export._patches``),
    two caches of the process can undo the patch, each making the unrolled kernel or an
    earlier trace specialise the sequence length:

    - the patch sets the ops' ``py_kernels``, which leaves their dispatch caches alone:
      once ``aten.lstm`` / ``aten.gru`` ran in the process, the swap has no effect;
    - Dynamo caches the compiled loop body per code object, guarded on the example's
      sizes only: an earlier export with the same example sizes (say, batch dynamic and
      the sequence static) hands its body, with the sequence length as a constant, to
      the next one.

    The dispatch caches are cleared before and after every trace; around the patched
    trace (``while_loops``) Dynamo's code caches too, before it and after it (so no later
    export reuses this one's loop bodies), which costs later ``torch.compile`` calls a
    recompile, never a result."""
    for op in (torch.ops.aten.lstm.input, torch.ops.aten.gru.input):
        cache = getattr(op, "_dispatch_cache", None)
        if isinstance(cache, dict):
            cache.clear()
    if while_loops:
        torch._dynamo.reset_code_caches()


def _forget_traced_shapes(model: Any) -> None:
    """Drop the shape the exporter wrote on every value computed in the graph (graph
    inputs keep theirs), so that ONNX's own shape inference, from the inputs, decides.

    The exporter copies each value's shape from torch's trace, and with a dynamic
    sequence length torch's while-loop GRU / LSTM kernels report their outputs at the
    example's length (``aten.gru`` of an ``x`` of ``[s, 3, 4]`` returns ``[4, 3, 12]``).
    torch.onnx's optimizer trusts those shapes and folds them into constants (a
    ``Reshape`` to ``[4, 3, 12]``): the graph then takes any ``seq`` and fails, or where
    the element counts happen to agree computes something else, at all but the
    example's. Without them, the optimizer folds only what follows from the inputs."""
    import onnx_ir

    for node in onnx_ir.traversal.RecursiveGraphIterator(model.graph):
        for value in node.outputs:
            value.shape = None


def _projected_lstms(ep: Any) -> int:
    """How many ``aten.lstm`` calls of the program have a projection (``proj_size``: one
    more weight per direction and layer than the ONNX ``LSTM`` op takes)."""
    count = 0
    for node in ep.graph.nodes:
        if node.op != "call_function" or node.target is not torch.ops.aten.lstm.input:
            continue
        params, has_biases, num_layers = node.args[2], node.args[3], node.args[4]
        directions = 2 if node.args[7] else 1
        count += len(params) != num_layers * directions * (4 if has_biases else 2)
    return count


def _lstm_kernel(*args: Any, **kwargs: Any) -> Any:
    """``aten.lstm``'s decomposition in force (``torch.export._patches``'s while loop
    inside ``_rnn_kernels(True)``, else torch's unrolled one)."""
    from torch._decomp import decomposition_table

    return decomposition_table[torch.ops.aten.lstm.input](*args, **kwargs)


def onnxruntime_roundtrip(module: torch.nn.Module, example_args: tuple,
                          dynamic_shapes: Any) -> _OnnxProgram:
    """An ONNX round trip, a correct outside implementation of the area ``export``.

    A deep copy of the module (the caller's is never touched) is traced by
    ``torch.export.export`` with ``dynamic_shapes`` as given and the program goes through
    ``torch.onnx.export(..., dynamo=True)`` (``_onnx_export``); torch.onnx's optimizer runs
    once the exporter's traced shapes are dropped (``_forget_traced_shapes``). The model is
    saved as a ``.onnx`` file into a private temporary directory of this process and
    loaded back by ``onnxruntime.InferenceSession`` on the ``CPUExecutionProvider`` (only
    that file is loaded). The program feeds the inputs as numpy arrays and returns the
    session's outputs (the module's outputs, flattened in order) as a tuple of tensors.

    Why not hand the module itself to torch.onnx.export: its own capture, where a dim
    asked for cannot stay dynamic, re-exports with torch's suggested fixes
    (``refine_dynamic_shapes_from_suggested_fixes``), which can fix that dim to the
    example's size, without a word; and for any dynamic shape it traces LSTM / GRU with
    torch's while-loop kernels, which fix the batch of a bidirectional GRU (Dynamo's
    cache check of the second direction's loop guards ``6*batch == 18``). Here the
    suggested fixes are taken too, but a dim asked for with a named ``Dim`` that comes
    out static is refused; and torch's default kernels come first, the while-loop ones
    only where the default ones fix such a dim.

    What stayed dynamic is read from the exported graph (``_input_spec``), with the range
    the export was traced for (``dynamic_dims``); every other dim is static, and the
    program refuses any other size (``ValueError``) before running. Raised at build time:
    a dim asked for with a named ``Dim`` that neither export keeps dynamic (a plain
    ``nn.RNN`` with a dynamic sequence length: torch has while-loop kernels for LSTM and
    GRU only), and an LSTM with ``proj_size`` and a dynamic sequence length: torch.onnx
    has no correct translation for a projection, so such an LSTM is decomposed before
    translation (``_projected_lstms``), and torch cannot decompose it with its while-loop
    kernel (``run_decompositions``: "Constant tensor ... lifted_tensor_0 is not in the
    constants dictionary"). onnx / onnxruntime / onnxscript missing: ImportError.
    """
    import onnx  # noqa: F401  (ImportError: the case is skipped, saying so)
    import onnxruntime
    import onnxscript  # noqa: F401  (torch.onnx's dynamo exporter needs it)

    model = copy.deepcopy(module)
    args = tuple(example_args)
    names = _input_names(model, len(args))
    requested = _requested(dynamic_shapes, names)
    with warnings.catch_warnings():  # the exporter's deprecation / user warnings
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", UserWarning)
        # torch's default kernels first; the while-loop LSTM / GRU ones where those fix a
        # dim asked for with a named Dim (their unrolled time loop fixes the sequence)
        failure: str | None = None
        onnx_program = None
        for while_loops in (False, True):
            if while_loops and not (dynamic_shapes and _has_while_loops()):
                break
            try:
                onnx_program = _onnx_export(model, args, dynamic_shapes, names,
                                            while_loops)
            except torch._dynamo.exc.UserError as exc:  # a requested dim was specialised
                failure, onnx_program = f"{type(exc).__name__}: {exc}", None
                continue
            lost = _lost_dims(requested, names, _input_spec(onnx_program)[1])
            if not lost:
                failure = None
                break
            failure = "; ".join(lost)
        if failure is not None or onnx_program is None:
            hint = ""
            if any(isinstance(m, torch.nn.RNN) for m in model.modules()):
                hint = (" (an nn.RNN: torch has while-loop kernels for nn.LSTM and nn.GRU "
                        "only and unrolls nn.RNN's time loop, fixing the sequence length)")
            raise RuntimeError(f"onnxruntime: the export cannot keep the dims asked for "
                               f"dynamic, with torch's default kernels nor with its "
                               f"while-loop LSTM / GRU kernels{hint}: {failure}")
        if dynamic_shapes:
            _forget_traced_shapes(onnx_program.model)
        onnx_program.optimize()  # what optimize=True does, on the graph as it now is
    path = _private_dir() / f"program{next(_COUNT)}.onnx"
    onnx_program.save(str(path))

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3  # errors only (not the declared-output-shape warnings)
    session = onnxruntime.InferenceSession(str(path), sess_options=options,
                                           providers=["CPUExecutionProvider"])
    feeds, shapes, ranges = _input_spec(onnx_program)
    if [i.name for i in session.get_inputs()] != feeds or len(feeds) != len(args):
        raise RuntimeError(f"onnxruntime: the loaded graph's inputs "
                           f"{[i.name for i in session.get_inputs()]} are not the exported "
                           f"{feeds}, one per argument ({len(args)})")
    dims = {name: bounds for name, bounds in zip(names, ranges, strict=True)}
    return _OnnxProgram(session, feeds, names, path, shapes, dims)


onnxruntime_roundtrip.conformance_name = "onnxruntime"  # type: ignore[attr-defined]
onnxruntime_roundtrip.conformance_dtypes = ["float32"]  # type: ignore[attr-defined]
onnxruntime_roundtrip.conformance_devices = ["cpu"]  # type: ignore[attr-defined]
onnxruntime_roundtrip.conformance_features = [  # type: ignore[attr-defined]
    "dynamic.batch", "dynamic.seq"]
