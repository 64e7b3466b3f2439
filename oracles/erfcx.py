"""The scaled complementary error function erfcx(x) = exp(x^2) erfc(x), in float64 and to
40 digits (torch-free).

- ``erfcx`` is scipy.special.erfcx (float64, vectorised); ``erfcx_exact`` evaluates the
  definition with mpmath at 40 significant digits and rounds once to float64, so it is the
  correctly rounded float64 value (the tests hold scipy to it).
- ``derivative`` is d/dx erfcx(x) = 2x erfcx(x) - 2/sqrt(pi), also with mpmath: in float64
  the difference cancels for large x (it tends to -1/(sqrt(pi) x^2)).
- Special values: erfcx(+inf) = 0, erfcx(-inf) = +inf, erfcx(NaN) = NaN, erfcx(+-0) = 1;
  for large negative x the value 2 exp(x^2) overflows (float64 beyond x ~ -26.63).
- ``ulp`` is the spacing of a binary format at |y| (subnormals included): the unit the
  erfcx area's bound is stated in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import mpmath
import numpy as np
from scipy import special

DIGITS = 40
TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
# (precision p including the implicit bit, smallest normal exponent, largest finite)
FORMATS = {
    "float16": (11, -14, 65504.0),
    "bfloat16": (8, -126, float(np.finfo(np.float32).max) * (1 - 2.0**-8)),
    "float32": (24, -126, float(np.finfo(np.float32).max)),
    "float64": (53, -1022, float(np.finfo(np.float64).max)),
}


def erfcx(x: np.ndarray) -> np.ndarray:
    """scipy's float64 erfcx."""
    return special.erfcx(np.asarray(x, dtype=np.float64))


def _mp(x: float, f) -> float:  # f: an mpmath function of one mpf
    if math.isnan(x):
        return math.nan
    with mpmath.workdps(DIGITS):
        return float(f(mpmath.mpf(x)))


def _erfcx_mp(t: mpmath.mpf) -> mpmath.mpf:
    if mpmath.isinf(t):
        return mpmath.mpf(0) if t > 0 else mpmath.inf
    if t > 1e8:  # the asymptotic series; its next term is below 1e-48 relative here
        r = 1 / (2 * t * t)
        return (1 - r + 3 * r * r - 15 * r**3) / (t * mpmath.sqrt(mpmath.pi))
    if t < -1e8:
        return mpmath.inf  # 2 exp(t^2) is far beyond any binary format
    return mpmath.exp(t * t) * mpmath.erfc(t)


def _derivative_mp(t: mpmath.mpf) -> mpmath.mpf:
    if mpmath.isinf(t):
        return mpmath.mpf(0) if t > 0 else -mpmath.inf
    if t > 1e8:  # -1/(sqrt(pi) t^2) (1 - 3/(2 t^2) + ...)
        r = 1 / (2 * t * t)
        return -(1 - 3 * r + 15 * r * r) / (mpmath.sqrt(mpmath.pi) * t * t)
    return 2 * t * _erfcx_mp(t) - 2 / mpmath.sqrt(mpmath.pi)


def erfcx_exact(x: Iterable[float] | np.ndarray) -> np.ndarray:
    """erfcx to 40 digits, rounded once to float64 (inf where it overflows float64)."""
    x = np.asarray(x, dtype=np.float64)
    out = [_mp(float(v), _erfcx_mp) for v in x.ravel()]
    return np.asarray(out, dtype=np.float64).reshape(x.shape)


def derivative(x: Iterable[float] | np.ndarray) -> np.ndarray:
    """2x erfcx(x) - 2/sqrt(pi) to 40 digits, rounded once to float64."""
    x = np.asarray(x, dtype=np.float64)
    out = [_mp(float(v), _derivative_mp) for v in x.ravel()]
    return np.asarray(out, dtype=np.float64).reshape(x.shape)


def ulp(y: np.ndarray, fmt: str) -> np.ndarray:
    """The spacing of format ``fmt`` at |y|: 2^(e - p + 1) for 2^e <= |y| < 2^(e+1), and the
    subnormal spacing 2^(emin - p + 1) below the normal range (and at 0)."""
    p, emin, _ = FORMATS[fmt]
    a = np.abs(np.asarray(y, dtype=np.float64))
    _, exp = np.frexp(np.where(np.isfinite(a), a, 0.0))  # a = m 2^exp, 0.5 <= m < 1: exact
    e = np.maximum(np.where(a > 0, exp - 1, emin), emin)
    return np.ldexp(1.0, (e - p + 1).astype(int))
