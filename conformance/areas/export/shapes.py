"""The export area's input shapes beyond the catalogue (test_shapes.py): recurrent modules
without biases, unbatched inputs, ``Dim.DYNAMIC``, a derived dim and packed sequences, each
a small case with its float64 oracle (oracles/recurrent.py) and its same-precision baseline
(baseline.py), and the child side of its round trip (``roundtrip``, run by the isolation
runner like cases.roundtrip).

Each case is exported at its example and run at its points: a point marked ``must`` lies in
the range the export asked for by name (or ``Dim.DYNAMIC``) with every other dim as in the
example, so the program has to accept it; at the others it may refuse (raise), never
answer wrongly.

- ``lstm_nobias``, ``gru_nobias``: ``bias=False`` (a batch_first LSTM with (h0, c0); a
  2-layer GRU with h0), a named dynamic batch (1..64; batch 65 is past the max).
- ``rnn_unbatched``, ``lstm_unbatched``, ``gru_unbatched``: x of (seq, features) and h0
  (c0) of (layers, hidden), no batch dim (torch's unbatched form), static: the outputs have
  no batch dim either; other lengths may be refused.
- ``lstm_dynamic``: ``Dim.DYNAMIC`` on batch and length (no bounds: every size must run).
- ``lstm_derived``: two inputs, the second twice as long (``2 * Dim("seq", max=64)``),
  concatenated along time before an LSTM; a pair of other lengths breaks the relation (may
  be refused).
- ``lstm_packed``: ``pack_padded_sequence`` with the lengths as an input (pytorch#112044),
  static shapes: right at other lengths and batches, or refused (at export or run time).
"""

from __future__ import annotations

import copy
import time
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.export import Dim

from conformance.areas.export import baseline
from conformance.areas.export.cases import _fingerprint, _first_line, _outputs, mutations
from conformance.areas.export.catalogue import _X, _XC, _XH, _XHC, FEATURES, HIDDEN, params
from conformance.harness.registry import load_object
from conformance.harness.tensors import exact_numpy, rounded
from oracles import recurrent

MAX_BATCH, MAX_SEQ, MAX_HALF = 64, 257, 64


@dataclass(frozen=True)
class Point:
    """One size a case runs at: batch (None: unbatched), length, the second input's length
    (derived), the packed lengths, and whether the program must accept it."""

    batch: int | None
    seq: int
    must: bool = False
    seq2: int | None = None
    lengths: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        s = f"{'u' if self.batch is None else self.batch}x{self.seq}"
        if self.seq2 is not None:
            s += f"+{self.seq2}"
        return s + (f"[{','.join(map(str, self.lengths))}]" if self.lengths else "")


@dataclass(frozen=True)
class Shape:
    name: str
    kind: str  # RNN | LSTM | GRU
    form: str  # plain | derived | packed
    options: dict[str, Any]
    states: bool
    dynamic: str  # static | batch | dynamic | derived
    example: Point
    points: tuple[Point, ...]
    note: str = field(default="")

    @property
    def outputs(self) -> tuple[str, ...]:
        if self.form == "packed":
            return ("output",)
        return ("output", "h_n", "c_n") if self.kind == "LSTM" else ("output", "h_n")

    @property
    def unbatched(self) -> bool:
        return self.example.batch is None

    @property
    def batch_first(self) -> bool:
        return bool(self.options.get("batch_first"))


def _opts(**kw: Any) -> dict[str, Any]:
    return {"input_size": FEATURES, "hidden_size": HIDDEN, **kw}


_BATCHES = (Point(3, 4, True), Point(1, 4, True), Point(7, 4, True), Point(64, 4, True),
            Point(65, 4), Point(3, 5))
_UNBATCHED = (Point(None, 4, True), Point(None, 1), Point(None, 5))
SHAPES = {s.name: s for s in [
    Shape("lstm_nobias", "LSTM", "plain", _opts(bias=False, batch_first=True), True, "batch",
          _BATCHES[0], _BATCHES),
    Shape("gru_nobias", "GRU", "plain", _opts(bias=False, num_layers=2), True, "batch",
          _BATCHES[0], _BATCHES),
    *(Shape(f"{k.lower()}_unbatched", k, "plain", _opts(num_layers=2), True, "static",
            _UNBATCHED[0], _UNBATCHED) for k in ("RNN", "LSTM", "GRU")),
    Shape("lstm_dynamic", "LSTM", "plain", _opts(batch_first=True), False, "dynamic",
          Point(3, 4, True), (Point(3, 4, True), Point(1, 1, True), Point(7, 9, True),
                              Point(65, 4, True), Point(3, 258, True))),
    Shape("lstm_derived", "LSTM", "derived", _opts(batch_first=True), False, "derived",
          Point(3, 4, True, 8), (Point(3, 4, True, 8), Point(3, 1, True, 2),
                                 Point(3, 9, True, 18), Point(3, 64, True, 128),
                                 Point(3, 65, False, 130), Point(3, 4, False, 7))),
    Shape("lstm_packed", "LSTM", "packed", _opts(batch_first=True), False, "static",
          Point(3, 5, True, lengths=(5, 2, 4)),
          (Point(3, 5, True, lengths=(5, 2, 4)), Point(3, 5, lengths=(3, 5, 1)),
           Point(3, 5, lengths=(1, 1, 1)), Point(2, 5, lengths=(5, 3)),
           Point(4, 6, lengths=(6, 2, 6, 3)))),
]}


class _Derived(nn.Module):
    """An LSTM over two inputs concatenated along time (the second twice as long)."""

    def __init__(self, core: nn.Module) -> None:
        super().__init__()
        self.rnn = core

    def forward(self, x1: torch.Tensor, x2: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        out, (h, c) = self.rnn(torch.cat([x1, x2], dim=1))
        return out, h, c


class _Packed(nn.Module):
    """pack_padded_sequence(x, lengths) -> LSTM -> pad_packed_sequence (padding zeros)."""

    def __init__(self, core: nn.Module) -> None:
        super().__init__()
        self.rnn = core

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor]:
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True,
                                                   enforce_sorted=False)
        out, _ = self.rnn(packed)
        return (nn.utils.rnn.pad_packed_sequence(out, batch_first=True,
                                                 total_length=x.shape[1])[0],)


def build(shape: Shape, dtype: torch.dtype, seed: int = 0) -> nn.Module:
    """The case's module in eval mode, seeded weights in ``dtype`` (CPU)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        core = getattr(nn, shape.kind)(**shape.options)
        if shape.form == "derived":
            module: nn.Module = _Derived(core)
        elif shape.form == "packed":
            module = _Packed(core)
        else:
            lstm = shape.kind == "LSTM"
            wrap = (_XHC if lstm else _XH) if shape.states else (_XC if lstm else _X)
            module = wrap(core)
    return module.to(dtype).eval()


def _state_shape(shape: Shape, batch: int | None, cell: bool = False) -> tuple[int, ...]:
    o = shape.options
    layers = o.get("num_layers", 1) * (2 if o.get("bidirectional") else 1)
    size = o["hidden_size"] if cell else (o.get("proj_size", 0) or o["hidden_size"])
    return (layers, size) if batch is None else (layers, batch, size)


def make_inputs(shape: Shape, point: Point, dtype: str, seed: int = 0) -> list[np.ndarray]:
    """Float64 arrays rounded to ``dtype`` (int64 lengths for a packed case)."""
    rng = np.random.default_rng([seed, point.batch or 0, point.seq, point.seq2 or 0,
                                 len(shape.name), *point.lengths])

    def seq(n: int) -> np.ndarray:
        if point.batch is None:
            return rng.standard_normal((n, FEATURES))
        return rng.standard_normal((point.batch, n, FEATURES) if shape.batch_first
                                   else (n, point.batch, FEATURES))

    arrays = [seq(point.seq)]
    if shape.form == "derived":
        arrays.append(seq(point.seq2 or 0))
    if shape.states:
        arrays.append(rng.standard_normal(_state_shape(shape, point.batch)))
        if shape.kind == "LSTM":
            arrays.append(rng.standard_normal(_state_shape(shape, point.batch, cell=True)))
    out = [rounded(a, dtype) for a in arrays]
    if shape.form == "packed":
        out.append(np.array(point.lengths, dtype=np.int64))
    return out


def to_tensors(arrays: list[np.ndarray], dtype: torch.dtype, device: Any
               ) -> list[torch.Tensor]:
    # packed lengths stay on the CPU (pack_padded_sequence wants them there)
    return [torch.from_numpy(a) if a.dtype == np.int64
            else torch.from_numpy(a).to(dtype=dtype, device=device) for a in arrays]


def dynamic_shapes(shape: Shape) -> dict[str, Any] | None:
    """What the case asks ``torch.export.export`` for."""
    if shape.dynamic == "static":
        return None
    b, s = (0, 1) if shape.batch_first else (1, 0)
    if shape.dynamic == "batch":
        batch = Dim("batch", min=1, max=MAX_BATCH)
        names = ("x", "h0", "c0") if shape.kind == "LSTM" else ("x", "h0")
        return {n: {b if n == "x" else 1: batch} for n in names}
    if shape.dynamic == "dynamic":
        return {"x": {b: Dim.DYNAMIC, s: Dim.DYNAMIC}}
    seq = Dim("seq", min=1, max=MAX_HALF)  # derived: x2's length is 2 * seq
    return {"x1": {s: seq}, "x2": {s: 2 * seq}}


def _core_opts(shape: Shape) -> dict[str, Any]:
    return {k: v for k, v in shape.options.items()
            if k not in ("input_size", "hidden_size", "bias")}


def _per_sequence(shape: Shape, x: Any, lengths: np.ndarray, run: Any) -> Any:
    """Each row's first ``length`` steps alone, zero-padded to x's length."""
    rows = []
    for i, n in enumerate(lengths):
        out = run(x[i:i + 1, :int(n)])
        pad = x.shape[1] - int(n)
        rows.append(np.pad(out, ((0, 0), (0, pad), (0, 0))) if isinstance(out, np.ndarray)
                    else torch.nn.functional.pad(out, (0, 0, 0, pad)))
    return np.concatenate(rows) if isinstance(rows[0], np.ndarray) else torch.cat(rows)


def oracle(shape: Shape, module: nn.Module, inputs: list[np.ndarray]
           ) -> tuple[np.ndarray, ...]:
    """The float64 outputs (oracles/recurrent.py, unbatched form included)."""
    p, o = params(module, "rnn."), _core_opts(shape)
    if shape.form == "packed":
        x, lengths = inputs
        return (_per_sequence(shape, x, lengths,
                              lambda xs: recurrent.rnn(shape.kind, xs, p, **o)[0]),)
    if shape.form == "derived":
        return tuple(recurrent.rnn(shape.kind, np.concatenate(inputs[:2], axis=1), p, **o))
    h0 = inputs[1] if len(inputs) > 1 else None
    c0 = inputs[2] if len(inputs) > 2 else None
    return tuple(recurrent.rnn(shape.kind, inputs[0], p, h0=h0, c0=c0, **o))


def same_precision(shape: Shape, module: nn.Module, inputs: list[np.ndarray],
                   dtype: torch.dtype) -> list[tuple[np.ndarray, ...]]:
    """The plain same-precision computations (baseline.recurrent, both GRU forms), CPU."""
    args = to_tensors(inputs, dtype, "cpu")
    p = {k.removeprefix("rnn."): v for k, v in module.state_dict().items()}
    o = {**_core_opts(shape), "hidden_size": shape.options["hidden_size"]}
    forms = baseline.FORMS if shape.kind == "GRU" else baseline.FORMS[:1]
    outs = []
    with torch.no_grad():
        for form in forms:
            def run(x: torch.Tensor, h0: Any = None, c0: Any = None, _f: str = form) -> Any:
                return baseline.recurrent(shape.kind, x, p, h0=h0, c0=c0, gru_form=_f, **o)
            if shape.form == "packed":
                out: Any = (_per_sequence(shape, args[0], inputs[1], lambda xs: run(xs)[0]),)
            elif shape.form == "derived":
                out = run(torch.cat(args[:2], dim=1))
            elif shape.unbatched:
                lifted = [a.unsqueeze(1) for a in args]
                out = tuple(t.squeeze(1) for t in run(*lifted))
            else:
                out = run(*args)
            outs.append(tuple(exact_numpy(t) for t in out))
    return outs


def roundtrip(spec: str, name: str, dtype: str, device: str, inputs: list[list[np.ndarray]],
              example: list[np.ndarray]) -> dict[str, Any]:
    """The child side: build the program at ``example``, run it and eager at each point."""
    shape = SHAPES[name]
    t = getattr(torch, dtype)
    fn = load_object(spec, "--impl export")
    result: dict[str, Any] = {"runs": []}
    module = build(shape, t).to(device)
    reference = copy.deepcopy(module)
    before = _fingerprint(module)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = fn(module, tuple(to_tensors(example, t, device)), dynamic_shapes(shape))
    except ImportError as exc:
        result["missing"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        return result
    except Exception as exc:
        result["build_error"] = _first_line(exc)
        result["build_s"] = time.perf_counter() - start
        return result
    result["build_s"] = time.perf_counter() - start
    for key in ("dynamic_dims", "artefact", "trace", "delegated"):
        result[key] = getattr(program, key, None)
    result["mutated"] = mutations(before, module)
    for arrays in inputs:
        xs = to_tensors(arrays, t, device)
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            run: dict[str, Any] = {"eager": [o["values"] for o in _outputs(reference(*xs))]}
            try:
                run["outputs"] = _outputs(program(*xs))
            except Exception as exc:
                run["refused"] = _first_line(exc)
        result["runs"].append(run)
    result["mutated"] = result["mutated"] or mutations(before, module)
    return result
