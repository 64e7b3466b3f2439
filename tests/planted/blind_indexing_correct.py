"""Correct OUTSIDE implementations for the indexing area, written BLIND.

Each is numpy-backed and never calls the torch op it replaces: inputs go to numpy
(bfloat16 through float32), every index is validated explicitly (IndexError naming the
index, the dimension and its size), and results come back in torch's result dtype on the
input's device. In-place ops copy into ``x`` and return it. Run this file to self-check
against torch.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

Tensor = torch.Tensor
_INDEX_DTYPES = (torch.int64, torch.int32)


def _np(t: Tensor) -> np.ndarray:
    t = t.detach().cpu()
    return (t.float() if t.dtype == torch.bfloat16 else t).numpy()


def _back(a: np.ndarray, dtype: torch.dtype, device: torch.device) -> Tensor:
    return torch.from_numpy(np.array(a, copy=True, order="C")).to(device=device, dtype=dtype)


def _wrap_dim(dim: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n


def _check(index: Tensor, n: int, d: int, op: str, wrap: bool = False,
           dtypes: tuple[torch.dtype, ...] = _INDEX_DTYPES) -> np.ndarray:
    """Validated int64 copy of index: [0, n), or [-n, n) wrapped when wrap is set."""
    if index.dtype not in dtypes:
        raise RuntimeError(f"{op}(): expected index dtype in {dtypes}, got {index.dtype}")
    a = _np(index).astype(np.int64)
    bad = ((a < -n) if wrap else (a < 0)) | (a >= n)
    if bad.any():
        raise IndexError(f"{op}(): index {int(a[bad].flat[0])} is out of bounds for dimension "
                         f"{d} with size {n}")
    return np.where(a < 0, a + n, a) if wrap else a


def _as_nd(a: np.ndarray) -> np.ndarray:
    return a.reshape(1) if a.ndim == 0 else a


def index_select(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """x.index_select(dim, index)."""
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    d = _wrap_dim(dim, x.dim())
    n = x.size(d) if x.dim() else 1
    idx = _check(index, n, d, "index_select").reshape(-1)
    if x.dim() == 0:
        if idx.size != 1:
            raise RuntimeError(f"index_select(): Index to scalar can have only 1 value: {idx.size}")
        return _back(_np(x), x.dtype, x.device)
    return _back(np.take(_np(x), idx, axis=d), x.dtype, x.device)


def _gather_np(a: np.ndarray, d: int, idx: np.ndarray) -> np.ndarray:
    part = a[tuple(slice(None) if k == d else slice(0, s) for k, s in enumerate(idx.shape))]
    return np.take_along_axis(part, idx, axis=d)


def _shape_check(x: Tensor, d: int, index: Tensor, other: Tensor | None, op: str) -> None:
    if max(index.dim(), 1) != max(x.dim(), 1):
        raise RuntimeError(f"{op}(): Index tensor must have the same number of dimensions as "
                           "self tensor")
    xs, ishape = list(x.shape) or [1], list(index.shape) or [1]
    os_ = (list(other.shape) or [1]) if other is not None else ishape
    for k, s in enumerate(ishape):
        if (k != d and s > xs[k]) or s > os_[k]:
            raise RuntimeError(f"{op}(): Size does not match at dimension {k}: index {ishape}, "
                               f"self {xs}, src {os_}")


def gather(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """torch.gather(x, dim, index)."""
    d = _wrap_dim(dim, x.dim())
    _shape_check(x, d, index, None, "gather")
    n = x.size(d) if x.dim() else 1
    idx = _check(index, n, d, "gather")
    if index.numel() == 0:
        return torch.empty(index.shape, dtype=x.dtype, device=x.device)
    out = _gather_np(_as_nd(_np(x)), d, _as_nd(idx))
    return _back(out.reshape(index.shape), x.dtype, x.device)


def take(x: Tensor, index: Tensor) -> Tensor:
    """torch.take(x, index): x viewed as 1-D, negative indices wrap."""
    n = x.numel()
    idx = _check(index, n, 0, "take", wrap=True, dtypes=(torch.int64,))
    return _back(_np(x).reshape(-1)[idx], x.dtype, x.device)


def take_along_dim(input: Tensor, indices: Tensor, dim: int | None = None) -> Tensor:
    """torch.take_along_dim; with a dim, negative indices in [-n, 0) wrap as torch does
    (torch 2.13 wraps any index modulo n; here indices outside [-n, n) raise)."""
    if indices.dtype != torch.int64:
        raise RuntimeError(f"take_along_dim(): indices should be Long, got {indices.dtype}")
    if dim is None:
        idx = _check(indices, input.numel(), 0, "take_along_dim", dtypes=(torch.int64,))
        return _back(_np(input).reshape(-1)[idx.reshape(-1)], input.dtype, input.device)
    if input.dim() != indices.dim():
        raise RuntimeError("take_along_dim(): input and indices should have the same number of "
                           f"dimensions, got {input.dim()} and {indices.dim()}")
    if input.dim() == 0:
        raise IndexError(f"Dimension {dim} out of range: tensor has no dimensions")
    d = _wrap_dim(dim, input.dim())
    isz, xsz = list(input.shape), list(indices.shape)
    isz[d], xsz[d] = indices.size(d), input.size(d)
    idx = _check(indices, input.size(d), d, "take_along_dim", wrap=True)
    idx = np.broadcast_to(idx, np.broadcast_shapes(tuple(isz), tuple(indices.shape)))
    a = np.broadcast_to(_np(input), np.broadcast_shapes(tuple(xsz), tuple(input.shape)))
    return _back(np.take_along_axis(a, idx, axis=d), input.dtype, input.device)


def scatter_add_(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """x.scatter_add_(dim, index, src), accumulated in float64 / int64, rounded once."""
    if src.dtype != x.dtype:
        raise RuntimeError("scatter_add_(): Expected self.dtype to be equal to src.dtype")
    if index.numel() == 0:
        return x
    d = _wrap_dim(dim, x.dim())
    _shape_check(x, d, index, src, "scatter_add_")
    n = x.size(d) if x.dim() else 1
    idx = _as_nd(_check(index, n, d, "scatter_add_"))
    acc_t = np.float64 if x.is_floating_point() else np.int64
    acc = _as_nd(_np(x)).astype(acc_t)
    vals = _as_nd(_np(src))[tuple(slice(0, s) for s in idx.shape)].astype(acc_t)
    coords = list(np.indices(idx.shape, sparse=True))
    coords[d] = idx
    np.add.at(acc, tuple(coords), vals)
    acc = acc != 0 if x.dtype == torch.bool else acc
    return x.copy_(_back(acc.reshape(x.shape), x.dtype, x.device))


def index_copy_(x: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """x.index_copy_(dim, index, source)."""
    if index.dim() > 1:
        raise IndexError(f"index_copy_(): Index should have dimension 1 or 0 (got {index.dim()})")
    if source.dtype != x.dtype:
        raise RuntimeError("index_copy_(): self and source expected to have the same dtype")
    d = _wrap_dim(dim, x.dim())
    n = x.size(d) if x.dim() else 1
    if source.dim() and x.dim() and source.dim() != x.dim():
        raise IndexError("index_copy_(): source and destination dimensionality must match")
    want = list(x.shape) or [1]
    want[d] = index.numel()
    if list(source.shape or [1]) != want:
        raise RuntimeError(f"index_copy_(): source shape {list(source.shape)} should be {want}")
    idx = _check(index, n, d, "index_copy_", dtypes=(torch.int64,)).reshape(-1)
    a = _as_nd(_np(x)).copy()
    key = [slice(None)] * a.ndim
    key[d] = idx
    a[tuple(key)] = _np(source).reshape(want)
    return x.copy_(_back(a.reshape(x.shape), x.dtype, x.device))


def embedding(
    input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
    norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False,
) -> Tensor:
    """F.embedding forward; with max_norm the used rows of weight are renormed in place."""
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    n = weight.size(0)
    if padding_idx is not None and not -n <= padding_idx < n:
        raise IndexError(f"embedding(): padding_idx {padding_idx} is out of bounds for "
                         f"dimension 0 with size {n}")
    idx = _check(input, n, 0, "embedding")
    w = _np(weight)
    if max_norm is not None and idx.size:
        rows = np.unique(idx)
        norms = np.linalg.norm(w[rows].astype(np.float64), ord=norm_type, axis=1)
        big = norms > max_norm
        if big.any():
            scale = (max_norm / (norms[big] + 1e-7))[:, None].astype(w.dtype)
            w = w.copy()
            w[rows[big]] = (w[rows[big]] * scale).astype(w.dtype)
            with torch.no_grad():
                weight.copy_(_back(w, weight.dtype, weight.device))
            w = _np(weight)
    return _back(w[idx], weight.dtype, weight.device)


def searchsorted(
    sorted_sequence: Tensor, values: Tensor | float, *, out_int32: bool = False,
    right: bool = False, side: str | None = None, sorter: Tensor | None = None,
) -> Tensor:
    """torch.searchsorted, torch's NaN ordering included (binary search on !(mid >= v))."""
    if side not in (None, "left", "right"):
        raise RuntimeError(f"searchsorted(): side can only be 'left' or 'right' but got {side}")
    if side == "left" and right:
        raise RuntimeError("searchsorted(): side and right can't be set to opposites")
    right = right or side == "right"
    seq = sorted_sequence
    vals = values if isinstance(values, Tensor) else torch.tensor(values)
    if seq.dtype == torch.bool or vals.dtype == torch.bool:
        raise RuntimeError("searchsorted(): not implemented for 'Bool'")
    if seq.dim() == 0 or (seq.dim() > 1 and (vals.dim() != seq.dim()
                                              or vals.shape[:-1] != seq.shape[:-1])):
        raise RuntimeError("searchsorted(): boundaries tensor should be 1 dimension or the first "
                           "N-1 dimensions of boundaries and input value tensors must match")
    common = torch.result_type(seq, values)
    n, b = seq.size(-1), int(np.prod(seq.shape[:-1]))
    s = _np(seq.to(common)).reshape(b, n)
    if sorter is not None:
        if sorter.dtype != torch.int64 or sorter.shape != seq.shape:
            raise RuntimeError("searchsorted(): sorter must be int64 with the boundary's shape")
        srt = _check(sorter, n, seq.dim() - 1, "searchsorted(sorter)").reshape(b, n)
        s = np.take_along_axis(s, srt, axis=1)
    v = _np(vals.to(common)).reshape(b, vals.shape[-1] if seq.dim() > 1 else vals.numel())
    lo = np.zeros(v.shape, dtype=np.int64)
    hi = np.full(v.shape, n, dtype=np.int64)
    while n and (lo < hi).any():
        mid = (lo + hi) // 2
        mv = np.take_along_axis(s, np.minimum(mid, n - 1), axis=1)
        go = ~(mv > v) if right else ~(mv >= v)
        active = lo < hi
        lo = np.where(active & go, mid + 1, lo)
        hi = np.where(active & ~go, mid, hi)
    dtype = torch.int32 if out_int32 else torch.int64
    return _back(lo.reshape(vals.shape), dtype, seq.device)


def bincount(input: Tensor, weights: Tensor | None = None, minlength: int = 0) -> Tensor:
    """torch.bincount; a negative value is an out-of-bounds bin (IndexError)."""
    if input.dim() != 1 or input.is_floating_point() or input.dtype == torch.bool:
        raise RuntimeError("bincount only supports 1-d non-negative integral inputs.")
    if minlength < 0:
        raise RuntimeError("minlength should be >= 0")
    if weights is not None and (weights.dim() != 1 or weights.size(0) != input.size(0)):
        raise RuntimeError("weights should be 1-d and have the same length as input")
    a = _np(input).astype(np.int64)
    if (a < 0).any():
        raise IndexError(f"bincount(): index {int(a[a < 0][0])} is out of bounds "
                         "(bins must be non-negative)")
    if weights is None:
        return _back(np.bincount(a, minlength=minlength), torch.int64, input.device)
    w = _np(weights).astype(np.float64)
    dtype = torch.float32 if weights.dtype == torch.float32 else torch.float64
    return _back(np.bincount(a, weights=w, minlength=minlength), dtype, input.device)


def masked_select(input: Tensor, mask: Tensor) -> Tensor:
    """torch.masked_select: 1-D, row-major over the broadcast shape."""
    if mask.dtype != torch.bool:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    try:
        shape = np.broadcast_shapes(tuple(input.shape), tuple(mask.shape))
    except ValueError as e:
        raise RuntimeError(f"masked_select(): mask {list(mask.shape)} does not broadcast with "
                           f"input {list(input.shape)}") from e
    a = np.broadcast_to(_np(input), shape)
    return _back(a[np.broadcast_to(_np(mask), shape)], input.dtype, input.device)


def _width(k: Any) -> int:
    """How many dims of the indexed tensor one key entry consumes."""
    if k is None or k is Ellipsis or isinstance(k, bool):
        return 0
    return k.dim() if isinstance(k, Tensor) and k.dtype in (torch.bool, torch.uint8) else 1


def _norm_item(k: Any) -> Any:
    if isinstance(k, list) or (isinstance(k, int) and not isinstance(k, bool)):
        k = torch.tensor(k)
    if isinstance(k, Tensor) and k.dim() == 0 and k.dtype in (torch.bool, torch.uint8):
        return bool(k)
    return k


def getitem(x: Tensor, key: Any) -> Tensor:
    """x[key] for ints, slices, Ellipsis, None, bools, int64/int32 index tensors and bool masks.

    Torch applies ints (and 0-d int tensors) first as selects, then numpy-style advanced
    indexing on the rest; this does the same in two numpy passes.
    """
    items = [_norm_item(k) for k in (key if isinstance(key, tuple) else (key,))]
    if sum(k is Ellipsis for k in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    used = sum(_width(k) for k in items)
    if used > x.dim():
        raise IndexError(f"too many indices for tensor of dimension {x.dim()}")
    basic: list[Any] = []
    adv: list[Any] = []
    d = 0
    for k in items:
        if k is Ellipsis:
            b, a = [k], [k]
        elif k is None or isinstance(k, bool):
            b, a = [None], [slice(None) if k is None else np.arange(int(k), dtype=np.int64)]
        elif isinstance(k, slice):
            if k.step is not None and k.step <= 0:
                raise ValueError("step must be greater than zero")
            b, a = [k], [slice(None)]
        elif isinstance(k, Tensor) and k.dtype in (torch.bool, torch.uint8):
            want = list(x.shape[d:d + k.dim()])
            if list(k.shape) != want:
                raise IndexError(f"The shape of the mask {list(k.shape)} at index {d} does not "
                                 f"match the shape of the indexed tensor {want}")
            b, a = [slice(None)] * k.dim(), [_np(k).astype(bool)]
        elif isinstance(k, Tensor):
            if k.dtype not in _INDEX_DTYPES:
                raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
            idx = _check(k, x.size(d), d, "getitem", wrap=True)
            b, a = ([int(idx)], []) if k.dim() == 0 else ([slice(None)], [idx])
        else:
            raise IndexError(f"unsupported index {k!r}")
        basic += b
        adv += a
        d += x.dim() - used if k is Ellipsis else _width(k)
    out = _np(x)[tuple(basic)][tuple(adv)]
    return _back(np.asarray(out), x.dtype, x.device)


CORRECT: list[tuple[str, str]] = [
    ("index_select", "index_select"), ("gather", "gather"), ("take", "take"),
    ("take_along_dim", "take_along_dim"), ("scatter_add_", "scatter_add_"),
    ("index_copy_", "index_copy_"), ("embedding", "embedding"),
    ("searchsorted", "searchsorted"), ("bincount", "bincount"),
    ("masked_select", "masked_select"), ("getitem", "getitem"),
]


def _selfcheck() -> None:
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(0)
    count = [0, 0]

    def rnd(shape: tuple[int, ...], dt: torch.dtype) -> Tensor:
        if dt.is_floating_point:
            return torch.randn(shape, generator=g).to(dt)
        return torch.randint(0 if dt in (torch.uint8, torch.bool) else -60,
                             2 if dt == torch.bool else 60, shape, generator=g).to(dt)

    def ri(lo: int, hi: int, shape: tuple[int, ...], dt: torch.dtype = torch.int64) -> Tensor:
        t = torch.randint(lo, hi, shape, generator=g) if hi > lo else torch.zeros(shape)
        return t.to(dt)

    def clone(a: Any) -> Any:
        if isinstance(a, Tensor):
            return a.clone()
        return tuple(clone(v) for v in a) if isinstance(a, tuple) else a

    def same(a: Any, b: Any, close: bool) -> None:
        assert isinstance(a, Tensor) and a.dtype == b.dtype and a.shape == b.shape, (a, b)
        if close:
            torch.testing.assert_close(a, b, equal_nan=True)
        else:
            assert torch.equal(a, b) or torch.equal(a.isnan(), b.isnan()), (a, b)

    def ok(name: str, ours: Any, ref: Any, *args: Any, close: bool = False, **kw: Any) -> Any:
        a1, a2 = clone(args), clone(args)
        try:
            r2 = ref(*a2, **kw)
        except (IndexError, RuntimeError):  # invalid for torch: must be invalid for us too
            return bad(name, ours, *args, **kw)
        r1 = ours(*a1, **kw)
        try:
            same(r1, r2, close)
            for p, q in zip(a1, a2, strict=True):
                if isinstance(p, Tensor):
                    same(p, q, close)
        except AssertionError as e:
            raise AssertionError(f"{name}{[getattr(a, 'shape', a) for a in args]} {kw}") from e
        count[0] += 1

    def bad(name: str, ours: Any, *args: Any, **kw: Any) -> None:
        a1 = clone(args)
        try:
            ours(*a1, **kw)
        except (IndexError, RuntimeError) as e:
            assert any(w in str(e).lower() for w in ("bound", "range", "index", "indic", "mask")), e
            assert all(torch.equal(p, q) for p, q in zip(a1, args, strict=True)
                       if isinstance(p, Tensor)), name
            count[1] += 1
            return
        raise AssertionError(f"{name} did not raise")

    dtypes = [torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.int8,
              torch.uint8, torch.int32, torch.int64, torch.bool]
    shapes: list[tuple[int, ...]] = [(4, 5), (0, 3), (3, 0, 2), (6,), (), (2, 3, 4)]
    for dt in dtypes:
        for shape in shapes:
            x = rnd(shape, dt)
            nd = max(len(shape), 1)
            for dim in range(-nd, nd):
                d = dim % nd
                n = shape[d] if shape else 1
                for it in (torch.int64, torch.int32):
                    ok("index_select", index_select, torch.index_select, x, dim, ri(0, n, (3,), it))
                gs = tuple(min(s, 2) if k != d else 3 for k, s in enumerate(shape))
                ok("gather", gather, torch.gather, x, dim, ri(0, n, gs))
                ts = tuple(1 if k == 0 and k != d else (3 if k == d else s)
                           for k, s in enumerate(shape))
                ok("take_along_dim", take_along_dim, torch.take_along_dim, x, ri(-n, n, ts), dim)
                src = rnd(tuple(s + 1 if k == d else s for k, s in enumerate(shape)), dt)
                ok("scatter_add_", scatter_add_, torch.Tensor.scatter_add_, x, dim,
                   ri(0, n, gs), src, close=True)
                k = min(n, 3)
                cs = tuple(k if j == d else s for j, s in enumerate(shape))
                ok("index_copy_", index_copy_, torch.Tensor.index_copy_, x, dim,
                   torch.randperm(n, generator=g)[:k], rnd(cs, dt))
                if shape and n and x.numel():
                    bad("index_select", index_select, x, dim, torch.tensor([0, n]))
                    bad("gather", gather, x, dim, torch.full(gs, -1))
                    bad("take_along_dim", take_along_dim, x, torch.full(ts, n), dim)
                    bad("scatter_add_", scatter_add_, x, dim, torch.full(gs, n), src)
                    bad("index_copy_", index_copy_, x, dim, torch.tensor([n]),
                        rnd(tuple(1 if j == d else s for j, s in enumerate(shape)), dt))
                elif shape and not n:
                    bad("index_select(size 0)", index_select, x, dim, torch.tensor([0]))
            m = x.numel()
            ok("take", take, torch.take, x, ri(-m, m, (2, 3)))
            ok("take_along_dim(None)", take_along_dim, torch.take_along_dim, x, ri(0, m, (5,)))
            bad("take", take, x, torch.tensor([m]))
            bad("take", take, x, torch.tensor([-m - 1]))
            ok("masked_select", masked_select, torch.masked_select, x, rnd(shape, torch.bool))
            if shape:
                mask = rnd(shape[-1:], torch.bool)
                ok("masked_select(bcast)", masked_select, torch.masked_select, x, mask)
                bad("masked_select", masked_select, x, rnd((shape[-1] + 1,), torch.bool))
    getitem_ref = Tensor.__getitem__
    x = rnd((3, 4, 5), torch.float32)
    keys: list[Any] = [
        torch.tensor([0, -3, 2]), (Ellipsis, torch.tensor([-1, 4])), (slice(1, None), 2),
        (slice(None), torch.tensor([1, 3]), torch.tensor([[0], [4]])), (0, slice(1, 3)),
        (torch.tensor([0, 2]), slice(None), torch.tensor([1, -5])), (None, torch.tensor(2)),
        (torch.tensor(0), slice(None), torch.tensor([0, 1])), rnd((3, 4), torch.bool),
        (slice(None), rnd((4,), torch.bool)), (torch.tensor([1, 0]), True, slice(None), 0),
        (Ellipsis, None, slice(0, 5, 2)), (False, 1), torch.tensor([2], dtype=torch.int32),
        (torch.tensor([[1], [2]]), torch.tensor([0, 1, 2])), (1, torch.tensor([]).long()),
    ]
    for key in keys:
        ok("getitem", getitem, getitem_ref, x, key)
    for key in [torch.tensor([3]), (0, torch.tensor([4])), (slice(None), 0, torch.tensor([-6])),
                rnd((2,), torch.bool), (torch.tensor([0]), torch.tensor([4])), (0, 0, 0, 0),
                torch.tensor([-2**63]), torch.tensor([2**32])]:
        bad("getitem", getitem, x, key)
    bad("getitem(size 0)", getitem, rnd((0, 3), torch.float32), torch.tensor([0]))
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        w = rnd((6, 4), dt) * 3
        for it in (torch.int64, torch.int32):
            idx = ri(0, 6, (2, 3), it)
            ok("embedding", embedding, F.embedding, idx, w)
            ok("embedding(max_norm)", embedding, F.embedding, idx, w, None, 1.5, close=True)
            ok("embedding(max_norm, p=1)", embedding, F.embedding, idx, w, 1, 2.0, 1.0,
               close=True)
        bad("embedding", embedding, torch.tensor([1, 6]), w)
        bad("embedding", embedding, torch.tensor([-1]), w)
        bad("embedding(max_norm)", embedding, torch.tensor([7]), w, None, 1.0)
    for dt in (torch.float32, torch.float64, torch.int64, torch.float16, torch.int32):
        seq = rnd((2, 7), dt)
        srt = seq.argsort(-1)
        sv = seq.sort(-1).values
        vals = rnd((2, 5), dt)
        for kw in ({}, {"right": True}, {"side": "right"}, {"out_int32": True}):
            ok("searchsorted", searchsorted, torch.searchsorted, sv, vals, **kw)
            ok("searchsorted(sorter)", searchsorted, torch.searchsorted, seq, vals, sorter=srt,
               **kw)
            ok("searchsorted(1d)", searchsorted, torch.searchsorted, sv[0], vals, **kw)
            ok("searchsorted(scalar)", searchsorted, torch.searchsorted, sv[0], 0.5, **kw)
        bad_srt = srt.clone()
        bad_srt[0, 3] = 7
        bad("searchsorted(sorter)", searchsorted, seq, vals, sorter=bad_srt)
        bad("searchsorted(sorter)", searchsorted, seq, vals, sorter=srt - 1)
    nan = float("nan")
    for right in (False, True):
        ok("searchsorted(nan)", searchsorted, torch.searchsorted, torch.tensor([1.0, nan, 3.0]),
           torch.tensor([nan, 2.0, 3.5, -1.0]), right=right)
        ok("searchsorted(empty)", searchsorted, torch.searchsorted, torch.zeros(0),
           torch.tensor([1.0]), right=right)
    for it in (torch.int64, torch.int32, torch.uint8, torch.int8):
        inp = ri(0, 9, (20,), it)
        for wdt in (None, torch.float32, torch.float64, torch.float16, torch.int32):
            wts = None if wdt is None else rnd((20,), wdt)
            for ml in (0, 12):
                ok("bincount", bincount, torch.bincount, inp, wts, ml, close=True)
        ok("bincount(empty)", bincount, torch.bincount, ri(0, 1, (0,), it), None, 3)
        if it != torch.uint8:
            bad("bincount", bincount, torch.tensor([1, -1, 2], dtype=it))
    print(f"blind_indexing_correct self-check: {count[0]} valid cases match torch, "
          f"{count[1]} invalid cases raise")


if __name__ == "__main__":
    _selfcheck()
