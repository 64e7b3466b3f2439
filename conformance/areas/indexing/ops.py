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
    build_bincount,
    build_class_targets,
    build_embedding,
    build_embedding_bag,
    build_gather,
    build_getitem,
    build_index_put_,
    build_index_select,
    build_index_slices,
    build_masked_scatter_,
    build_masked_select,
    build_one_hot,
    build_put_,
    build_repeat_interleave,
    build_scatter_like,
    build_searchsorted,
    build_setitem,
    build_take,
    build_take_along_dim,
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
    no_kinds: tuple[str, ...] = ()  # base kinds that cannot apply
    upper_ok: bool = False  # indices >= n are valid (bincount): only negative ones are bad
    base_kinds: bool = True  # False: only the op's own kinds (size checks, no index)
    out_dtype: str | None = None  # the result's dtype when it is not the data's
    min_ndim: int = 1
    max_ndim: int = 3

    @property
    def writes(self) -> bool:
        return self.name.endswith("_") or self.name == "setitem"

    def bounds(self, n: int) -> tuple[float, float]:
        """The valid index range [low, high) for a dimension of size n."""
        return (-n if self.negative_ok else 0), (float("inf") if self.upper_ok else n)


KEYS = (*DIMS, {"two": True})  # getitem / setitem: x[..., idx] on each end, x[i0, idx]
KEY_OPTIONS: dict[str, tuple[Any, ...]] = {"two": (False, True), "mask": (False, True)}
MASK_KINDS = ("mask_short", "mask_long")  # a bool mask one shorter / longer than dim 0


def _set_value(s: dict[str, Any], values: Any) -> Any:
    """setitem's value: the values array, or a Python number (``raw_value``: 2 or 3,
    whatever the dtype: a bool tensor stores its truth)."""
    return values if s.get("raw_value") is None else s["raw_value"]


def _keyed(s: dict[str, Any]) -> bool:
    return bool(s.get("mask") or s.get("two"))


def _key_arrays(a: dict[str, Any]) -> dict[str, Any]:
    return {k: a[k] for k in ("mask", "i0", "index") if k in a}


def _key(s: dict[str, Any], t: Tensors) -> Any:
    """``x[:, ..., index]`` on dimension ``dim`` (a negative dim counts from the end),
    ``x[mask]`` or ``x[i0, index]``."""
    if s.get("mask"):
        return t["mask"]
    if s.get("two"):
        return (t["i0"], t["index"])
    index = t["index"]
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
    "no_kinds": ("empty_dim",),  # the class dim is never empty
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
    OpSpec("getitem", lambda f, t, s: f(t["x"], _key(s, t)),
           lambda a, s, i: oracle.getitem_key(a["x"], _key_arrays(a)) if _keyed(s) else
           oracle.getitem(a["x"], s["dim"], a["index"]), build_getitem, KEYS,
           negative_ok=True, options=KEY_OPTIONS, extra_kinds=MASK_KINDS),
    OpSpec("setitem", lambda f, t, s: f(t["x"], _key(s, t), _set_value(s, t["values"])),
           lambda a, s, i: oracle.setitem_key(a["x"], _key_arrays(a), _set_value(s, a["values"]))
           if _keyed(s) else oracle.setitem(a["x"], s["dim"], a["index"],
                                            _set_value(s, a["values"])),
           build_setitem, KEYS, negative_ok=True,
           options={"scalar_value": (False, True), "python_value": (False, True),
                    **KEY_OPTIONS}, extra_kinds=MASK_KINDS),
    OpSpec("embedding", lambda f, t, s: f(t["index"], t["weight"], max_norm=s["max_norm"]),
           lambda a, s, i: oracle.embedding(a["index"], a["weight"]), build_embedding,
           ({}, {"max_norm": True}), max_ndim=2),
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
           index_dtypes=("int64",), no_kinds=("empty_dim",), out_dtype="int64"),
    OpSpec("take_along_dim", lambda f, t, s: f(t["x"], t["index"], s["dim"]),
           lambda a, s, i: oracle.take_along_dim(a["x"], s["dim"], a["index"]),
           build_take_along_dim, DIMS, negative_ok=True, index_dtypes=("int64",)),
    OpSpec("searchsorted",
           lambda f, t, s: f(t["seq"], t["values"], right=s["right"], sorter=t["sorter"]),
           lambda a, s, i: oracle.searchsorted(a["seq"], a["values"], a["sorter"], s["right"]),
           build_searchsorted, ({"right": False}, {"right": True}), index_dtypes=("int64",),
           options={"right": (False, True)}, no_kinds=("empty_dim",), out_dtype="int64",
           max_ndim=2),
    OpSpec("bincount", lambda f, t, s: f(t["index"], None, s["minlength"]),
           lambda a, s, i: oracle.bincount(a["index"], s["minlength"]), build_bincount,
           upper_ok=True, out_dtype="int64", max_ndim=1),
    OpSpec("masked_select", lambda f, t, s: f(t["x"], t["mask"]),
           lambda a, s, i: oracle.masked_select(a["x"], a["mask"]), build_masked_select,
           index_dtypes=("int64",), base_kinds=False, extra_kinds=("mask_short", "mask_long")),
    OpSpec("masked_scatter_", lambda f, t, s: f(t["x"], t["mask"], t["source"]),
           lambda a, s, i: oracle.masked_scatter(a["x"], a["mask"], a["source"]),
           build_masked_scatter_, index_dtypes=("int64",), base_kinds=False,
           extra_kinds=("source_short", "mask_long")),
    OpSpec("repeat_interleave",
           lambda f, t, s: f(t["x"], t["repeats"], s["dim"], output_size=s["output_size"]),
           lambda a, s, i: oracle.repeat_interleave(a["x"], a["repeats"], s["dim"],
                                                    s["output_size"]),
           build_repeat_interleave, DIMS, index_dtypes=("int64",), upper_ok=True,
           extra_kinds=("output_size_short", "output_size_long")),
]}

# defaults for the options an op does not draw (builders read every key)
DEFAULTS: dict[str, Any] = {
    "reduce": "sum", "include_self": True, "alpha": 1, "accumulate": False, "nidx": 0,
    "broadcast": False, "scalar_value": False, "mode": "sum", "include_last_offset": False,
    "per_sample_weights": False, "padding": False, "reduction": "none", "weighted": False,
    "ignore_index": -100, "ignored": False, "negative": False, "bags": 3,
    "dense": False, "right": False, "two": False, "mask": False, "max_norm": False,
    "python_value": False,
}

INVALID_SHAPE = (4, 5)  # the small tier: a 4 x 5 operand (take/put_: 20 elements), k = 3
# the large tier: many blocks / vectors of work, a count that is no multiple of a vector
# width, past a 256-index fast path and a 1024-thread block (docs/areas/indexing.md)
LARGE_SHAPE, LARGE_K = (1031, 7), 4099
TIER_KINDS = ("late_in_large", "all_in_large")  # kind n in the large tier: late / everywhere


def invalid_params(spec: OpSpec, variant: dict[str, Any], seed: int,
                   kind: str = "n") -> dict[str, Any]:
    """The literal parameters of an invalid case: a fixed structure for the kind's tier
    (empty_dim: the indexed dim has size 0), values from ``seed``."""
    params = dict(DEFAULTS, shape=INVALID_SHAPE, dim=0, k=3, seed=seed, dense=True)
    params.update({name: choices[0] for name, choices in spec.options.items()})
    params.update(variant)
    if kind in TIER_KINDS:  # the indexed dim is the long one (dim -1: (7, 1031))
        params.update(shape=LARGE_SHAPE if params["dim"] % 2 == 0 else LARGE_SHAPE[::-1],
                      k=LARGE_K)
    if kind == "empty_dim":
        shape = list(params["shape"])
        shape[params["dim"] % len(shape)] = 0
        params.update(shape=tuple(shape), into_empty=True)
    return params


LARGE_VALID: dict[str, Any] = {"shape": (3, 5), "k": LARGE_K}  # > 1000 terms per element
LARGE_VALID_OPS: dict[str, dict[str, Any]] = {  # where the long dim is another one
    "nll_loss": {"shape": (LARGE_K, 5)}, "cross_entropy": {"shape": (LARGE_K, 5)},
    "bincount": {"shape": (5,)}, "searchsorted": {"shape": (3, 1031)}}


def large_valid_params(spec: OpSpec, variant: dict[str, Any],
                       seed: int) -> dict[str, Any] | None:
    """A valid case of the large tier for one option set (None for products: 4099 factors
    overflow any dtype): many indices into few rows."""
    params = dict(DEFAULTS, dim=0, seed=seed, dense=True, **LARGE_VALID)
    params.update({name: choices[0] for name, choices in spec.options.items()})
    params.update(variant)
    params.update(LARGE_VALID_OPS.get(spec.name, {}))
    if params.get("reduce") == "prod" or params.get("max_norm"):  # max_norm: invalid only
        return None
    if params["dim"] % 2:  # the indexed dim is the short one: (5, 3) along dim -1
        params["shape"] = tuple(params["shape"])[::-1]
    return params


def fine_data(case: Case, seed: int) -> Case:
    """The large tier's data: 1 + 2^-12 (1 + u), u in [0, 1): exact in float32, all of one
    sign and all rounded down to 1 by float16, so that a sum of > 1000 terms that takes a
    half-precision shortcut errs by far more than the float32 bound (random +-[0.5, 2)
    data lets such errors cancel). Not for searchsorted (its sorter follows the data)."""
    if case.op == "searchsorted":
        return case
    rng = np.random.default_rng([seed, 2])
    arrays = {k: (role, 1 + 2.0**-12 * (1 + rng.random(v.shape)) if role == "data" else v)
              for k, (role, v) in case.arrays.items()}
    return Case(case.op, arrays, case.scalars, case.index, case.n, case.dest, case.expanded)


BASE_KINDS = ("n", "-n-1", "-1", "huge", "int32_max", "int64_max", "int64_min", "wrap32",
              "empty_dim", "expanded")
LOWER_KINDS = ("-n-1", "-1", "int64_min", "expanded")  # below the range (expanded: -1 there)
NEEDS_INT64 = ("huge", "int64_max", "int64_min", "wrap32")  # values int32 cannot hold


def kinds(spec: OpSpec) -> tuple[str, ...]:
    """The invalid-index kinds of an op: one past the end (n), below the wrapped range
    (-n-1), -1 where negatives are rejected, a huge value, INT32_MAX (int32 indices),
    INT64_MAX and INT64_MIN, 2^32 + 1 (a valid index once truncated to 32 bits), any index
    into a size-0 dim, n in a stride-0 (expanded) index tensor, the large tier's
    (``TIER_KINDS``) and the op's own (embedding_bag offsets, nll targets)."""
    base = [k for k in BASE_KINDS if not (k == "-1" and spec.negative_ok)
            and k not in spec.no_kinds and not (spec.upper_ok and k not in LOWER_KINDS)]
    base = [k for k in base if k != "int32_max" or "int32" in spec.index_dtypes]
    if not spec.base_kinds:
        return spec.extra_kinds
    return (*base, *TIER_KINDS, *spec.extra_kinds)


def bad_value(kind: str, n: int, index_dtype: str) -> int | None:
    """The invalid index of ``kind`` for a range of size n, or None if the dtype cannot
    hold it."""
    if kind in ("n", "expanded", *TIER_KINDS):
        return n
    if kind == "-n-1":
        return -n - 1
    if kind == "-1":
        return -1
    if kind == "empty_dim":
        return 0 if n == 0 else None
    if kind in NEEDS_INT64 and index_dtype != "int64":
        return None
    if kind == "int32_max":
        return 2**31 - 1 if index_dtype == "int32" else None
    return {"huge": 2**40, "int64_max": 2**63 - 1, "int64_min": -(2**63),
            "wrap32": 2**32 + 1}[kind]


SIZE_KINDS = ("output_size_short", "output_size_long", "source_short")


def _wrong_size(case: Case, kind: str, arrays: dict[str, Any], scalars: dict[str, Any],
                ) -> Case | None:
    """repeat_interleave's output_size one short / long of the repeats' sum; a
    masked_scatter_ source one element short of the mask's ones (None: nothing to cut)."""
    if kind.startswith("output_size"):  # (negative repeats: no output_size, below)
        total = scalars["output_size"]
        if kind == "output_size_short" and total == 0:
            return None
        scalars["output_size"] = total - 1 if kind == "output_size_short" else total + 1
    else:
        count = int(arrays["mask"][1].sum())
        if count == 0:
            return None
        arrays["source"] = ("data", arrays["source"][1][:count - 1])
    return Case(case.op, arrays, scalars, case.index, case.n, case.dest)


def corrupt(case: Case, kind: str, index_dtype: str, rng: np.random.Generator) -> Case | None:
    """A copy of ``case`` with one invalid index (or invalid offsets; every index for
    all_in_large and expanded, a late one for late_in_large), or None where the kind does
    not apply (the index dtype cannot hold the value; no entry to corrupt)."""
    arrays = {k: (role, v.copy()) for k, (role, v) in case.arrays.items()}
    scalars = dict(case.scalars)
    if kind in SIZE_KINDS:
        return _wrong_size(case, kind, arrays, scalars)
    if kind in MASK_KINDS:  # a mask of the wrong length (set: one scalar value)
        if case.op.startswith("masked_"):  # a full-shape mask, its last dim one off
            shape = case.values("x").shape
            if not shape:
                return None
            cols = shape[-1] + (-1 if kind == "mask_short" else 1)
            arrays["mask"] = ("mask", np.ones((*shape[:-1], cols), dtype=bool))
            if "source" in arrays:  # enough source for any mask
                arrays["source"] = ("data", np.ones(arrays["mask"][1].size))
            return Case(case.op, arrays, scalars, "mask", cols, case.dest)
        rows = case.values("x").shape[0] if case.values("x").ndim else 0
        length = rows - 1 if kind == "mask_short" else rows + 1
        if length < 0:
            return None
        arrays = {k: v for k, v in arrays.items() if k not in ("index", "i0")}
        arrays["mask"] = ("mask", np.ones(length, dtype=bool))
        if "values" in arrays:
            arrays["values"] = ("data", np.asarray(arrays["values"][1]).reshape(-1)[:1]
                                .reshape(()) if arrays["values"][1].size else np.asarray(1.0))
        scalars.update(mask=True, two=False)
        return Case(case.op, arrays, scalars, "mask", length, case.dest)
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
    elif SPECS[case.op].upper_ok and kind in ("expanded", *TIER_KINDS):
        value = -1  # nothing is too large: the bad value is below the range
    else:
        value = bad_value(kind, case.n, index_dtype if role == "index" else "int64")
    if value is None:
        return None
    if "output_size" in scalars:  # a negative repeat on its own, not masked by a size check
        scalars["output_size"] = None
    flat = index.reshape(-1)
    if kind == "expanded" and index.ndim >= 2 and index.shape[0] > 1:
        # rows constant along the last dim (stored once: stride 0), a late row bad
        index[...] = index[..., :1]
        index[int(rng.integers(1, index.shape[0]))] = value
    elif kind in ("all_in_large", "expanded", "empty_dim"):
        flat[:] = value
    elif kind == "late_in_large":  # past the first vector and block: in the last eighth
        flat[int(rng.integers(flat.size - flat.size // 8, flat.size))] = value
    else:
        flat[int(rng.integers(0, flat.size))] = value
    expanded = frozenset({case.index}) if kind == "expanded" else frozenset()
    return Case(case.op, arrays, scalars, case.index, case.n, case.dest, expanded)
