"""TopK reference with torch.topk's documented semantics, in numpy.

- NaN compares larger than every other value (so it leads a largest-k selection and is
  picked last by a smallest-k selection); -0.0 and 0.0 compare equal.
- Ties: any valid index set is correct; values must match exactly.
- Values are exact: float inputs are held as float64 (every float16/bfloat16/float32 value
  is exactly representable), integer inputs as int64.
"""

from __future__ import annotations

import numpy as np


def topk(x: np.ndarray, k: int, axis: int = -1, largest: bool = True) -> np.ndarray:
    """The k largest (or smallest) values along ``axis``, ordered best first."""
    x = np.asarray(x)
    n = x.shape[axis] if x.ndim else 1
    if not 0 <= k <= n:
        raise ValueError(f"k={k} out of range for a slice of length {n}")
    if x.ndim == 0:
        return x.copy()
    moved = np.moveaxis(x, axis, -1)
    ordered = np.sort(moved, axis=-1, kind="stable")  # ascending, NaN last (= largest)
    picked = ordered[..., ::-1][..., :k] if largest else ordered[..., :k]
    return np.moveaxis(picked, -1, axis)


def same_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise equality where NaN equals NaN and -0.0 equals 0.0."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return (a == b) | (np.isnan(a) & np.isnan(b))
    return a == b


def identical_values(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise identity: like ``same_values`` but -0.0 and 0.0 differ.

    A NaN's sign and payload carry no meaning (IEEE 754 6.3) and kernels canonicalise them
    (torch's CPU bfloat16 topk returns 0x7FC0 for an input NaN 0xFFFF), so any NaN matches
    any NaN."""
    eq = same_values(a, b)
    if np.asarray(a).dtype.kind == "f":
        eq &= (np.signbit(a) == np.signbit(b)) | np.isnan(a)
    return eq


def sort_for_multiset(values: np.ndarray, axis: int) -> np.ndarray:
    """Canonical order of a slice's values (ascending, NaN last) to compare multisets."""
    return np.sort(values, axis=axis)
