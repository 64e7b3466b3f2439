"""Tensor helpers shared by areas: exact conversion to numpy, memory layouts, dtype facts."""

from __future__ import annotations

import numpy as np
import torch

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")
INT_DTYPES = ("int8", "uint8", "int16", "int32", "int64")
LAYOUTS = ("contiguous", "transposed", "strided", "offset")


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def exact_numpy(t: torch.Tensor) -> np.ndarray:
    """The tensor's exact values on the CPU: float64 for floating, int64 for integer dtypes.

    Every float16/bfloat16/float32 value is exactly a float64, so nothing is rounded.
    """
    t = t.detach().cpu()
    if t.dtype.is_floating_point:
        return t.to(torch.float64).numpy()
    if t.dtype.is_complex:  # complex128 holds every complex32/64 value exactly
        return t.to(torch.complex128).numpy()
    if t.dtype == torch.bool:
        return t.numpy().astype(np.int64)
    return t.to(torch.int64).numpy()


def from_numpy(values: np.ndarray, dtype: torch.dtype, device: torch.device | str) -> torch.Tensor:
    """A contiguous tensor of ``dtype`` (rounded to nearest from float64 values)."""
    return torch.from_numpy(np.ascontiguousarray(values)).to(dtype).to(device)


def rounded(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to ``dtype`` (by name), as float64 again."""
    return exact_numpy(from_numpy(values, getattr(torch, dtype), "cpu"))


def relayout(t: torch.Tensor, layout: str) -> torch.Tensor:
    """The same values in another memory layout (same device and dtype).

    - contiguous: row-major
    - transposed: the last two dims stored swapped (column-major matrices)
    - strided: every other element of a buffer twice as long in the last dim
    - offset: contiguous but starting one element into its storage
    """
    if layout == "contiguous":
        return t.contiguous()
    if layout == "transposed" and t.dim() >= 2:
        return t.mT.contiguous().mT
    if layout in ("strided", "transposed"):
        if t.dim() == 0:
            return t.clone()
        shape = (*t.shape[:-1], 2 * t.shape[-1])
        buf = torch.full(shape, 0, dtype=t.dtype, device=t.device)
        buf[..., ::2] = t
        return buf[..., ::2]
    if layout == "offset":
        buf = torch.empty(t.numel() + 1, dtype=t.dtype, device=t.device)
        buf[1:] = t.reshape(-1)
        return buf[1:].view(t.shape)
    raise ValueError(f"unknown layout {layout!r} (expected one of {LAYOUTS})")


def describe(t: torch.Tensor) -> str:
    """Shape, stride and offset, for case descriptions."""
    return f"shape={tuple(t.shape)} stride={t.stride()} offset={t.storage_offset()}"
