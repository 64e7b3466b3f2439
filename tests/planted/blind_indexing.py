"""Planted faults for the indexing area, written BLIND.

The author saw only torch's documentation and source and the ``--impl indexing.<op>=module:attr``
contract, never the suite's checks. Each function has the exact signature of the torch op it
replaces, gives torch's result on ordinary small valid inputs, and goes wrong on the out-of-bounds
or large-size input named in ``FAULTS`` (one realistic kernel bug each). All are deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

Tensor = torch.Tensor
VEC = 8  # indices per "vector": the first-vector faults check only this many


def _dim_size(x: Tensor, dim: int) -> tuple[int, int]:
    """(wrapped dim, its size); a 0-d tensor counts as one element along dim 0."""
    if x.dim() == 0:
        return 0, 1
    d = dim % x.dim()
    return d, x.size(d)


def _oob(index: Tensor, n: int) -> Tensor:
    return (index < 0) | (index >= n)


def _tail(index: Tensor, fn: Callable[[Tensor], Tensor]) -> Tensor:
    """Copy of index with fn applied to flat positions >= VEC (the unchecked part)."""
    out = index.clone().contiguous()
    flat = out.view(-1)
    flat[VEC:] = fn(flat[VEC:])
    return out


def _oob_error(cls: type[Exception], index: Tensor, n: int, d: int) -> Exception:
    bad = int(index[_oob(index, n)].reshape(-1)[0])
    return cls(f"index {bad} is out of bounds for dimension {d} with size {n}")


def _offsets(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """Storage offset an unchecked kernel computes for each position of index along dim."""
    off = torch.full(index.shape, x.storage_offset(), dtype=torch.int64, device=index.device)
    for k in range(index.dim()):
        shape = [-1 if j == k else 1 for j in range(index.dim())]
        c = index.long() if k == dim else torch.arange(index.size(k), device=index.device)
        off = off + (c if k == dim else c.view(shape)) * x.stride(k)
    return off


def _poke(x: Tensor, off: Tensor, vals: Tensor) -> None:
    """Write vals at offsets off outside x but inside its storage, else one past x's end."""
    cap = x.untyped_storage().nbytes() // x.element_size()
    flat = x.as_strided((cap,), (1,), 0)
    lo = hi = x.storage_offset()
    if x.numel():
        hi += sum((s - 1) * st for s, st in zip(x.shape, x.stride(), strict=True)) + 1
    off, vals = off.reshape(-1), vals.reshape(-1).to(x.dtype)
    hit = (off >= 0) & (off < cap) & ((off < lo) | (off >= hi))
    if bool(hit.any()):
        flat[off[hit]] = vals[hit]
    elif hi < cap and vals.numel():
        flat[hi] = vals[0]


def _src_part(src: Tensor | float, index: Tensor, x: Tensor) -> Tensor:
    if not isinstance(src, Tensor):
        return torch.full(index.shape, src, dtype=x.dtype, device=x.device)
    return src[tuple(slice(0, s) for s in index.shape)]


def _key_dims(x: Tensor, key: Any) -> tuple[list[Any], list[int]]:
    """Key as a list, and the first dim of x each entry indexes."""
    items = list(key) if isinstance(key, tuple) else [key]

    def width(k: Any) -> int:
        if k is None or k is Ellipsis or isinstance(k, bool):
            return 0
        if isinstance(k, Tensor) and k.dtype in (torch.bool, torch.uint8):
            return k.dim()
        return 1

    used = sum(width(k) for k in items)
    dims, d = [], 0
    for k in items:
        dims.append(d)
        d += x.dim() - used if k is Ellipsis else width(k)
    return items, dims


def _is_int_index(k: Any) -> bool:
    return isinstance(k, Tensor) and k.dtype in (torch.int64, torch.int32)


def _fit(mask: Tensor, target: list[int], keep_ones: bool) -> Tensor:
    """Truncate or False-pad each dim of mask to target (dims of size 1 kept if keep_ones)."""
    for i, t in enumerate(target):
        m = mask.size(i)
        if m == t or (keep_ones and m == 1):
            continue
        if m > t:
            mask = mask.narrow(i, 0, t)
        else:
            pad = mask.new_zeros(*mask.shape[:i], t - m, *mask.shape[i + 1:])
            mask = torch.cat([mask, pad], dim=i)
    return mask


# -- theme 1: only the first vector of indices is checked ----------------------------------------
def gather_checks_first_vector(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """Bounds-checks the first 8 indices; the rest are clamped into range."""
    _, n = _dim_size(x, dim)
    return torch.gather(x, dim, _tail(index, lambda t: t.clamp(0, max(n - 1, 0))))


def index_copy_checks_first_vector(x: Tensor, dim: int, index: Tensor, source: Tensor) -> Tensor:
    """Bounds-checks the first 8 indices; the rest wrap modulo the dim size (overwriting rows)."""
    _, n = _dim_size(x, dim)
    idx = _tail(index, lambda t: t % n) if n > 0 else index
    return x.index_copy_(dim, idx, source)


def take_along_dim_checks_first_vector(
    input: Tensor, indices: Tensor, dim: int | None = None
) -> Tensor:
    """Checks the first 8 indices against [-n, n); negatives wrap; later ones are clamped."""
    if dim is None or indices.dim() == 0:
        return torch.take_along_dim(input, indices, dim)
    d, n = _dim_size(input, dim)
    head = indices.reshape(-1)[:VEC]
    if n == 0 or bool(((head < -n) | (head >= n)).any()):
        raise IndexError(f"take_along_dim(): index out of bounds for dimension {d} with size {n}")
    idx = torch.where(indices < 0, indices + n, indices)
    return torch.take_along_dim(input, _tail(idx, lambda t: t.clamp(0, n - 1)), dim)


# -- theme 2: a fast path for many indices skips validation -------------------------------------
def index_select_fast_path_clamps(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """With >= 256 indices the vectorised path clamps instead of checking."""
    _, n = _dim_size(x, dim)
    if index.numel() >= 256 and x.dim() > 0:
        index = index.clamp(0, max(n - 1, 0))
    return torch.index_select(x, dim, index)


def embedding_fast_path_zero_rows(
    input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
    norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False,
) -> Tensor:
    """With >= 1024 indices, out-of-range rows come back as zeros instead of raising."""
    bad = _oob(input, weight.size(0))
    fast = input.numel() >= 1024
    idx = input.masked_fill(bad, 0) if fast else input
    out = F.embedding(idx, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    return out.masked_fill(bad.unsqueeze(-1), 0) if fast else out


def scatter_add_fast_path_drops(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """With >= 1024 indices, out-of-range entries are silently dropped."""
    _, n = _dim_size(x, dim)
    if index.numel() < 1024:
        return x.scatter_add_(dim, index, src)
    bad = _oob(index, n)
    vals = _src_part(src, index, x).masked_fill(bad, 0)
    return x.scatter_add_(dim, index.masked_fill(bad, 0), vals)


# -- theme 3: contiguity / stride-0 index tensors ------------------------------------------------
def take_checks_contiguous_only(x: Tensor, index: Tensor) -> Tensor:
    """Non-contiguous (incl. expanded) index tensors skip the check and wrap modulo numel."""
    n = x.numel()
    if not index.is_contiguous() and n > 0:
        index = index % n
    return torch.take(x, index)


def gather_expanded_index_checks_first(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """An index with a stride-0 dim is validated by its first element only, then clamped."""
    if not any(st == 0 and s > 1 for s, st in zip(index.shape, index.stride(), strict=True)):
        return torch.gather(x, dim, index)
    d, n = _dim_size(x, dim)
    first = index.reshape(-1)[:1]
    if bool(_oob(first, n).any()):
        raise _oob_error(RuntimeError, first, n, d)
    return torch.gather(x, dim, index.clamp(0, max(n - 1, 0)))


# -- theme 4: integer-width and sign mistakes ----------------------------------------------------
def index_select_int32_truncation(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """Indices are cast to int32 before the check, so 2**32 + i selects row i."""
    return torch.index_select(x, dim, index.to(torch.int32))


def take_no_lower_bound(x: Tensor, index: Tensor) -> Tensor:
    """Checks index < numel only; any negative index wraps modulo numel (-numel-1 passes)."""
    n = x.numel()
    if n > 0:
        index = torch.where(index < 0, index % n, index)
    return torch.take(x, index)


def index_put_no_lower_bound(
    x: Tensor, indices_tuple: tuple[Tensor | None, ...], values: Tensor, accumulate: bool = False
) -> Tensor:
    """Checks idx < size only; idx < -size wraps modulo the size."""
    fixed: list[Tensor | None] = []
    d = 0
    for k in indices_tuple:
        if _is_int_index(k) and d < x.dim() and x.size(d) > 0:
            assert k is not None
            k = torch.where(k < 0, k % x.size(d), k)
        fixed.append(k)
        d += k.dim() if k is not None and k.dtype in (torch.bool, torch.uint8) else 1
    return x.index_put_(tuple(fixed), values, accumulate)


def getitem_int64_min_abs_overflow(x: Tensor, key: Any) -> Tensor:
    """Checks idx < size and -idx <= size; -INT64_MIN overflows, so INT64_MIN wraps to a row."""
    items, dims = _key_dims(x, key)
    for i, (k, d) in enumerate(zip(items, dims, strict=True)):
        if not _is_int_index(k) or d >= x.dim() or x.size(d) == 0:
            continue
        n = x.size(d)
        over = (k >= n) | (k.neg() > n)  # -INT64_MIN overflows back to INT64_MIN
        if bool(over.any()):
            bad = int(k[over].reshape(-1)[0])
            raise IndexError(f"index {bad} is out of bounds for dimension {d} with size {n}")
        items[i] = k % n
    return x[tuple(items)] if isinstance(key, tuple) else x[items[0]]


# -- theme 5: clamp / wrap / zero / NaN instead of raising, past some size -----------------------
def nll_loss_nan_large_batch(
    input: Tensor, target: Tensor, weight: Tensor | None = None, ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """With >= 1024 targets, out-of-range targets give NaN loss instead of an error."""
    c = input.size(1) if input.dim() >= 2 else input.size(0)
    bad = (target != ignore_index) & _oob(target, c)
    if target.numel() < 1024 or not bool(bad.any()):
        return F.nll_loss(input, target, weight, ignore_index=ignore_index, reduction=reduction)
    out = F.nll_loss(input, target.masked_fill(bad, ignore_index), weight,
                     ignore_index=ignore_index, reduction=reduction)
    return out.masked_fill(bad, float("nan")) if reduction == "none" else out + float("nan")


def cross_entropy_ignores_oob_large(
    input: Tensor, target: Tensor, weight: Tensor | None = None, ignore_index: int = -100,
    reduction: str = "mean",
) -> Tensor:
    """With >= 1024 class targets, out-of-range targets are treated as ignore_index."""
    if not target.is_floating_point() and target.numel() >= 1024:
        c = input.size(1) if input.dim() >= 2 else input.size(0)
        target = target.masked_fill((target != ignore_index) & _oob(target, c), ignore_index)
    return F.cross_entropy(input, target, weight, ignore_index=ignore_index, reduction=reduction)


def one_hot_wraps_large(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """With >= 256 labels and explicit num_classes, labels wrap modulo num_classes."""
    if num_classes > 0 and tensor.numel() >= 256:
        tensor = tensor % num_classes
    return F.one_hot(tensor, num_classes)


def embedding_bag_clamps_large(
    input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: float | None = None,
    norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean",
    sparse: bool = False, per_sample_weights: Tensor | None = None,
    include_last_offset: bool = False, padding_idx: int | None = None,
) -> Tensor:
    """With >= 512 indices, out-of-range indices are clamped to the first/last row."""
    if input.numel() >= 512:
        input = input.clamp(0, max(weight.size(0) - 1, 0))
    return F.embedding_bag(input, weight, offsets, max_norm, norm_type, scale_grad_by_freq, mode,
                           sparse, per_sample_weights, include_last_offset, padding_idx)


# -- theme 6: unchecked write past the end, then a late "illegal memory access" -----------------
ILLEGAL = "CUDA error: an illegal memory access was encountered"


def index_add_writes_past_end_illegal_access(
    x: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: float = 1
) -> Tensor:
    """Adds the valid slices, stores out-of-range slices at their unchecked address, then
    raises the CUDA illegal-access error (as the MMU would, later)."""
    d, n = _dim_size(x, dim)
    bad = _oob(index.reshape(-1), n)
    if x.dim() == 0 or not bool(bad.any()):
        return x.index_add_(dim, index, source, alpha=alpha)
    flat_index = index.reshape(-1)
    good = (~bad).nonzero().reshape(-1)
    x.index_add_(d, flat_index[good], source.index_select(d, good), alpha=alpha)
    full = flat_index.view([-1 if k == d else 1 for k in range(x.dim())]).expand(source.shape)
    _poke(x, _offsets(x, d, full)[_oob(full, n)], (source * alpha)[_oob(full, n)])
    raise RuntimeError(ILLEGAL)


def scatter_writes_past_end_illegal_access(
    x: Tensor, dim: int, index: Tensor, src: Tensor
) -> Tensor:
    """Stores out-of-range elements at their unchecked address, then raises the CUDA error."""
    d, n = _dim_size(x, dim)
    bad = _oob(index, n)
    if x.dim() == 0 or not bool(bad.any()):
        return x.scatter_(dim, index, src)
    _poke(x, _offsets(x, d, index)[bad], _src_part(src, index, x)[bad])
    raise RuntimeError(ILLEGAL)


# -- theme 7: writes past the end, then raises a proper-looking IndexError ----------------------
def put_writes_past_end_then_index_error(
    x: Tensor, index: Tensor, source: Tensor, accumulate: bool = False
) -> Tensor:
    """Puts the valid entries, stores out-of-range ones at x's base + index, then raises."""
    n = x.numel()
    bad = (index < -n) | (index >= n)
    if not bool(bad.any()):
        return x.put_(index, source, accumulate)
    vals = source.reshape(index.shape)
    x.put_(index[~bad], vals[~bad], accumulate)
    lin = index[bad]
    _poke(x, x.storage_offset() + torch.where(lin < 0, lin + n, lin), vals[bad])
    raise IndexError(f"put_(): index {int(lin[0])} is out of bounds for size {n}")


def scatter_reduce_writes_past_end_then_index_error(
    x: Tensor, dim: int, index: Tensor, src: Tensor, reduce: str, *, include_self: bool = True
) -> Tensor:
    """Stores out-of-range elements at their unchecked address, then raises IndexError."""
    d, n = _dim_size(x, dim)
    bad = _oob(index, n)
    if x.dim() == 0 or not bool(bad.any()):
        return x.scatter_reduce_(dim, index, src, reduce, include_self=include_self)
    _poke(x, _offsets(x, d, index)[bad], _src_part(src, index, x)[bad])
    raise _oob_error(IndexError, index, n, d)


# -- theme 8: size-0 dims ------------------------------------------------------------------------
def index_select_empty_dim_zeros(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """A size-0 source dim is bounded by max(size, 1): index 0 passes and reads zeros."""
    d, n = _dim_size(x, dim)
    if x.dim() > 0 and n == 0 and index.numel() > 0 and not bool(_oob(index, 1).any()):
        shape = list(x.shape)
        shape[d] = index.numel()
        return x.new_zeros(shape)
    return torch.index_select(x, dim, index)


def index_fill_empty_early_return(x: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    """Returns early for an empty tensor without validating the indices."""
    if x.numel() == 0:
        return x
    return x.index_fill_(dim, index, value)


# -- theme 9: the newer ops ----------------------------------------------------------------------
def searchsorted_sorter_unchecked(
    sorted_sequence: Tensor, values: Tensor | float, *, out_int32: bool = False,
    right: bool = False, side: str | None = None, sorter: Tensor | None = None,
) -> Tensor:
    """Never validates sorter: out-of-range sorter entries are clamped into range."""
    if sorter is not None:
        sorter = sorter.clamp(0, max(sorted_sequence.size(-1) - 1, 0))
    return torch.searchsorted(sorted_sequence, values, out_int32=out_int32, right=right,
                              side=side, sorter=sorter)


def bincount_clamps_negative(
    input: Tensor, weights: Tensor | None = None, minlength: int = 0
) -> Tensor:
    """Negative inputs are clamped into bin 0 instead of raising."""
    if not input.is_floating_point() and input.dtype != torch.bool:
        input = input.clamp(min=0)
    return torch.bincount(input, weights, minlength)


def masked_scatter_zero_pads_source(x: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """When the mask has more True than source has elements, the missing ones read as 0."""
    need = int(mask.expand_as(x).sum()) if mask.dim() <= x.dim() else 0
    if need > source.numel():
        source = torch.cat([source.reshape(-1), source.new_zeros(need - source.numel())])
    return x.masked_scatter_(mask, source)


def masked_select_fits_mask(input: Tensor, mask: Tensor) -> Tensor:
    """A mask that does not broadcast is truncated / False-padded to input's shape."""
    try:
        torch.broadcast_shapes(input.shape, mask.shape)
    except RuntimeError:
        if 0 < mask.dim() <= input.dim():
            mask = _fit(mask, list(input.shape[input.dim() - mask.dim():]), keep_ones=True)
    return torch.masked_select(input, mask)


def getitem_bool_mask_truncates(x: Tensor, key: Any) -> Tensor:
    """A bool mask of the wrong length is truncated / False-padded instead of raising."""
    items, dims = _key_dims(x, key)
    for i, (k, d) in enumerate(zip(items, dims, strict=True)):
        if isinstance(k, Tensor) and k.dtype == torch.bool and 0 < k.dim() <= x.dim() - d:
            items[i] = _fit(k, list(x.shape[d:d + k.dim()]), keep_ones=False)
    return x[tuple(items)] if isinstance(key, tuple) else x[items[0]]


def setitem_checks_first_index_tensor(x: Tensor, key: Any, value: Any) -> Tensor:
    """In x[i0, i1] = v only the first index tensor is checked; later ones are clamped."""
    items, dims = _key_dims(x, key)
    seen = False
    for i, (k, d) in enumerate(zip(items, dims, strict=True)):
        if _is_int_index(k) and d < x.dim() and x.size(d) > 0:
            if seen:
                items[i] = k.clamp(-x.size(d), x.size(d) - 1)
            seen = True
    x[tuple(items) if isinstance(key, tuple) else items[0]] = value
    return x


def embedding_max_norm_unchecked(
    input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
    norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False,
) -> Tensor:
    """The max_norm renorm path clamps indices into range instead of checking them."""
    if max_norm is not None:
        input = input.clamp(0, max(weight.size(0) - 1, 0))
    return F.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)


# -- theme 10: half-precision accumulation on large valid inputs --------------------------------
def index_add_fp16_accumulate_large(
    x: Tensor, dim: int, index: Tensor, source: Tensor, *, alpha: float = 1
) -> Tensor:
    """float32 with > 1000 indices accumulates the additions in float16."""
    if x.dtype != torch.float32 or index.numel() <= 1000:
        return x.index_add_(dim, index, source, alpha=alpha)
    delta = torch.zeros_like(x, dtype=torch.float16)
    return x.add_(delta.index_add_(dim, index, source.half(), alpha=alpha).float())


def scatter_add_fp16_accumulate_large(x: Tensor, dim: int, index: Tensor, src: Tensor) -> Tensor:
    """float32 with > 1000 indices accumulates the additions in float16."""
    if x.dtype != torch.float32 or index.numel() <= 1000:
        return x.scatter_add_(dim, index, src)
    delta = torch.zeros_like(x, dtype=torch.float16)
    return x.add_(delta.scatter_add_(dim, index, src.half()).float())


FAULTS: list[tuple[str, str, str]] = [
    ("gather", "gather_checks_first_vector", "first 8 indices checked; index n at pos 8+ clamped"),
    ("index_copy_", "index_copy_checks_first_vector",
     "first 8 indices checked; index n at pos >= 8 wraps and overwrites row 0"),
    ("take_along_dim", "take_along_dim_checks_first_vector",
     "first 8 indices checked against [-n, n); index n at pos >= 8 is clamped to n-1"),
    ("index_select", "index_select_fast_path_clamps", ">= 256 indices: out-of-range ones clamped"),
    ("embedding", "embedding_fast_path_zero_rows", ">= 1024 indices: out-of-range give zero rows"),
    ("scatter_add_", "scatter_add_fast_path_drops", ">= 1024 indices: out-of-range ones dropped"),
    ("take", "take_checks_contiguous_only",
     "non-contiguous or expanded index not checked: index numel wraps to element 0"),
    ("gather", "gather_expanded_index_checks_first",
     "index with a stride-0 dim: only its first element is checked, the rest clamped"),
    ("index_select", "index_select_int32_truncation", "int32 cast first: 2**32 + 1 selects row 1"),
    ("take", "take_no_lower_bound", "checks index < numel only: -numel-1 wraps modulo numel"),
    ("index_put_", "index_put_no_lower_bound", "checks idx < size only: -size-1 wraps and writes"),
    ("getitem", "getitem_int64_min_abs_overflow",
     "-INT64_MIN overflows in the check: x[tensor([INT64_MIN])] returns a row"),
    ("nll_loss", "nll_loss_nan_large_batch", ">= 1024 targets: an out-of-range target gives NaN"),
    ("cross_entropy", "cross_entropy_ignores_oob_large",
     ">= 1024 class targets: out-of-range targets treated as ignore_index"),
    ("one_hot", "one_hot_wraps_large", ">= 256 labels, num_classes given: bad labels wrap"),
    ("embedding_bag", "embedding_bag_clamps_large", ">= 512 indices: out-of-range ones clamped"),
    ("index_add_", "index_add_writes_past_end_illegal_access",
     "bad index (n on dim 0): slice stored past x's end, then 'illegal memory access'"),
    ("scatter_", "scatter_writes_past_end_illegal_access",
     "bad index: element stored at its unchecked address, then 'illegal memory access'"),
    ("put_", "put_writes_past_end_then_index_error",
     "index >= numel: value stored at base+index (past the end), then IndexError"),
    ("scatter_reduce_", "scatter_reduce_writes_past_end_then_index_error",
     "bad index: element stored at its unchecked address, then IndexError"),
    ("index_select", "index_select_empty_dim_zeros", "size-0 dim: index 0 passes, gives zeros"),
    ("index_fill_", "index_fill_empty_early_return", "empty x returns early: no index check"),
    ("searchsorted", "searchsorted_sorter_unchecked", "sorter entries n or -1 clamped, no error"),
    ("bincount", "bincount_clamps_negative", "negative inputs counted in bin 0, no error"),
    ("masked_scatter_", "masked_scatter_zero_pads_source",
     "mask with more True than source has elements: missing values read as 0"),
    ("masked_select", "masked_select_fits_mask",
     "a mask that does not broadcast (length 4 for 5) is truncated / False-padded"),
    ("getitem", "getitem_bool_mask_truncates",
     "a bool mask of the wrong length is truncated / False-padded, no error"),
    ("setitem", "setitem_checks_first_index_tensor", "x[i0, i1] = v: bad i1 clamped, no error"),
    ("embedding", "embedding_max_norm_unchecked",
     "with max_norm, bad indices are clamped (and that row renormed), no error"),
    ("index_add_", "index_add_fp16_accumulate_large", "float32, > 1000 indices: fp16 accumulation"),
    ("scatter_add_", "scatter_add_fp16_accumulate_large", "float32, > 1000 indices: fp16 sums"),
]
