"""Bounds-masked tile loads and stores shared by the kernels."""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def load_tile(base, rows, cols, row_stride, n_rows, n_cols):
    """base[rows, cols] (unit column stride); zero outside [0, n_rows) x [0, n_cols)."""
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    return tl.load(base + rows[:, None] * row_stride + cols[None, :], mask=mask, other=0.0)


@triton.jit
def store_tile(base, rows, cols, row_stride, n_rows, n_cols, value):
    """base[rows, cols] = value, cast to base's element type, inside the bounds only."""
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    tl.store(base + rows[:, None] * row_stride + cols[None, :],
             value.to(base.dtype.element_ty), mask=mask)
