"""Indexing cases: the builders the op specs name (``ops.SPECS``), from literal parameters
(so a case can be rebuilt in a child process, or in the foreground, from its parameters
alone).

A ``Case`` holds float64/int64 numpy arrays by role: ``data`` (converted to the run's dtype;
integers for integer dtypes), ``index`` / ``offsets`` (the index dtype) and ``int64``
(class targets, always int64), plus scalars. ``case.index`` names the array whose entries
are checked for range, ``case.n`` its valid size (the dimension's, numel for take/put_,
C for class targets), ``case.dest`` the array an in-place op writes and ``case.expanded``
the arrays stored as one element seen through stride 0 (every entry equal).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

Params = dict[str, Any]


@dataclass
class Case:
    op: str
    arrays: dict[str, tuple[str, np.ndarray]]  # name -> (role, values)
    scalars: dict[str, Any] = field(default_factory=dict)
    index: str = "index"
    n: int = 0
    dest: str | None = None
    expanded: frozenset[str] = frozenset()  # arrays materialized as stride-0 views

    def values(self, name: str) -> np.ndarray:
        return self.arrays[name][1]


def _data(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values in +-[0.5, 2): no zeros, no subnormal products, far from the guard value."""
    return rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def _indices(rng: np.random.Generator, shape: tuple[int, ...] | int, n: int,
             negative: bool) -> np.ndarray:
    """Valid indices in [0, n) (duplicates likely for small n); some written as i - n when
    ``negative`` (for the ops that wrap negative indices)."""
    shape = (shape,) if isinstance(shape, int) else shape
    if n == 0:  # no valid index: the builders ask for none, except into_empty (all invalid)
        return np.zeros(shape, dtype=np.int64)
    idx = rng.integers(0, n, shape, dtype=np.int64)
    if negative:
        idx = np.where(rng.random(shape) < 0.5, idx - n, idx)
    return idx


def _dim(p: Params, ndim: int) -> tuple[int, int]:
    """(the dim passed to torch, negative half the time; the same dim normalised)."""
    if not ndim:
        return 0, 0
    axis = p["dim"] % ndim
    return (axis - ndim if p["dim"] < 0 else axis), axis


def _shape(p: Params) -> tuple[int, ...]:
    return tuple(int(s) for s in p["shape"])


def _rng(p: Params) -> np.random.Generator:
    return np.random.default_rng(p["seed"])


def _k(p: Params, n: int) -> int:
    """The index count: none when nothing can be indexed (unless ``into_empty``: an
    invalid case indexing a size-0 dim)."""
    return int(p["k"]) if n or p.get("into_empty") else 0


def _smaller(rng: np.random.Generator, limit: int, dense: bool = False) -> int:
    """An index extent up to ``limit`` (the full extent when ``dense``)."""
    return limit if dense else int(rng.integers(0, limit + 1))


def build_index_select(p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    dim, axis = _dim(p, len(shape))
    n = shape[axis]
    return Case("index_select", {"x": ("data", _data(rng, shape)),
                                 "index": ("index", _indices(rng, _k(p, n), n, False))},
                {"dim": dim}, n=n)


def build_gather(p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    dim, axis = _dim(p, len(shape))
    n = shape[axis]
    ishape = tuple(_k(p, n) if d == axis else _smaller(rng, s, p["dense"])
                   for d, s in enumerate(shape))
    return Case("gather", {"x": ("data", _data(rng, shape)),
                           "index": ("index", _indices(rng, ishape, n, False))},
                {"dim": dim}, n=n)


def build_scatter_like(op: str, p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    dim, axis = _dim(p, len(shape))
    n = shape[axis]
    ishape = tuple(_k(p, n) if d == axis else _smaller(rng, s, p["dense"])
                   for d, s in enumerate(shape))
    sshape = tuple(s + int(rng.integers(0, 2)) for s in ishape)  # src may be larger
    scalars: dict[str, Any] = {"dim": dim}
    if op == "scatter_reduce_":
        scalars.update(reduce=p["reduce"], include_self=p["include_self"])
    return Case(op, {"x": ("data", _data(rng, shape)),
                     "index": ("index", _indices(rng, ishape, n, False)),
                     "src": ("data", _data(rng, sshape))}, scalars, n=n, dest="x")


def build_index_slices(op: str, p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    dim, axis = _dim(p, len(shape))
    n = shape[axis]
    k = _k(p, n)
    negative = op == "index_fill_" and p["negative"]
    arrays = {"x": ("data", _data(rng, shape)),
              "index": ("index", _indices(rng, k, n, negative))}
    scalars: dict[str, Any] = {"dim": dim}
    if op == "index_fill_":  # a positive integer: exact in every dtype, uint8 and bool too
        scalars["value"] = float(rng.choice([2.0, 3.0]))
    else:
        sshape = tuple(k if d == axis else s for d, s in enumerate(shape))
        arrays["src"] = ("data", _data(rng, sshape))
    if op == "index_add_":
        scalars["alpha"] = p["alpha"]
    if op == "index_reduce_":
        scalars.update(reduce=p["reduce"], include_self=p["include_self"])
    return Case(op, arrays, scalars, n=n, dest="x")


def build_index_put_(p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    nidx = 1 + int(p["nidx"]) % len(shape)
    arrays: dict[str, tuple[str, np.ndarray]] = {"x": ("data", _data(rng, shape))}
    k = _k(p, int(np.prod(shape[:nidx])))
    for j in range(nidx):
        length = 1 if (j and p["broadcast"] and k) else k
        arrays[f"i{j}"] = ("index", _indices(rng, length, shape[j], p["negative"]))
    target = (k, *shape[nidx:])
    arrays["values"] = ("data", _data(rng, () if p["scalar_value"] else target))
    return Case("index_put_", arrays, {"accumulate": p["accumulate"], "nidx": nidx},
                index="i0", n=shape[0], dest="x")


def build_take(p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    n = int(np.prod(shape))
    ishape = (_k(p, n),) if p["dim"] % 2 else (_k(p, n), 2)
    return Case("take", {"x": ("data", _data(rng, shape)),
                         "index": ("index", _indices(rng, ishape, n, p["negative"]))}, n=n)


def build_put_(p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    n = int(np.prod(shape))
    k = _k(p, n)
    return Case("put_", {"x": ("data", _data(rng, shape)),
                         "index": ("index", _indices(rng, k, n, p["negative"])),
                         "src": ("data", _data(rng, (k,)))},
                {"accumulate": p["accumulate"]}, n=n, dest="x")


def _key_arrays(rng: np.random.Generator, p: Params, shape: tuple[int, ...],
                k: int) -> tuple[dict[str, tuple[str, np.ndarray]], dict[str, Any], int]:
    """The key of getitem / setitem beyond one index tensor: a bool mask over dim 0
    (``mask``) or two index tensors on dims 0 and 1 (``two``; ``index`` is the second,
    the one corrupted); (arrays, scalars, n of the checked index)."""
    if p.get("mask"):
        return {"mask": ("mask", rng.random(shape[0]) < 0.5)}, {"mask": True}, shape[0]
    n0, n1 = shape[0], shape[1]
    k = k if n0 and n1 else 0
    return ({"i0": ("index", _indices(rng, k, n0, p["negative"])),
             "index": ("index", _indices(rng, k, n1, p["negative"]))}, {"two": True}, n1)


def build_getitem(p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    dim, axis = _dim(p, len(shape))
    n = shape[axis]
    x = ("data", _data(rng, shape))
    if (p.get("two") and len(shape) >= 2) or (p.get("mask") and shape):
        arrays, scalars, n = _key_arrays(rng, p, shape, _k(p, n))
        return Case("getitem", {"x": x, **arrays}, {"dim": dim, **scalars}, n=n)
    return Case("getitem", {"x": x,
                            "index": ("index", _indices(rng, _k(p, n), n, p["negative"]))},
                {"dim": dim}, n=n)


def build_setitem(p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    dim, axis = _dim(p, len(shape))
    n = shape[axis]
    k = _k(p, n)
    x = ("data", _data(rng, shape))
    if (p.get("two") and len(shape) >= 2) or (p.get("mask") and shape):
        arrays, scalars, n = _key_arrays(rng, p, shape, k)
        count = int(arrays["mask"][1].sum()) if "mask" in arrays else len(arrays["i0"][1])
        vshape = () if p["scalar_value"] else (count, *shape[1 if "mask" in arrays else 2:])
        return Case("setitem", {"x": x, **arrays, "values": ("data", _data(rng, vshape))},
                    {"dim": dim, **scalars}, n=n, dest="x")
    vshape = () if p["scalar_value"] else tuple(k if d == axis else s
                                                  for d, s in enumerate(shape))
    raw = float(rng.choice([2.0, 3.0])) if p["scalar_value"] and p.get("python_value") \
        else None  # a Python number, not a tensor of the run's dtype
    return Case("setitem", {"x": x,
                            "index": ("index", _indices(rng, k, n, p["negative"])),
                            "values": ("data", _data(rng, vshape))},
                {"dim": dim, "raw_value": raw}, n=n, dest="x")


def build_embedding(p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    num, d = shape[0], (shape[1] if len(shape) > 1 else 1) or 1
    ishape = (_k(p, num),) if p["dim"] % 2 else (_k(p, num), 2)
    return Case("embedding", {"index": ("index", _indices(rng, ishape, num, False)),
                              "weight": ("data", _data(rng, (num, d)))},
                {"max_norm": 1.0 if p.get("max_norm") else None}, n=num)


def build_embedding_bag(p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    num, d = shape[0], (shape[1] if len(shape) > 1 else 1) or 1
    length = _k(p, num)
    bags = int(p["bags"])
    starts = np.sort(rng.integers(0, length + 1, bags - 1)) if bags > 1 else np.array([], int)
    offsets = np.concatenate([[0], starts]).astype(np.int64)
    if p["include_last_offset"]:
        offsets = np.concatenate([offsets, [length]]).astype(np.int64)
    arrays = {"index": ("index", _indices(rng, length, num, False)),
              "weight": ("data", _data(rng, (num, d))),
              "offsets": ("index", offsets)}
    mode = p["mode"]
    if mode == "sum" and p["per_sample_weights"]:
        arrays["per_sample_weights"] = ("data", _data(rng, (length,)))
    padding = int(rng.integers(0, num)) if p["padding"] and num else None
    return Case("embedding_bag", arrays,
                {"mode": mode, "include_last_offset": p["include_last_offset"],
                 "padding_idx": padding}, n=num)


def build_class_targets(op: str, p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    batch, classes = max(shape[0], 1), max(shape[1] if len(shape) > 1 else 1, 1)
    extra = (shape[2],) if len(shape) > 2 else ()
    x = _data(rng, (batch, classes, *extra))
    if op == "nll_loss":
        x = -np.abs(x)  # log-probabilities are <= 0
    target = _indices(rng, (batch, *extra), classes, False)
    ignore = p["ignore_index"] if p["ignore_index"] < 0 else p["ignore_index"] % classes
    if p["ignored"]:
        target = np.where(rng.random(target.shape) < 0.3, ignore, target)
    arrays = {"x": ("data", x), "target": ("int64", target)}
    if p["weighted"]:
        arrays["weight"] = ("data", np.abs(_data(rng, (classes,))))
    return Case(op, arrays, {"ignore_index": ignore, "reduction": p["reduction"]},
                index="target", n=classes)


def build_one_hot(p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    classes = max(shape[-1], 1)  # one_hot(num_classes=0) means "infer"
    ishape = (_k(p, classes),) if p["dim"] % 2 else (_k(p, classes), 2)
    return Case("one_hot", {"index": ("int64", _indices(rng, ishape, classes, False))},
                {"num_classes": classes}, n=classes)


def build_take_along_dim(p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    dim, axis = _dim(p, len(shape))
    n = shape[axis]
    ishape = tuple(_k(p, n) if d == axis else s for d, s in enumerate(shape))
    return Case("take_along_dim", {"x": ("data", _data(rng, shape)),
                                   "index": ("index", _indices(rng, ishape, n, p["negative"]))},
                {"dim": dim}, n=n)


def build_searchsorted(p: Params) -> Case:
    """A sequence (rows along the last dim, unsorted), the permutation that sorts each row
    (``sorter``, the checked index) and values to place."""
    rng, shape = _rng(p), _shape(p)
    shape = shape[-2:] if len(shape) > 1 else shape
    n = shape[-1]
    seq = _data(rng, shape)
    # ties broken by position; the rounding to the run's dtype keeps the order (monotonic)
    sorter = np.argsort(seq, axis=-1, kind="stable").astype(np.int64)
    values = _data(rng, (*shape[:-1], min(_k(p, n), 16)))  # the sorter is what is large
    return Case("searchsorted", {"seq": ("data", seq), "values": ("data", values),
                                 "sorter": ("index", sorter)}, {"right": p["right"]},
                index="sorter", n=n)


def build_bincount(p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    n = max(shape[-1], 1)  # the bins minlength asks for (larger values are valid)
    return Case("bincount", {"index": ("index", _indices(rng, _k(p, n), n, False))},
                {"minlength": n}, n=n)


def build_masked_select(p: Params) -> Case:
    rng, shape = _rng(p), _shape(p)
    return Case("masked_select", {"x": ("data", _data(rng, shape)),
                                  "mask": ("mask", rng.random(shape) < 0.5)},
                index="mask", n=shape[-1] if shape else 1)


def build_masked_scatter_(p: Params) -> Case:
    """x, a mask of x's shape and a 1-D source with at least as many elements as the mask
    has ones (one more, half the time)."""
    rng, shape = _rng(p), _shape(p)
    mask = rng.random(shape) < 0.5
    count = int(mask.sum()) + int(rng.integers(0, 2))
    return Case("masked_scatter_", {"x": ("data", _data(rng, shape)), "mask": ("mask", mask),
                                    "source": ("data", _data(rng, (count,)))},
                index="mask", n=shape[-1] if shape else 1, dest="x")


def build_repeat_interleave(p: Params) -> Case:
    """x, the repeats of each slice along ``dim`` (0 to 2, the checked "index": negative
    ones are invalid) and ``output_size`` = their sum."""
    rng, shape = _rng(p), _shape(p)
    dim, axis = _dim(p, len(shape))
    n = shape[axis] if shape else 0
    repeats = rng.integers(0, 3, n).astype(np.int64)
    return Case("repeat_interleave", {"x": ("data", _data(rng, shape)),
                                      "repeats": ("index", repeats)},
                {"dim": dim, "output_size": int(repeats.sum())}, index="repeats", n=n)
