"""Correct implementations written outside torch ("outside implementations"), plugged in
with ``--impl AREA=tests.planted.outside_impls:NAME``.

Unlike the rest of ``tests/planted`` these are not faults: each is written independently
from the public documentation of the op and the suite's published contracts
(``impls/indexing.py``, ``impls/export.py``, ``docs/contracts.md``), and each is correct,
and stricter than torch where torch is lax (it validates every index and every offset
before computing anything). ``tests/test_trust.py`` uses them to show that matrix entries
written for torch's own bugs do not apply to an implementation that does not have them.

- ``index_select``  (area ``indexing.index_select``)
- ``embedding_bag`` (area ``indexing.embedding_bag``)
- ``torchscript``   (area ``export``): a TorchScript script / save / load round trip.
- ``onnxruntime_roundtrip`` (area ``export``) is in ``outside_impls_onnx.py``.
"""

from __future__ import annotations

import ast
import atexit
import copy
import inspect
import itertools
import shutil
import tempfile
import textwrap
import warnings
from pathlib import Path
from typing import Any

import torch

_INDEX_DTYPES = (torch.int32, torch.int64)


# --------------------------------------------------------------------------- indexing


def _first_bad(index: torch.Tensor, size: int) -> tuple[int, int] | None:
    """(flat position, value) of the first element of ``index`` outside [0, size)."""
    flat = index.reshape(-1)
    if flat.numel() == 0:
        return None
    bad = (flat < 0) | (flat >= size)
    if not bool(bad.any()):
        return None
    pos = int(torch.nonzero(bad)[0, 0])
    return pos, int(flat[pos])


def index_select(x: torch.Tensor, dim: int, index: torch.Tensor) -> torch.Tensor:
    """``torch.index_select(x, dim, index)``, a correct outside implementation.

    Written from the documentation, not by calling ``torch.index_select``: the whole index
    tensor is validated first (every element must lie in ``[0, x.size(dim))``; negative
    indices are invalid for index_select and are never wrapped), raising ``IndexError``
    ("... out of range ...") otherwise; then the rows are gathered by advanced indexing
    into a new contiguous tensor of ``x``'s dtype and device (autograd flows through it).
    """
    if not isinstance(index, torch.Tensor) or index.dtype not in _INDEX_DTYPES:
        raise RuntimeError("index_select(): expected an int32 or int64 index tensor, got "
                           f"{getattr(index, 'dtype', type(index).__name__)}")
    if index.dim() > 1:
        raise IndexError(f"index_select(): the index must be 0-d or 1-d, got {index.dim()}-d")
    ndim = max(x.dim(), 1)
    if not -ndim <= dim < ndim:
        raise IndexError(f"index_select(): dimension {dim} out of range for a "
                         f"{x.dim()}-d tensor (expected to be in [{-ndim}, {ndim - 1}])")
    dim %= ndim
    size = x.shape[dim] if x.dim() else 1
    bad = _first_bad(index, size)
    if bad is not None:
        pos, value = bad
        raise IndexError(f"index_select(): index {value} (at position {pos}) is out of range "
                         f"for dimension {dim} with size {size} (valid: 0 to {size - 1})")
    if x.dim() == 0:
        if index.numel() != 1:
            raise IndexError("index_select(): the index into a 0-d tensor must hold exactly "
                             f"one value, got {index.numel()}")
        return x.clone()
    idx = index.reshape(-1).to(torch.int64)
    key = (slice(None),) * dim + (idx,)
    return x[key].contiguous()


def embedding_bag(input: torch.Tensor, weight: torch.Tensor,
                  offsets: torch.Tensor | None = None, max_norm: float | None = None,
                  norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                  mode: str = "mean", sparse: bool = False,
                  per_sample_weights: torch.Tensor | None = None,
                  include_last_offset: bool = False,
                  padding_idx: int | None = None) -> torch.Tensor:
    """``torch.nn.functional.embedding_bag``, a correct outside implementation.

    Same keywords as torch's (``mode`` sum / mean / max, ``per_sample_weights`` with sum
    only, ``include_last_offset``, ``padding_idx``, ``max_norm`` / ``norm_type`` which
    renormalise the referenced rows of ``weight`` in place as torch documents;
    ``scale_grad_by_freq`` and ``sparse`` only concern gradients). Validated before
    anything is computed: every index (the whole input, not only the bagged part) in
    ``[0, num_embeddings)`` (``IndexError``), offsets 1-D with ``offsets[0] == 0``,
    non-decreasing, ``offsets[-1] <= len(input)`` (``RuntimeError`` naming ``offsets[``).
    A 2-D input ``(B, N)`` with ``offsets=None`` is ``B`` bags of ``N`` (``N == 0``: ``B``
    empty bags). Bag ``i`` is ``input[offsets[i]:offsets[i+1]]`` (the last one runs to the
    end of the input, or to ``offsets[-1]`` with ``include_last_offset``). The bags are
    reduced in float64 with explicit torch ops (not ``F.embedding_bag``); entries equal to
    ``padding_idx`` are left out (of the mean's count too); an empty bag gives zeros in
    every mode, ``max`` included. The result is cast to ``weight``'s dtype.
    """
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        raise ValueError(f"embedding_bag: weight has to be a 2-D tensor, got "
                         f"{getattr(weight, 'dim', lambda: '?')()}-D")
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"embedding_bag: mode has to be one of sum, mean or max, got {mode!r}")
    if mode == "max" and (scale_grad_by_freq or sparse):
        raise ValueError("embedding_bag: max mode supports neither scale_grad_by_freq nor "
                         "sparse")
    if input.dtype not in _INDEX_DTYPES:
        raise RuntimeError(f"embedding_bag: expected int32 or int64 indices, got {input.dtype}")
    if per_sample_weights is not None:
        if per_sample_weights.shape != input.shape:
            raise ValueError("embedding_bag: per_sample_weights "
                             f"({tuple(per_sample_weights.shape)}) must have the input's "
                             f"shape ({tuple(input.shape)})")
        if mode != "sum":
            raise NotImplementedError("embedding_bag: per_sample_weights is only supported "
                                      f"with mode='sum' (got mode={mode!r})")
    num, width = weight.shape
    device = weight.device

    # bags: a 2-D input is B fixed-length bags; a 1-D input needs 1-D offsets
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("embedding_bag: if input is 2-D, offsets has to be None (each "
                             "row is one bag)")
        n_bags, length = input.shape
        flat = input.reshape(-1)
        starts = torch.arange(n_bags, dtype=torch.int64) * length
        ends = starts + length
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("embedding_bag: offsets has to be a 1-D tensor but got None")
        if not isinstance(offsets, torch.Tensor) or offsets.dim() != 1:
            raise ValueError("embedding_bag: offsets has to be a 1-D tensor, got "
                             f"{getattr(offsets, 'dim', lambda: '?')()}-D")
        if offsets.dtype not in _INDEX_DTYPES:
            raise RuntimeError(f"embedding_bag: expected int32 or int64 offsets, got "
                               f"{offsets.dtype}")
        flat = input
        off = offsets.detach().to("cpu", torch.int64)
        if include_last_offset and off.numel() == 0:
            raise ValueError("embedding_bag: include_last_offset needs at least one offset "
                             "(the end of the last bag)")
        if off.numel():
            if int(off[0]) != 0:
                raise RuntimeError(f"embedding_bag: offsets[0] has to be 0 (the first bag "
                                   f"starts at position 0), got offsets[0] = {int(off[0])}")
            steps = off[1:] - off[:-1]
            if bool((steps < 0).any()):
                i = int(torch.nonzero(steps < 0)[0, 0]) + 1
                raise RuntimeError(f"embedding_bag: offsets must be non-decreasing, but "
                                   f"offsets[{i}] = {int(off[i])} is smaller than "
                                   f"offsets[{i - 1}] = {int(off[i - 1])}")
            if int(off[-1]) > flat.numel():
                raise RuntimeError(f"embedding_bag: offsets[-1] = {int(off[-1])} is out of "
                                   f"range: greater than the input's length {flat.numel()}")
        if include_last_offset:
            starts, ends = off[:-1], off[1:]
        else:
            starts = off
            ends = torch.cat([off[1:], torch.tensor([flat.numel()], dtype=torch.int64)])
        n_bags = starts.numel()
    else:
        raise ValueError(f"embedding_bag: input has to be a 1-D or 2-D tensor, got "
                         f"{input.dim()}-D")

    # every index, bagged or not, must name a row of weight
    bad = _first_bad(flat, num)
    if bad is not None:
        pos, value = bad
        raise IndexError(f"embedding_bag: index {value} (at position {pos} of the input) is "
                         f"out of range for an embedding table of {num} rows "
                         f"(valid: 0 to {num - 1})")
    if padding_idx is not None:
        if not -num <= padding_idx < num:
            raise IndexError(f"embedding_bag: padding_idx {padding_idx} is out of range for "
                             f"{num} embeddings (valid: {-num} to {num - 1})")
        padding_idx %= num

    if max_norm is not None:  # torch renormalises the referenced rows of weight in place
        with torch.no_grad():
            rows = torch.unique(flat.detach().to(torch.int64))
            norms = weight[rows].to(torch.float64).norm(p=norm_type, dim=1)
            big = norms > max_norm
            if bool(big.any()):
                scale = (max_norm / (norms[big] + 1e-7)).to(weight.dtype)
                weight[rows[big]] = weight[rows[big]] * scale.unsqueeze(1)

    # positions in bags and the bag of each (bags are contiguous runs from position 0)
    counts = (ends - starts).to(torch.int64)
    used = int(ends[-1]) if n_bags else 0
    bag_of = torch.repeat_interleave(torch.arange(n_bags, dtype=torch.int64), counts)
    idx = flat.reshape(-1)[:used].detach().to("cpu", torch.int64)
    keep = torch.ones(used, dtype=torch.bool)
    if padding_idx is not None:
        keep = idx != padding_idx
    bag_of, idx = bag_of[keep], idx[keep]

    rows = weight.to(torch.float64)[idx.to(device)]
    if per_sample_weights is not None:
        psw = per_sample_weights.reshape(-1)[:used][keep.to(device)].to(torch.float64)
        rows = rows * psw.unsqueeze(1)
    out = torch.zeros(n_bags, width, dtype=torch.float64, device=device)
    bags = bag_of.to(device)
    if mode in ("sum", "mean"):
        out = out.index_add(0, bags, rows)
        if mode == "mean":
            n = torch.bincount(bag_of, minlength=n_bags).clamp(min=1).to(device)
            out = out / n.to(torch.float64).unsqueeze(1)
    else:  # max: an empty bag keeps its zeros
        out = out.scatter_reduce(0, bags.unsqueeze(1).expand(-1, width), rows, "amax",
                                 include_self=False)
    return out.to(weight.dtype)


# --------------------------------------------------------------------------- export

_DIR: Path | None = None
_COUNT = itertools.count()


def _private_dir() -> Path:
    """A temporary directory only this process writes to (removed at exit)."""
    global _DIR
    if _DIR is None:
        _DIR = Path(tempfile.mkdtemp(prefix="outside-export-"))
        atexit.register(shutil.rmtree, _DIR, True)
    return _DIR


def _flatten(out: Any) -> list[torch.Tensor]:
    """Nested tuples / lists of tensors, flattened in order."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for item in out for t in _flatten(item)]
    raise TypeError(f"torchscript: an output that is not a tensor: {type(out).__name__}")


def _input_names(module: torch.nn.Module, n: int) -> list[str]:
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params
             if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return (names + [f"arg{i}" for i in range(len(names), n)])[:n]


def _requested(dynamic_shapes: Any, names: list[str]) -> dict[str, dict[int, Any]]:
    """Per input name, the ``{dim: Dim or Dim.AUTO}`` asked for."""
    if dynamic_shapes is None:
        return {}
    if isinstance(dynamic_shapes, dict):
        items = list(dynamic_shapes.items())
    else:
        items = list(zip(names, dynamic_shapes, strict=False))
    return {str(name): dict(spec) for name, spec in items if isinstance(spec, dict)}


def _is_named(d: Any) -> bool:
    return isinstance(getattr(d, "__name__", None), str) and hasattr(d, "min")


def _bound(value: Any) -> int | None:
    try:
        v = int(value)
    except Exception:  # sympy's infinities
        return None
    return v if abs(v) < 2**62 else None


_SCRIPTABLE: dict[type, type] = {}


def _has_ellipsis(node: ast.AST | None) -> bool:
    return node is not None and any(isinstance(n, ast.Constant) and n.value is Ellipsis
                                    for n in ast.walk(node))


def _scriptable_class(cls: type) -> type:
    """``cls``, or a subclass whose ``forward`` is the same code without a return
    annotation TorchScript cannot read (``tuple[torch.Tensor, ...]``: "Expression of type
    dots cannot be used in a type expression"); TorchScript then infers the return type
    from the ``return`` statements. Decided from the source before anything is scripted:
    a failed ``torch.jit.script`` leaves the class half-defined in TorchScript's
    compilation unit ("Can't redefine method: forward") for the rest of the process."""
    if cls in _SCRIPTABLE:
        return _SCRIPTABLE[cls]
    result = cls
    fn = getattr(cls, "forward", None)
    fn = getattr(fn, "__func__", fn)
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        tree = None
    node = tree.body[0] if tree is not None and tree.body else None
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _has_ellipsis(node.returns):
        node.returns = None
        path = _private_dir() / f"forward{next(_COUNT)}.py"  # real source for TorchScript
        path.write_text(ast.unparse(tree) + "\n")
        namespace = dict(fn.__globals__)
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False):
            namespace[name] = cell.cell_contents
        exec(compile(path.read_text(), str(path), "exec"), namespace)  # our own file
        forward = namespace[node.name]
        forward.__qualname__ = f"{cls.__qualname__}.forward"
        result = type(cls.__name__, (cls,), {
            "forward": forward, "__module__": cls.__module__,
            "__qualname__": f"{cls.__qualname__}_scriptable"})
    _SCRIPTABLE[cls] = result
    return result


class _Program:
    """The loaded TorchScript module: ``program(*args)`` -> a flat tuple of tensors."""

    def __init__(self, loaded: Any, artefact: Path, dims: dict[str, dict[int, list]],
                 fixed_shapes: list[tuple[int, ...]] | None) -> None:
        self._loaded = loaded
        self.artefact = str(artefact)
        self.dynamic_dims = dims
        self._fixed = fixed_shapes  # a traced program: only the example's shapes

    def __call__(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if self._fixed is not None:
            shapes = [tuple(a.shape) for a in args]
            if shapes != self._fixed:
                raise ValueError(f"torchscript (traced, static shapes): expected inputs of "
                                 f"shapes {self._fixed}, got {shapes}")
        with torch.no_grad():
            return tuple(_flatten(self._loaded(*args)))


def torchscript(module: torch.nn.Module, example_args: tuple, dynamic_shapes: Any) -> _Program:
    """A TorchScript round trip, a correct outside implementation of the area ``export``.

    A deep copy of the module (the caller's is never touched) is ``torch.jit.script``-ed
    (shape-generic: every size the model's maths admits runs); a ``forward`` whose return
    annotation TorchScript cannot read (``tuple[torch.Tensor, ...]``) is scripted from a
    subclass whose ``forward`` is the same code without that annotation (TorchScript
    infers the return type). Only where scripting fails
    and ``dynamic_shapes`` is None does it fall back to ``torch.jit.trace``, whose program
    specialises the example's shapes and so refuses (ValueError) any other shape. The
    result goes through ``torch.jit.save`` into a private temporary directory of this
    process and back through ``torch.jit.load`` (only that file is loaded). The program
    returns the outputs flattened in order into a tuple of tensors; ``dynamic_dims``
    reports the dims asked for: a named ``Dim`` with its ``[min, max]``, ``Dim.AUTO``
    (probed: the program ran at another size) as ``[None, None]``.
    """
    model = copy.deepcopy(module)
    args = tuple(example_args)
    names = _input_names(model, len(args))
    with warnings.catch_warnings():  # TorchScript's deprecation warnings
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", UserWarning)
        fixed: list[tuple[int, ...]] | None = None
        try:
            model.__class__ = _scriptable_class(type(model))
            scripted = torch.jit.script(model)
        except Exception as exc:
            if dynamic_shapes is not None:
                raise RuntimeError(f"torchscript: torch.jit.script failed and a traced "
                                   f"program cannot keep dims dynamic: "
                                   f"{type(exc).__name__}: {exc}") from exc
            with torch.no_grad():
                scripted = torch.jit.trace(model, args, check_trace=False)
            fixed = [tuple(a.shape) for a in args]
        path = _private_dir() / f"program{next(_COUNT)}.pt"
        torch.jit.save(scripted, str(path))
        loaded = torch.jit.load(str(path), map_location=args[0].device if args else None)
    loaded.eval()

    dims: dict[str, dict[int, list]] = {name: {} for name in names}
    requested = _requested(dynamic_shapes, names) if fixed is None else {}
    auto: list[tuple[int, int]] = []  # (input position, dim) of the Dim.AUTO dims
    for name, spec in requested.items():
        for dim, d in spec.items():
            if d is None:
                continue
            if _is_named(d):
                dims.setdefault(name, {})[int(dim)] = [_bound(d.min), _bound(d.max)]
            elif name in names:
                auto.append((names.index(name), int(dim)))
    program = _Program(loaded, path, dims, fixed)
    for group in _dynamic_auto(program, args, auto):
        for pos, dim in group:
            dims[names[pos]][dim] = [None, None]
    return program


def _dynamic_auto(program: _Program, args: tuple,
                  auto: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """The ``Dim.AUTO`` dims the program accepts at another size: all together if it runs
    so, else each group of dims that share the example's size (a batch shared by ``x``
    and ``h0``) alone."""
    if not auto:
        return []

    def runs(group: list[tuple[int, int]]) -> bool:
        grown = list(args)
        for pos, dim in group:
            t = grown[pos]
            shape = list(t.shape)
            shape[dim] += 1
            grown[pos] = torch.zeros(shape, dtype=t.dtype, device=t.device)
        try:
            program(*grown)
        except Exception:
            return False
        return True

    if runs(auto):
        return [auto]
    groups: dict[int, list[tuple[int, int]]] = {}
    for pos, dim in auto:
        groups.setdefault(int(args[pos].shape[dim]), []).append((pos, dim))
    return [g for g in groups.values() if runs(g)]


torchscript.conformance_name = "torchscript"  # type: ignore[attr-defined]
# the area's dtype vocabulary is float32 / bfloat16 / float16 (float64 is refused, exit 4)
torchscript.conformance_dtypes = ["float32"]  # type: ignore[attr-defined]
torchscript.conformance_devices = ["cpu"]  # type: ignore[attr-defined]
torchscript.conformance_features = ["dynamic.batch", "dynamic.seq"]  # type: ignore[attr-defined]
