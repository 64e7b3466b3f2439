"""Planted faults for the indexing movement ops, round 2.

Written BLIND: from torch's docstrings and known classes of real kernel bugs only,
without reading the conformance suite, its oracles, its tests or the indexing area docs.
Each function matches torch on ordinary small valid inputs (float32 4x5 operands, a few
in-range indices) and goes wrong on the trigger named in ``FAULTS``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

_BYTE_DTYPES = (torch.int8, torch.uint8, torch.bool)


def _dim_size(x: Tensor, dim: int) -> int:
    """Size of ``dim`` in ``x``; a 0-d tensor counts as size 1."""
    return x.size(dim) if x.dim() > 0 else 1


def _low32(index: Tensor) -> Tensor:
    """Non-negative offsets truncated to 32 bits, as a 32-bit offset kernel reads them."""
    return torch.where(index >= 0, index & 0xFFFFFFFF, index)


# --- repeat_interleave -------------------------------------------------------------------


def repeat_interleave_trusts_output_size(
    input: Tensor, repeats: Tensor | int, dim: int | None = None, *, output_size: int | None = None
) -> Tensor:
    """Allocates ``output_size`` rows and copies into them: truncates or zero-pads if wrong."""
    out = torch.repeat_interleave(input, repeats, dim)
    if output_size is None:
        return out
    d = 0 if dim is None else dim
    have = out.size(d)
    if have >= output_size:
        return out.narrow(d, 0, output_size).clone()
    pad_shape = list(out.shape)
    pad_shape[d] = output_size - have
    return torch.cat([out, out.new_zeros(pad_shape)], dim=d)


def repeat_interleave_clamps_negative_repeats(
    input: Tensor, repeats: Tensor | int, dim: int | None = None, *, output_size: int | None = None
) -> Tensor:
    """Clamps negative repeats to 0 instead of raising."""
    repeats = repeats.clamp(min=0) if isinstance(repeats, Tensor) else max(0, int(repeats))
    if output_size is not None:
        return torch.repeat_interleave(input, repeats, dim, output_size=output_size)
    return torch.repeat_interleave(input, repeats, dim)


def repeat_interleave_checks_first_8_repeats(
    input: Tensor, repeats: Tensor | int, dim: int | None = None, *, output_size: int | None = None
) -> Tensor:
    """Validates only repeats[:8]; a negative repeat after that counts as 0."""
    if isinstance(repeats, Tensor) and repeats.numel() > 8:
        flat = repeats.reshape(-1).clone()
        flat[8:] = flat[8:].clamp(min=0)
        repeats = flat.view(repeats.shape)
    if output_size is not None:
        return torch.repeat_interleave(input, repeats, dim, output_size=output_size)
    return torch.repeat_interleave(input, repeats, dim)


# --- 1-byte fast paths that skip the bounds check ----------------------------------------


def index_select_byte_path_clamps_index(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """int8/uint8/bool data: clamps the index into [0, n) instead of raising."""
    n = _dim_size(x, dim)
    if x.dtype in _BYTE_DTYPES and n > 0:
        index = index.clamp(0, n - 1)
    return torch.index_select(x, dim, index)


def gather_byte_path_wraps_index(x: Tensor, dim: int, index: Tensor) -> Tensor:
    """int8/uint8/bool data: wraps the index modulo n instead of raising."""
    n = _dim_size(x, dim)
    if x.dtype in _BYTE_DTYPES and n > 0:
        index = index.remainder(n)
    return torch.gather(x, dim, index)


def scatter_byte_path_clamps_index(x: Tensor, dim: int, index: Tensor, src: Any) -> Tensor:
    """int8/uint8/bool data: clamps the index into [0, n), writing the edge row."""
    n = _dim_size(x, dim)
    if x.dtype in _BYTE_DTYPES and n > 0:
        index = index.clamp(0, n - 1)
    return x.scatter_(dim, index, src)


# --- int32 data read with 32-bit offsets --------------------------------------------------


def take_int32_path_32bit_offsets(x: Tensor, index: Tensor) -> Tensor:
    """int32 data: uses ``index & 0xFFFFFFFF`` as the offset, so 2**32 + i reads element i."""
    if x.dtype == torch.int32:
        index = _low32(index)
    return torch.take(x, index)


def index_copy_int32_path_32bit_offsets(
    x: Tensor, dim: int, index: Tensor, source: Tensor
) -> Tensor:
    """int32 data: uses ``index & 0xFFFFFFFF``, so 2**32 + i writes row i."""
    if x.dtype == torch.int32:
        index = _low32(index)
    return x.index_copy_(dim, index, source)


# --- bool data written with the value's raw integer ---------------------------------------


def _raw_int(value: Any) -> int:
    """The integer a C cast of ``value`` gives (truncation toward zero)."""
    return int(value.item()) if isinstance(value, Tensor) else int(value)


def index_fill_bool_writes_raw_value(x: Tensor, dim: int, index: Tensor, value: Any) -> Tensor:
    """bool data: stores the value's raw low byte (2 -> byte 0x02, 256 or 0.5 -> False)."""
    if x.dtype == torch.bool and not isinstance(value, bool):
        x.view(torch.uint8).index_fill_(dim, index, _raw_int(value) & 0xFF)
        return x
    return x.index_fill_(dim, index, value)


def setitem_bool_truncates_value_to_low_bit(x: Tensor, key: Any, value: Any) -> Tensor:
    """bool data, scalar value: stores the raw integer's low bit, so 2 becomes False."""
    scalar = not isinstance(value, Tensor) or (value.dim() == 0 and value.dtype != torch.bool)
    if x.dtype == torch.bool and scalar and not isinstance(value, bool):
        x.view(torch.uint8)[key] = _raw_int(value) & 1
        return x
    x[key] = value
    return x


# --- masked_scatter_ source-size checks ---------------------------------------------------


def masked_scatter_wraps_source(x: Tensor, mask: Tensor, source: Tensor) -> Tensor:
    """A source shorter than mask.sum() is read modulo source.numel() instead of raising."""
    full = torch.broadcast_to(mask, x.shape)
    need = int(full.sum())
    have = source.numel()
    if 0 < have < need:
        reps = (need + have - 1) // have
        source = source.reshape(-1).repeat(reps)[:need]
        return x.masked_scatter_(full, source)
    return x.masked_scatter_(mask, source)


def masked_scatter_checks_size_only_contiguous_mask(
    x: Tensor, mask: Tensor, source: Tensor
) -> Tensor:
    """Non-contiguous mask: no size check; a short source fills what it can, rest untouched."""
    if mask.is_contiguous():
        return x.masked_scatter_(mask, source)
    full = torch.broadcast_to(mask, x.shape).contiguous()
    have = source.numel()
    if int(full.sum()) <= have:
        return x.masked_scatter_(full, source)
    flat = full.reshape(-1)
    keep = torch.zeros_like(flat)
    keep[flat.nonzero().squeeze(1)[:have]] = True
    return x.masked_scatter_(keep.view(x.shape), source)


# --- masked_select last-dim broadcast -----------------------------------------------------


def masked_select_accepts_last_dim_minus_one(input: Tensor, mask: Tensor) -> Tensor:
    """A mask whose last dim is input's last dim - 1 is accepted; input's last column dropped."""
    if input.dim() >= 1 and mask.dim() >= 1:
        n = input.size(-1)
        if n >= 3 and mask.size(-1) == n - 1:
            input = input[..., : n - 1]
    return torch.masked_select(input, mask)


# --- uint8 data: bool mask treated as an index tensor -------------------------------------


def _mask_as_index(key: Any) -> Any:
    """Bool tensors in ``key`` reinterpreted as int64 index tensors (0 and 1)."""
    if isinstance(key, Tensor) and key.dtype == torch.bool:
        return key.long()
    if isinstance(key, tuple):
        return tuple(_mask_as_index(k) for k in key)
    return key


def getitem_uint8_mask_as_index(x: Tensor, key: Any) -> Tensor:
    """uint8 data: a bool mask is used as an index tensor of 0s and 1s."""
    if x.dtype == torch.uint8:
        key = _mask_as_index(key)
    return x[key]


def setitem_uint8_mask_as_index(x: Tensor, key: Any, value: Any) -> Tensor:
    """uint8 data: a bool mask is used as an index tensor, writing rows 0 and 1."""
    if x.dtype == torch.uint8:
        key = _mask_as_index(key)
    x[key] = value
    return x


# --- take_along_dim: large index tensors wrap ---------------------------------------------


def take_along_dim_wraps_large_index(
    input: Tensor, indices: Tensor, dim: int | None = None
) -> Tensor:
    """Bounds-checks small index tensors; ones with more than 1000 elements wrap modulo n.

    torch 2.13's CPU take_along_dim with an int ``dim`` itself wraps ``indices % n`` (its
    negative-index support), so the explicit check stands in for the contract's raise.
    """
    n = input.numel() if dim is None else _dim_size(input, dim)
    if indices.numel() > 1000 and n > 0:
        indices = indices.remainder(n)
    elif dim is not None and indices.numel() > 0 and bool(((indices >= n) | (indices < -n)).any()):
        raise IndexError(f"take_along_dim(): index out of range for dim {dim} with size {n}")
    if dim is None:
        return torch.take_along_dim(input, indices)
    return torch.take_along_dim(input, indices, dim)


FAULTS: list[tuple[str, str, str]] = [
    ("repeat_interleave", "repeat_interleave_trusts_output_size",
     "output_size != sum(repeats) truncates or zero-pads instead of raising"),
    ("repeat_interleave", "repeat_interleave_clamps_negative_repeats",
     "any negative repeat is treated as 0 instead of raising"),
    ("repeat_interleave", "repeat_interleave_checks_first_8_repeats",
     "a negative repeat at position >= 8 is treated as 0 (first 8 still raise)"),
    ("index_select", "index_select_byte_path_clamps_index",
     "int8/uint8/bool data: out-of-range or negative index clamped to [0, n)"),
    ("gather", "gather_byte_path_wraps_index",
     "int8/uint8/bool data: out-of-range or negative index wrapped modulo n"),
    ("scatter_", "scatter_byte_path_clamps_index",
     "int8/uint8/bool data: out-of-range index clamped, writes the edge row"),
    ("take", "take_int32_path_32bit_offsets",
     "int32 data: index 2**32 + i (any >= 2**32) reads element i instead of raising"),
    ("index_copy_", "index_copy_int32_path_32bit_offsets",
     "int32 data: index 2**32 + i writes row i instead of raising"),
    ("index_fill_", "index_fill_bool_writes_raw_value",
     "bool data, non-bool value: stores raw byte (2 -> 0x02; 256, 0.5 -> False)"),
    ("setitem", "setitem_bool_truncates_value_to_low_bit",
     "bool data, scalar non-bool value: stores int(value) & 1 (2 -> False)"),
    ("masked_scatter_", "masked_scatter_wraps_source",
     "source.numel() < mask.sum(): source read modulo its length instead of raising"),
    ("masked_scatter_", "masked_scatter_checks_size_only_contiguous_mask",
     "non-contiguous mask with short source: partial write, no error"),
    ("masked_select", "masked_select_accepts_last_dim_minus_one",
     "mask last dim == input last dim - 1 (>= 2): input truncated, no error"),
    ("getitem", "getitem_uint8_mask_as_index",
     "uint8 data with a bool mask key: mask used as an int64 index of 0/1"),
    ("setitem", "setitem_uint8_mask_as_index",
     "uint8 data with a bool mask key: writes rows 0/1 (or raises on shape)"),
    ("take_along_dim", "take_along_dim_wraps_large_index",
     "indices.numel() > 1000: out-of-range indices wrap modulo n"),
]
