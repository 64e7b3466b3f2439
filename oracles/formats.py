"""Binary floating formats, their rounding cells and round-to-nearest, in float64 numpy.

Shared by the sampler oracles (a law pushed through rounding) and the statistical tests
(KS evaluated at rounding boundaries). Torch-free.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating format: ``digits`` significand bits (implicit bit included)."""

    name: str
    digits: int
    emin: int
    emax: int

    @property
    def max_finite(self) -> float:
        return math.ldexp(2.0 - math.ldexp(1.0, 1 - self.digits), self.emax)

    @property
    def overflow_threshold(self) -> float:
        """Values at or above this round to +inf (round to nearest, ties to even)."""
        return math.ldexp(2.0 - math.ldexp(1.0, -self.digits), self.emax)


FORMATS = {
    "float16": FloatFormat("float16", 11, -14, 15),
    "bfloat16": FloatFormat("bfloat16", 8, -126, 127),
    "float32": FloatFormat("float32", 24, -126, 127),
    "float64": FloatFormat("float64", 53, -1022, 1023),
}


def rounding_cells(values: np.ndarray, fmt: FloatFormat | None) -> tuple[np.ndarray, np.ndarray]:
    """For values representable in ``fmt``: the interval ``[lo, hi)`` of reals that round to
    each (round to nearest). ``fmt`` None or float64: the values themselves (continuous)."""
    v = np.asarray(values, dtype=np.float64)
    if fmt is None or fmt.digits >= 53:
        return v, v
    a = np.abs(v)
    mant, e = np.frexp(np.where(np.isfinite(a), a, 1.0))  # a = mant 2^e, mant in [0.5, 1)
    e = np.maximum(np.where(np.isinf(a), fmt.emax, np.where(a > 0, e - 1, fmt.emin)), fmt.emin)
    ulp = np.ldexp(1.0, e - fmt.digits + 1)
    # below a power of two (not subnormal) the spacing halves
    pow2 = (mant == 0.5) & (e > fmt.emin)
    up, down = a + ulp / 2, a - np.where(pow2, ulp / 4, ulp / 2)
    up = np.where(a == fmt.max_finite, fmt.overflow_threshold, up)
    up = np.where(np.isinf(a), np.inf, up)
    down = np.where(np.isinf(a), fmt.overflow_threshold, down)
    down = np.where(a == 0, -up, down)
    lo = np.where(v < 0, -up, down)
    hi = np.where(v < 0, -down, up)
    return lo, hi


def pattern_values(fmt: FloatFormat) -> np.ndarray:
    """The value of each of the 65536 bit patterns of a 16-bit format (NaN included)."""
    bits = np.arange(2**16, dtype=np.uint32)
    if fmt.name == "float16":
        return bits.astype(np.uint16).view(np.float16).astype(np.float64)
    with np.errstate(invalid="ignore"):
        return (bits << 16).view(np.float32).astype(np.float64)


def representable(fmt: FloatFormat) -> np.ndarray:
    """Every value of a 16-bit format, sorted, with ±inf, no NaN, one zero."""
    vals = pattern_values(fmt)
    return np.unique(vals[~np.isnan(vals)] + 0.0)


def round_to(values: np.ndarray, fmt: FloatFormat | None) -> np.ndarray:
    """float64 values rounded to nearest (ties to even) in ``fmt``, as float64."""
    v = np.asarray(values, dtype=np.float64)
    if fmt is None or fmt.name == "float64":
        return v
    if fmt.name == "float16":
        with np.errstate(over="ignore"):
            return v.astype(np.float16).astype(np.float64)
    with np.errstate(over="ignore"):
        f = v.astype(np.float32)
    if fmt.name == "float32":
        return f.astype(np.float64)
    b = np.atleast_1d(f).view(np.uint32).astype(np.uint64)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return b.view(np.float32).astype(np.float64).reshape(v.shape)
