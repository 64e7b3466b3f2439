"""The indexing ops, one ``OpSpec`` each: how the op is called through an implementation,
its oracle, its valid-case builder, the option sets its invalid cases run with, whether
negative indices wrap, the index dtypes it takes and its op-specific options. Adding an op
is one entry in ``SPECS`` (plus its oracle and adapter functions) and one ``areas:`` line
in the matrix; the tests (test_indexing.py) and every device (``indexing.*``) follow.

Contract of ``--impl indexing.<op>=module:attr`` (docs/areas/indexing.md): a callable with the
signature and semantics of the torch function or method it is named after; in-place methods
are ``fn(self, *args) -> self``; ``getitem`` is ``fn(x, key) -> x[key]`` and ``setitem``
``fn(x, key, value) -> x`` after ``x[key] = value``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from conformance.areas.indexing.cases import (
    Case,
    Params,
    build_class_targets,
    build_embedding,
    build_embedding_bag,
    build_gather,
    build_getitem,
    build_index_put_,
    build_index_select,
    build_index_slices,
    build_one_hot,
    build_put_,
    build_scatter_like,
    build_setitem,
    build_take,
)
from oracles import indexing as oracle

Tensors = dict[str, torch.Tensor]


DIMS = ({"dim": 0}, {"dim": -1})  # both ends of the dims


@dataclass(frozen=True)
class OpSpec:
    """One indexing op (its area is ``indexing.<name>``).

    ``call(fn, tensors, scalars)`` calls an implementation; ``oracle(arrays, scalars,
    integral)`` is the float64/int64 reference; ``build(params)`` a valid case from literal
    parameters (cases.py); ``invalid``: the option sets every invalid-index kind runs with;
    ``negative_ok``: indices in [-n, 0) wrap (torch's docs and ATen's checks), so -1 is valid
    and only below -n is out of range."""

    name: str
    call: Callable[[Any, Tensors, dict[str, Any]], Any]
    oracle: Callable[[dict[str, np.ndarray], dict[str, Any], bool], oracle.Expected]
    build: Callable[[Params], Case]
    invalid: tuple[dict[str, Any], ...] = ({},)
    negative_ok: bool = False
    index_dtypes: tuple[str, ...] = ("int64", "int32")
    options: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    extra_kinds: tuple[str, ...] = ()
    min_ndim: int = 1
    max_ndim: int = 3

    @property
    def writes(self) -> bool:
        return self.name.endswith("_") or self.name == "setitem"


def _key(s: dict[str, Any], index: torch.Tensor) -> tuple:
    """``x[:, ..., index]`` on dimension ``dim`` (a negative dim counts from the end)."""
    d = s["dim"]
    if d >= 0:
        return (slice(None),) * d + (index,)
    return (Ellipsis, index) + (slice(None),) * (-d - 1)


def _ce_kwargs(t: Tensors, s: dict[str, Any]) -> dict[str, Any]:
    return {"weight": t.get("weight"), "ignore_index": s["ignore_index"],
            "reduction": s["reduction"]}


REDUCE = ("sum", "prod", "mean", "amax", "amin")
INDEX_REDUCE = ("prod", "mean", "amax", "amin")  # index_reduce_ has no "sum"
_LOSS: dict[str, Any] = {  # nll_loss and cross_entropy
    "index_dtypes": ("int64",), "extra_kinds": ("near_ignore_index",), "min_ndim": 2,
    "invalid": (*({"reduction": r} for r in ("none", "mean", "sum")),
                {"reduction": "mean", "ignored": True, "weighted": True}),
    "options": {"reduction": ("none", "sum", "mean"), "weighted": (False, True),
                "ignore_index": (-100, 1), "ignored": (False, True)}}

SPECS: dict[str, OpSpec] = {s.name: s for s in [
    OpSpec("index_select", lambda f, t, s: f(t["x"], s["dim"], t["index"]),
           lambda a, s, i: oracle.index_select(a["x"], s["dim"], a["index"]),
           build_index_select, DIMS),
    OpSpec("gather", lambda f, t, s: f(t["x"], s["dim"], t["index"]),
           lambda a, s, i: oracle.gather(a["x"], s["dim"], a["index"]), build_gather, DIMS),
    OpSpec("scatter_", lambda f, t, s: f(t["x"], s["dim"], t["index"], t["src"]),
           lambda a, s, i: oracle.scatter(a["x"], s["dim"], a["index"], a["src"]),
           lambda p: build_scatter_like("scatter_", p), DIMS),
    OpSpec("scatter_add_", lambda f, t, s: f(t["x"], s["dim"], t["index"], t["src"]),
           lambda a, s, i: oracle.scatter(a["x"], s["dim"], a["index"], a["src"], "sum"),
           lambda p: build_scatter_like("scatter_add_", p), DIMS),
    OpSpec("scatter_reduce_",
           lambda f, t, s: f(t["x"], s["dim"], t["index"], t["src"], s["reduce"],
                             include_self=s["include_self"]),
           lambda a, s, i: oracle.scatter(a["x"], s["dim"], a["index"], a["src"], s["reduce"],
                                          s["include_self"], i),
           lambda p: build_scatter_like("scatter_reduce_", p),
           (*({"dim": 0, "reduce": r} for r in REDUCE), {"dim": -1, "reduce": "sum"}),
           options={"reduce": REDUCE, "include_self": (True, False)}),
    OpSpec("index_add_",
           lambda f, t, s: f(t["x"], s["dim"], t["index"], t["src"], alpha=s["alpha"]),
           lambda a, s, i: oracle.index_write(a["x"], s["dim"], a["index"], a["src"], "sum",
                                              alpha=s["alpha"]),
           lambda p: build_index_slices("index_add_", p), DIMS, options={"alpha": (1, -2)}),
    OpSpec("index_copy_", lambda f, t, s: f(t["x"], s["dim"], t["index"], t["src"]),
           lambda a, s, i: oracle.index_write(a["x"], s["dim"], a["index"], a["src"]),
           lambda p: build_index_slices("index_copy_", p), DIMS, index_dtypes=("int64",)),
    OpSpec("index_fill_", lambda f, t, s: f(t["x"], s["dim"], t["index"], s["value"]),
           lambda a, s, i: oracle.index_write(a["x"], s["dim"], a["index"], s["value"],
                                              negative_ok=True),
           lambda p: build_index_slices("index_fill_", p), DIMS, negative_ok=True,
           index_dtypes=("int64",)),
    OpSpec("index_put_",
           lambda f, t, s: f(t["x"], tuple(t[f"i{j}"] for j in range(s["nidx"])),
                             t["values"], s["accumulate"]),
           lambda a, s, i: oracle.index_put(a["x"], [a[f"i{j}"] for j in range(s["nidx"])],
                                            a["values"], s["accumulate"]),
           build_index_put_, ({"accumulate": False}, {"accumulate": True}), negative_ok=True,
           options={"accumulate": (False, True), "nidx": (0, 1, 2), "broadcast": (False, True),
                    "scalar_value": (False, True)}),
    OpSpec("index_reduce_",
           lambda f, t, s: f(t["x"], s["dim"], t["index"], t["src"], s["reduce"],
                             include_self=s["include_self"]),
           lambda a, s, i: oracle.index_write(a["x"], s["dim"], a["index"], a["src"],
                                              s["reduce"], s["include_self"], i),
           lambda p: build_index_slices("index_reduce_", p),
           (*({"dim": 0, "reduce": r} for r in INDEX_REDUCE), {"dim": -1}),
           options={"reduce": INDEX_REDUCE, "include_self": (True, False)}),
    OpSpec("take", lambda f, t, s: f(t["x"], t["index"]),
           lambda a, s, i: oracle.take(a["x"], a["index"]), build_take, negative_ok=True,
           index_dtypes=("int64",), min_ndim=0),
    OpSpec("put_", lambda f, t, s: f(t["x"], t["index"], t["src"], s["accumulate"]),
           lambda a, s, i: oracle.put(a["x"], a["index"], a["src"], s["accumulate"]),
           build_put_, ({"accumulate": False}, {"accumulate": True}), negative_ok=True,
           index_dtypes=("int64",), options={"accumulate": (False, True)}, min_ndim=0),
    OpSpec("getitem", lambda f, t, s: f(t["x"], _key(s, t["index"])),
           lambda a, s, i: oracle.getitem(a["x"], s["dim"], a["index"]), build_getitem, DIMS,
           negative_ok=True),
    OpSpec("setitem", lambda f, t, s: f(t["x"], _key(s, t["index"]), t["values"]),
           lambda a, s, i: oracle.setitem(a["x"], s["dim"], a["index"], a["values"]),
           build_setitem, DIMS, negative_ok=True, options={"scalar_value": (False, True)}),
    OpSpec("embedding", lambda f, t, s: f(t["index"], t["weight"]),
           lambda a, s, i: oracle.embedding(a["index"], a["weight"]), build_embedding,
           max_ndim=2),
    OpSpec("embedding_bag",
           lambda f, t, s: f(t["index"], t["weight"], t["offsets"], mode=s["mode"],
                             per_sample_weights=t.get("per_sample_weights"),
                             include_last_offset=s["include_last_offset"],
                             padding_idx=s["padding_idx"]),
           lambda a, s, i: oracle.embedding_bag(a["index"], a["weight"], a["offsets"],
                                                s["mode"], a.get("per_sample_weights"),
                                                s["include_last_offset"], s["padding_idx"]),
           build_embedding_bag,
           (*({"mode": m} for m in ("sum", "mean", "max")),
            {"mode": "sum", "per_sample_weights": True}, {"include_last_offset": True}),
           options={"mode": ("sum", "mean", "max"), "include_last_offset": (False, True),
                    "per_sample_weights": (False, True), "padding": (False, True)},
           extra_kinds=("offset_first", "offset_decreasing", "offset_past_end"), max_ndim=2),
    OpSpec("nll_loss", lambda f, t, s: f(t["x"], t["target"], **_ce_kwargs(t, s)),
           lambda a, s, i: oracle.nll_loss(a["x"], a["target"], a.get("weight"),
                                           s["ignore_index"], s["reduction"]),
           lambda p: build_class_targets("nll_loss", p), **_LOSS),
    OpSpec("cross_entropy", lambda f, t, s: f(t["x"], t["target"], **_ce_kwargs(t, s)),
           lambda a, s, i: oracle.cross_entropy(a["x"], a["target"], a.get("weight"),
                                                s["ignore_index"], s["reduction"]),
           lambda p: build_class_targets("cross_entropy", p), **_LOSS),
    OpSpec("one_hot", lambda f, t, s: f(t["index"], s["num_classes"]),
           lambda a, s, i: oracle.one_hot(a["index"], s["num_classes"]), build_one_hot,
           index_dtypes=("int64",)),
]}

# defaults for the options an op does not draw (builders read every key)
DEFAULTS: dict[str, Any] = {
    "reduce": "sum", "include_self": True, "alpha": 1, "accumulate": False, "nidx": 0,
    "broadcast": False, "scalar_value": False, "mode": "sum", "include_last_offset": False,
    "per_sample_weights": False, "padding": False, "reduction": "none", "weighted": False,
    "ignore_index": -100, "ignored": False, "negative": False, "bags": 3,
    "dense": False,
}

INVALID_SHAPE = (4, 5)  # every invalid case: a 4 x 5 operand (take/put_: 20 elements)


def invalid_params(spec: OpSpec, variant: dict[str, Any], seed: int) -> dict[str, Any]:
    """The literal parameters of an invalid case: a fixed structure, values from ``seed``."""
    params = dict(DEFAULTS, shape=INVALID_SHAPE, dim=0, k=3, seed=seed, dense=True)
    params.update({name: choices[0] for name, choices in spec.options.items()})
    params.update(variant)
    return params

BASE_KINDS = ("n", "-n-1", "-1", "huge", "int32_max", "int64_min")


def kinds(spec: OpSpec) -> tuple[str, ...]:
    """The invalid-index kinds of an op: one past the end (n), below the wrapped range
    (-n-1), -1 where negatives are rejected, a huge value, INT32_MAX (int32 indices),
    INT64_MIN (int64 indices), and the op's own (embedding_bag offsets, nll targets)."""
    base = [k for k in BASE_KINDS if not (k == "-1" and spec.negative_ok)]
    base = [k for k in base if k != "int32_max" or "int32" in spec.index_dtypes]
    return (*base, *spec.extra_kinds)


def bad_value(kind: str, n: int, index_dtype: str) -> int | None:
    """The invalid index of ``kind`` for a range of size n, or None if the dtype cannot
    hold it."""
    if kind == "n":
        return n
    if kind == "-n-1":
        return -n - 1
    if kind == "-1":
        return -1
    if kind == "huge":
        return 2**40 if index_dtype == "int64" else None
    if kind == "int32_max":
        return 2**31 - 1 if index_dtype == "int32" else None
    if kind == "int64_min":
        return -(2**63) if index_dtype == "int64" else None
    raise ValueError(kind)


def corrupt(case: Case, kind: str, index_dtype: str, rng: np.random.Generator) -> Case | None:
    """A copy of ``case`` with one invalid index (or invalid offsets), or None where the
    kind does not apply (the index dtype cannot hold the value; no entry to corrupt)."""
    arrays = {k: (role, v.copy()) for k, (role, v) in case.arrays.items()}
    scalars = dict(case.scalars)
    if kind.startswith("offset_"):
        offsets = arrays["offsets"][1]
        length = len(arrays["index"][1])
        if kind == "offset_first":
            offsets[0] = 1 if length else -1
        elif kind == "offset_decreasing":
            if len(offsets) >= 3 and length:
                offsets[1], offsets[2] = length, 0
            elif len(offsets) == 2:
                offsets[1] = -1
            else:
                return None
        else:
            offsets[-1] = length + 1
        return Case(case.op, arrays, scalars, case.index, case.n, case.dest)
    role, index = arrays[case.index]
    if index.size == 0:
        return None
    if kind == "near_ignore_index":  # -101 (or -100 when another index is ignored)
        value: int | None = -101 if scalars["ignore_index"] == -100 else -100
    else:
        value = bad_value(kind, case.n, index_dtype if role == "index" else "int64")
    if value is None:
        return None
    flat = index.reshape(-1)
    flat[int(rng.integers(0, flat.size))] = value
    return Case(case.op, arrays, scalars, case.index, case.n, case.dest)
