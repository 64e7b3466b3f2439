"""Indexing oracles: numpy (float64 / int64), torch-free, one function per op.

Every writing op is reduced to one list of (destination position, value) writes, applied by
``_write`` with the op's semantics for duplicates:

- non-accumulating ops (``scatter_``, ``index_copy_``, ``index_put_(accumulate=False)``,
  ``put_(accumulate=False)``, ``x[idx] = v``): a position written more than once may hold
  any one of the values written there (torch documents the order as undefined); the result
  carries those candidates in ``Expected.choices``;
- accumulating ops: the sum / product / mean / max / min of the terms computed exactly
  (``math.fsum``, ``fractions.Fraction``; log-softmax with mpmath at 40 digits) and rounded
  once to float64, with the number of terms and the sum of their magnitudes per element
  (``count``, ``abs_sum``) for the caller's rounding bound. "mean" on integer dtypes is
  torch's floor division.

Valid index ranges (``VALID_RANGE``, n = the size of the indexed dimension; numel for take /
put_; C for class targets): ops whose range starts at -n wrap a negative i to i + n;
the others reject every negative index. ``nll_loss`` / ``cross_entropy`` also accept
``ignore_index`` as a target (its element contributes nothing).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import mpmath
import numpy as np


@dataclass
class Expected:
    """The oracle's result. ``value`` is exact for non-accumulating ops (the last write where
    a position has several: any of ``choices[pos]`` is also correct); for accumulating ops it
    is the float64 result with ``count`` terms and ``abs_sum`` = sum of |terms| per element."""

    value: np.ndarray
    choices: dict[int, tuple[float, ...]] | None = None
    count: np.ndarray | None = None
    abs_sum: np.ndarray | None = None
    reduce: str = "assign"
    weight_sum: float | None = None  # nll_loss "mean": the denominator

    def reshaped(self, shape: tuple[int, ...]) -> Expected:
        """The same result for a destination of ``shape`` (flat positions unchanged)."""
        self.value = self.value.reshape(shape)
        if self.count is not None:
            self.count, self.abs_sum = self.count.reshape(shape), self.abs_sum.reshape(shape)
        return self


def _num(a: np.ndarray | float) -> np.ndarray:
    """Values as float64, or complex128 for complex data (movement ops keep both parts)."""
    a = np.asarray(a)
    return a.astype(np.complex128 if np.iscomplexobj(a) else np.float64)


def _wrap(index: np.ndarray, n: int) -> np.ndarray:
    index = np.asarray(index, dtype=np.int64)
    return np.where(index < 0, index + n, index)


def _check(index: np.ndarray, lo: int, hi: int, what: str) -> None:
    index = np.asarray(index)
    if index.size and (index.min() < lo or index.max() >= hi):
        raise IndexError(f"{what}: index out of range [{lo}, {hi})")


def _write(dest: np.ndarray, pos: np.ndarray, vals: np.ndarray, reduce: str,
           include_self: bool = True, integer: bool = False) -> Expected:
    """Apply writes of ``vals`` at flat positions ``pos`` of ``dest`` (a float64/int64 copy
    is made) with the semantics of ``reduce`` (assign, sum, prod, mean, amax, amin)."""
    out = _num(dest).copy().reshape(-1)
    pos = np.asarray(pos, dtype=np.int64).reshape(-1)
    vals = _num(vals).reshape(-1)
    if np.iscomplexobj(vals) and not np.iscomplexobj(out):
        out = out.astype(np.complex128)
    if reduce == "assign":
        choices: dict[int, list[float]] = {}
        for p, v in zip(pos.tolist(), vals.tolist(), strict=False):
            choices.setdefault(p, []).append(v)
            out[p] = v
        multi = {p: tuple(sorted(set(c), key=lambda z: (np.real(z), np.imag(z))))
                 for p, c in choices.items() if len(set(c)) > 1}
        return Expected(out.reshape(dest.shape), choices=multi)
    base = out.copy()
    terms: dict[int, list[float]] = {}
    for p, v in zip(pos.tolist(), vals.tolist(), strict=False):
        terms.setdefault(p, []).append(v)
    count = np.zeros(out.shape, dtype=np.int64)
    abs_sum = np.abs(base) if include_self else np.zeros_like(base)
    for p, ts in terms.items():
        allt = ([base[p]] if include_self else []) + ts
        count[p] = len(allt)
        abs_sum[p] = float(np.sum(np.abs(allt)))
        if reduce == "sum":
            out[p] = math.fsum(allt)
        elif reduce == "prod":
            out[p] = float(math.prod(Fraction(t) for t in allt))
            abs_sum[p] = abs(out[p])
        elif reduce == "mean":
            total = sum(Fraction(t) for t in allt)
            out[p] = float(total // len(allt)) if integer else float(total / len(allt))
        elif reduce == "amax":
            out[p] = max(allt)
        elif reduce == "amin":
            out[p] = min(allt)
        else:
            raise ValueError(f"unknown reduction {reduce!r}")
    return Expected(out.reshape(dest.shape), count=count.reshape(dest.shape),
                    abs_sum=abs_sum.reshape(dest.shape), reduce=reduce)


def _flat_positions(shape: tuple[int, ...], coords: list[np.ndarray]) -> np.ndarray:
    if not shape:
        return np.zeros(np.broadcast(*coords).shape if coords else (), dtype=np.int64)
    return np.ravel_multi_index(tuple(np.asarray(c, dtype=np.int64) for c in coords), shape)


def _along(shape: tuple[int, ...], dim: int, index_of: np.ndarray) -> list[np.ndarray]:
    """Coordinates of every element of an array of shape ``index_of.shape`` with the
    coordinate along ``dim`` replaced by ``index_of``."""
    grid = list(np.indices(index_of.shape, dtype=np.int64))
    grid[dim] = index_of
    return grid


# ---- reading ops ---------------------------------------------------------------------------

def index_select(x: np.ndarray, dim: int, index: np.ndarray) -> Expected:
    n = x.shape[dim] if x.ndim else 1
    _check(index, 0, n, "index_select")
    index = np.asarray(index).reshape(-1)
    return Expected(np.take(x.reshape(x.shape or (1,)), index, axis=dim).reshape(
        _index_select_shape(x.shape, dim, index.size)).astype(_num(x).dtype))


def _index_select_shape(shape: tuple[int, ...], dim: int, k: int) -> tuple[int, ...]:
    if not shape:
        return ()
    out = list(shape)
    out[dim] = k
    return tuple(out)


def gather(x: np.ndarray, dim: int, index: np.ndarray) -> Expected:
    xs = x.reshape(x.shape or (1,))
    index = np.asarray(index, dtype=np.int64).reshape(np.shape(index) or (1,))
    _check(index, 0, xs.shape[dim], "gather")
    coords = _along(index.shape, dim, index)
    out = _num(xs[tuple(coords)])
    return Expected(out if x.ndim else out.reshape(()))


def take(x: np.ndarray, index: np.ndarray) -> Expected:
    n = x.size
    _check(index, -n, n, "take")
    return Expected(_num(x.reshape(-1)[_wrap(index, n)]))


def getitem(x: np.ndarray, dim: int, index: np.ndarray) -> Expected:
    """``x[(slice(None),) * dim + (index,)]``: one index tensor on dimension ``dim``."""
    n = x.shape[dim]
    _check(index, -n, n, "getitem")
    return Expected(_num(np.take(x, _wrap(index, n), axis=dim)))


def embedding(index: np.ndarray, weight: np.ndarray) -> Expected:
    _check(index, 0, weight.shape[0], "embedding")
    return Expected(weight[np.asarray(index, dtype=np.int64)].astype(np.float64))


def embedding_bag(index: np.ndarray, weight: np.ndarray, offsets: np.ndarray, mode: str,
                  per_sample_weights: np.ndarray | None = None,
                  include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Expected:
    """Bags ``index[offsets[b]:offsets[b + 1]]`` (the last bag runs to the end unless
    ``include_last_offset``); entries equal to ``padding_idx`` are left out (and not
    counted by "mean"); an empty bag gives zeros. Valid: 0 <= index < num_embeddings,
    offsets[0] == 0, offsets non-decreasing, offsets[-1] <= len(index)."""
    num, d = weight.shape
    _check(index, 0, num, "embedding_bag")
    offsets = np.asarray(offsets, dtype=np.int64).reshape(-1)
    bounds = list(offsets) + ([] if include_last_offset else [len(index)])
    if offsets.size and (offsets[0] != 0 or np.any(np.diff(bounds) < 0)
                         or bounds[-1] > len(index)):
        raise IndexError("embedding_bag: invalid offsets")
    bags = len(bounds) - 1
    out = np.zeros((bags, d))
    count = np.zeros((bags, d), dtype=np.int64)
    abs_sum = np.zeros((bags, d))
    for b in range(bags):
        rows = [(int(index[j]), 1.0 if per_sample_weights is None else
                 float(per_sample_weights[j])) for j in range(bounds[b], bounds[b + 1])
                if padding_idx is None or int(index[j]) != padding_idx]
        if not rows:
            continue
        if mode not in ("sum", "mean", "max"):
            raise ValueError(f"unknown mode {mode!r}")
        count[b] = len(rows)
        for j in range(d):  # exact products and sums, one rounding
            terms = [Fraction(w) * Fraction(float(weight[r, j])) for r, w in rows]
            abs_sum[b, j] = float(sum(abs(t) for t in terms))
            total = sum(terms)
            out[b, j] = float(max(terms) if mode == "max" else
                              total / len(rows) if mode == "mean" else total)
    reduce = {"max": "amax"}.get(mode, mode)
    return Expected(out, count=count, abs_sum=abs_sum, reduce=reduce)


def nll_loss(logp: np.ndarray, target: np.ndarray, weight: np.ndarray | None = None,
             ignore_index: int = -100, reduction: str = "mean") -> Expected:
    """-weight[t] * logp[n, t] per element (0 where t == ignore_index); "mean" divides the
    sum by the sum of the weights of the non-ignored targets. ``logp`` is (N, C) or (N, C, d)."""
    c = logp.shape[1]
    target = np.asarray(target, dtype=np.int64)
    keep = target != ignore_index
    _check(target[keep], 0, c, "nll_loss")
    w = np.ones(c) if weight is None else np.asarray(weight, dtype=np.float64)
    safe = np.where(keep, target, 0)
    picked = np.take_along_axis(logp.astype(np.float64), safe[:, None], axis=1)[:, 0]
    exact = [-Fraction(float(wt)) * Fraction(float(v)) if k else Fraction(0)
             for wt, v, k in zip(w[safe].reshape(-1), picked.reshape(-1), keep.reshape(-1),
                                 strict=True)]
    per = np.array([float(e) for e in exact]).reshape(picked.shape)
    wsum_exact = sum(Fraction(float(wt)) for wt, k in zip(w[safe].reshape(-1),
                                                           keep.reshape(-1), strict=True) if k)
    wsum = float(wsum_exact)
    if reduction == "none":
        return Expected(per, count=np.ones(per.shape, dtype=np.int64), abs_sum=np.abs(per),
                        reduce="sum")
    total = sum(exact)
    value = float(total) if reduction == "sum" else (
        float(total / wsum_exact) if wsum_exact else float("nan"))
    return Expected(np.array(value), count=np.array(int(keep.sum())),
                    abs_sum=np.array(float(sum(abs(e) for e in exact))), reduce=reduction,
                    weight_sum=wsum)


def log_softmax(x: np.ndarray, axis: int = 1) -> np.ndarray:
    """x - log(sum(exp(x))) along ``axis``, with mpmath at 40 digits, rounded to float64."""
    moved = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    out = np.empty(moved.shape)
    with mpmath.workdps(40):
        for idx in np.ndindex(moved.shape[:-1]):
            row = [mpmath.mpf(float(v)) for v in moved[idx]]
            lse = mpmath.log(mpmath.fsum(mpmath.exp(v) for v in row))
            out[idx] = [float(v - lse) for v in row]
    return np.moveaxis(out, -1, axis)


def cross_entropy(x: np.ndarray, target: np.ndarray, weight: np.ndarray | None = None,
                  ignore_index: int = -100, reduction: str = "mean") -> Expected:
    """nll_loss(log_softmax(x, 1), ...) with class-index targets."""
    return nll_loss(log_softmax(x, 1), target, weight, ignore_index, reduction)


def one_hot(index: np.ndarray, num_classes: int) -> Expected:
    _check(index, 0, num_classes, "one_hot")
    index = np.asarray(index, dtype=np.int64)
    return Expected((index[..., None] == np.arange(num_classes)).astype(np.float64))


def take_along_dim(x: np.ndarray, dim: int, index: np.ndarray) -> Expected:
    """``torch.take_along_dim`` with an index of x's shape but along ``dim`` (numpy's
    ``take_along_axis``): indices in [-n, n), negatives wrapped."""
    n = x.shape[dim]
    _check(index, -n, n, "take_along_dim")
    return gather(x, dim, _wrap(index, n))


def searchsorted(seq: np.ndarray, values: np.ndarray, sorter: np.ndarray,
                 right: bool = False) -> Expected:
    """``torch.searchsorted(seq, values, sorter=sorter, right=right)`` on the last dim:
    ``sorter`` (seq's shape) holds indices in [0, n) that sort each row of ``seq``."""
    n = seq.shape[-1]
    _check(sorter, 0, n, "searchsorted sorter")
    rows = int(np.prod(seq.shape[:-1]))  # 1 for a 1-D sequence
    rows_seq = seq.reshape(rows, n)
    rows_sorter = np.asarray(sorter, dtype=np.int64).reshape(rows, n)
    rows_values = values.reshape(rows, values.shape[-1])
    out = np.stack([np.searchsorted(row[order], vals, side="right" if right else "left")
                    for row, order, vals in zip(rows_seq, rows_sorter, rows_values,
                                                strict=True)]) \
        if rows_seq.shape[0] else np.zeros(rows_values.shape, dtype=np.int64)
    return Expected(out.reshape(values.shape).astype(np.float64))


def bincount(index: np.ndarray, minlength: int) -> Expected:
    """``torch.bincount(index, minlength=minlength)``: counts of non-negative integers."""
    _check(index, 0, 2**63 - 1, "bincount")
    flat = np.asarray(index, dtype=np.int64).reshape(-1)
    return Expected(np.bincount(flat, minlength=minlength).astype(np.float64))


# ---- writing ops (in place on ``x``; the result is the new value of x) ---------------------

def scatter(x: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray,
            reduce: str = "assign", include_self: bool = True,
            integer: bool = False) -> Expected:
    """``scatter_`` (assign), ``scatter_add_`` (sum), ``scatter_reduce_``: for every element
    p of ``index``, x[p with p[dim] = index[p]] <- src[p]."""
    xs = x.reshape(x.shape or (1,))
    index = np.asarray(index, dtype=np.int64).reshape(np.shape(index) or (1,))
    _check(index, 0, xs.shape[dim], "scatter")
    pos = _flat_positions(xs.shape, _along(index.shape, dim, index))
    vals = np.asarray(src).reshape(np.shape(src) or (1,))[
        tuple(slice(0, s) for s in index.shape)]
    return _write(xs, pos, vals, reduce, include_self, integer).reshaped(x.shape)


def index_write(x: np.ndarray, dim: int, index: np.ndarray, src: np.ndarray | float,
                reduce: str = "assign", include_self: bool = True, integer: bool = False,
                negative_ok: bool = False, alpha: float = 1.0) -> Expected:
    """``index_copy_`` (assign), ``index_add_`` (sum, src scaled by alpha), ``index_fill_``
    (assign a scalar; negative indices wrap), ``index_reduce_``: for i, the slice
    x.select(dim, index[i]) <- src.select(dim, i)."""
    xs = x.reshape(x.shape or (1,))
    n = xs.shape[dim]
    index = np.asarray(index, dtype=np.int64).reshape(-1)
    _check(index, -n if negative_ok else 0, n, "index op")
    index = _wrap(index, n)
    slice_shape = list(xs.shape)
    slice_shape[dim] = len(index)
    if np.ndim(src) == 0:
        src = np.full(slice_shape, float(src))
    src = _num(src).reshape(slice_shape) * alpha
    grid = list(np.indices(slice_shape, dtype=np.int64))
    grid[dim] = index[grid[dim]]
    pos = _flat_positions(xs.shape, grid)
    return _write(xs, pos, src, reduce, include_self, integer).reshaped(x.shape)


def index_put(x: np.ndarray, indices: list[np.ndarray], values: np.ndarray,
              accumulate: bool = False) -> Expected:
    """``x.index_put_(indices, values, accumulate)`` with k index tensors on the leading k
    dimensions (broadcast together); ``values`` broadcast to x[indices]'s shape. Also
    ``x[idx] = v`` (setitem) and ``put_`` on the flattened x (k = 1)."""
    k = len(indices)
    coords = [_wrap(i, x.shape[d]) for d, i in enumerate(indices)]
    for d, i in enumerate(indices):
        _check(i, -x.shape[d], x.shape[d], "index_put_")
    bshape = np.broadcast(*coords).shape if coords else ()
    rest = x.shape[k:]
    target_shape = bshape + rest
    vals = np.broadcast_to(_num(values), target_shape)
    coords = [np.broadcast_to(c, bshape) for c in coords]
    grid_rest = np.indices(rest, dtype=np.int64) if rest else []
    full = [np.broadcast_to(c.reshape(bshape + (1,) * len(rest)), target_shape) for c in coords]
    full += [np.broadcast_to(g.reshape((1,) * len(bshape) + rest), target_shape)
             for g in grid_rest]
    pos = _flat_positions(x.shape, full)
    return _write(x, pos, vals, "sum" if accumulate else "assign")


def put(x: np.ndarray, index: np.ndarray, src: np.ndarray, accumulate: bool = False) -> Expected:
    """``x.put_(index, src, accumulate)``: x viewed flat; negative indices wrap."""
    n = x.size
    _check(index, -n, n, "put_")
    pos = _wrap(np.asarray(index).reshape(-1), n)
    return _write(x.reshape(-1), pos, np.asarray(src).reshape(-1),
                  "sum" if accumulate else "assign").reshaped(x.shape)


def setitem(x: np.ndarray, dim: int, index: np.ndarray, value: np.ndarray) -> Expected:
    """``x[(slice(None),) * dim + (index,)] = value`` with a 1-D index (duplicates: any
    written value)."""
    moved = np.moveaxis(x, dim, 0)
    vals = np.moveaxis(np.broadcast_to(value, np.take(x, np.zeros(np.shape(index), int),
                                                      axis=dim).shape), dim, 0)
    out = index_put(moved, [np.asarray(index)], vals)
    out.value = np.moveaxis(out.value, 0, dim)
    if out.choices:
        # positions are flat in the moved layout: translate them to x's layout
        perm = np.moveaxis(np.arange(x.size).reshape(x.shape), dim, 0).reshape(-1)
        out.choices = {int(perm[p]): c for p, c in out.choices.items()}
    return out


def getitem_key(x: np.ndarray, key: dict[str, np.ndarray]) -> Expected:
    """``x[mask]`` (a bool mask over the leading dims) or ``x[i0, i1]`` (two index tensors
    on dims 0 and 1, negatives wrapped)."""
    if "mask" in key:
        mask = np.asarray(key["mask"], dtype=bool)
        if mask.shape != x.shape[:mask.ndim]:
            raise IndexError(f"mask of shape {mask.shape} for a tensor of shape {x.shape}")
        return Expected(_num(x[mask]))
    n0, n1 = x.shape[0], x.shape[1]
    _check(key["i0"], -n0, n0, "getitem")
    _check(key["index"], -n1, n1, "getitem")
    return Expected(_num(x[_wrap(key["i0"], n0), _wrap(key["index"], n1)]))


def setitem_key(x: np.ndarray, key: dict[str, np.ndarray], value: np.ndarray) -> Expected:
    """``x[mask] = value`` or ``x[i0, i1] = value`` (duplicates: any written value)."""
    if "mask" in key:
        mask = np.asarray(key["mask"], dtype=bool)
        if mask.shape != x.shape[:mask.ndim]:
            raise IndexError(f"mask of shape {mask.shape} for a tensor of shape {x.shape}")
        out = _num(x).copy()
        if np.iscomplexobj(value) and not np.iscomplexobj(out):
            out = out.astype(np.complex128)
        out[mask] = value
        return Expected(out)
    return index_put(x, [key["i0"], key["index"]], value)


def masked_select(x: np.ndarray, mask: np.ndarray) -> Expected:
    """``torch.masked_select(x, mask)`` with a mask of x's shape."""
    mask = np.asarray(mask, dtype=bool)
    if mask.shape != x.shape:
        raise ValueError(f"mask of shape {mask.shape} for a tensor of shape {x.shape}")
    return Expected(_num(x[mask]))


def masked_scatter(x: np.ndarray, mask: np.ndarray, source: np.ndarray) -> Expected:
    """``x.masked_scatter_(mask, source)``: the positions where the mask is true, in
    row-major order, take source's leading elements."""
    mask = np.asarray(mask, dtype=bool)
    count = int(mask.sum())
    if mask.shape != x.shape or source.size < count:
        raise ValueError(f"mask {mask.shape} / source of {source.size} for {x.shape}")
    out = _num(x).copy()
    out[mask] = _num(source).reshape(-1)[:count]
    return Expected(out)


def repeat_interleave(x: np.ndarray, repeats: np.ndarray, dim: int,
                      output_size: int) -> Expected:
    """``torch.repeat_interleave(x, repeats, dim, output_size=output_size)``."""
    repeats = np.asarray(repeats, dtype=np.int64)
    _check(repeats, 0, 2**63 - 1, "repeat_interleave repeats")
    if int(repeats.sum()) != output_size:
        raise ValueError(f"output_size {output_size} != sum of repeats {int(repeats.sum())}")
    return Expected(_num(np.repeat(x, repeats, axis=dim)))
