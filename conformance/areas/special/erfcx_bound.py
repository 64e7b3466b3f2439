"""The erfcx forward bound, derived from the rounding of the common algorithm (Johnson's
Faddeeva-package erfcx: torch's Math.h, its CUDA and Metal ports, SciPy), computed per
element (docs/areas/special-erfcx.md#derivation gives the derivation in full).

A kernel computing in a binary format of unit roundoff u (gamma_n = n u / (1 - n u)):

- 0 < x < 50: y = 400 / (4 + x) (up to 3 roundings: the sum, then a division, or a
  reciprocal and a product; t = 2y - (2k + 1) is exact, Sterbenz, as 2y is in [2k, 2k + 2)
  with k >= 7), then a degree-6 polynomial in t
  by Horner's rule (12 operations, coefficients rounded: gamma_13 times the evaluation's
  condition number c_H = sum |c_i t^i| / |p(t)|). A relative error theta in y is a
  perturbation of 4 + x by theta, which moves erfcx by kappa_y = |f'(x)| (4 + x) / f(x):

      rel(x) = kappa_y(x) gamma_3 + c_H(x) gamma_13 + u   (u: the approximation's own error)

- 50 <= x <= 5e7: the continued fraction (x^2 (x^2 + 4.5) + 2) / (x (x^2 (x^2 + 5) + 3.75))
  / sqrt(pi), positive terms only: gamma_14 + u;  x > 5e7: 1 / (sqrt(pi) x), two roundings
  and the series' truncation: gamma_2 + 1 / (2 x^2).
- x < 0: 2 exp(x^2) - erfcx(-x), with a = erfcx(-x) exp(-x^2) / 2 (the cancellation):
  rel(x) = (2 EXP_ULPS u) / (1 - a) + rel(-x) a / (1 - a) + u. The rounding of x * x is a
  relative input perturbation of u / 2 and is covered by the interval f(x(1 +- u)).
- A subnormal result adds the format's subnormal spacing (an absolute error: half of it
  for the kernel's rounding, half for the float64 oracle's when the format is float64).

Half types: the kernel computes in float32 and rounds once: float32's rel and input
perturbation, plus half an ulp of the half type. c_H comes from degree-6 Chebyshev fits of
erfcx on each interval (the shape of the algorithm's pieces, fitted here in float64). The
approximations' own errors, the ``u`` terms, are below u64: the Chebyshev tail past degree 6
is at most 0.2 u64 on every piece, the continued fraction within 0.35 u64 of erfcx for
x >= 50 (tests/test_erfcx_bound.py computes both with mpmath).
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np
from numpy.polynomial import chebyshev

from oracles import erfcx as ox

EXP_ULPS = 2.0  # exp's error in ulps: CUDA's documented maximum for expf/exp (glibc's < 1)
DEGREE = 6
FIRST, LAST = 7, 99  # the pieces y in [k, k + 1) that x in [0, 50) reaches
C = 2.0 / math.sqrt(math.pi)
COMPUTE = {"float16": "float32", "bfloat16": "float32", "float32": "float32",
           "float64": "float64"}


def gamma(n: int, u: float) -> float:
    return n * u / (1 - n * u)


def compute_unit(dtype: str) -> float:
    """The unit roundoff of the format the kernel is certified to compute in."""
    return 2.0 ** -ox.FORMATS[COMPUTE[dtype]][0]


@cache
def _pieces() -> np.ndarray:
    """(LAST + 1, DEGREE + 1): monomial coefficients in t of each piece (rows < FIRST zero)."""
    out = np.zeros((LAST + 1, DEGREE + 1))
    t = np.cos(np.pi * (np.arange(32) + 0.5) / 32)  # Chebyshev nodes on [-1, 1]
    for k in range(FIRST, LAST + 1):
        x = 800.0 / (t + 2 * k + 1) - 4.0
        cheb = chebyshev.chebfit(t, ox.erfcx(x), DEGREE)
        out[k] = chebyshev.cheb2poly(cheb)
    return out


def horner_condition(x: np.ndarray) -> np.ndarray:
    """sum |c_i t^i| / |p(t)| at each 0 <= x < 50 (1 where y >= 100, i.e. erfcx = 1)."""
    y = 400.0 / (4.0 + x)
    k = np.clip(np.floor(y).astype(int), FIRST, LAST)
    t = 2 * y - (2 * k + 1)
    coef = _pieces()[k]
    powers = t[:, None] ** np.arange(DEGREE + 1)
    cond = np.abs(coef * powers).sum(1) / np.abs((coef * powers).sum(1))
    return np.where(y >= 100, 1.0, cond)


def _positive(x: np.ndarray, u: float) -> np.ndarray:
    f = ox.erfcx(x)
    kappa = np.abs(2 * x * f - C) * (4 + x) / f
    small = kappa * gamma(3, u) + horner_condition(np.minimum(x, 49.9)) * gamma(13, u) + u
    with np.errstate(over="ignore", under="ignore", divide="ignore"):  # x * x -> 0 or inf:
        far = gamma(2, u) + 0.5 / (x * x)  # used only past 5e7, where it is finite
    return np.where(x < 50, small, np.where(x <= 5e7, gamma(14, u) + u, far))


def relative_error(x: np.ndarray, dtype: str) -> np.ndarray:
    """The derived relative error of erfcx(x) as computed in ``dtype``'s compute format,
    beyond the input perturbation (finite, nonzero x)."""
    u = compute_unit(dtype)
    x = np.asarray(x, dtype=np.float64)
    pos = _positive(np.abs(x), u)
    with np.errstate(over="ignore", under="ignore"):
        a = np.where(x < 0, ox.erfcx(np.abs(x)) * np.exp(-x * x) / 2, 0.0)
    neg = 2 * EXP_ULPS * u / (1 - a) + pos * a / (1 - a) + u
    return np.where(x < 0, neg, pos)


def allowance(x: np.ndarray, value: np.ndarray, dtype: str) -> np.ndarray:
    """The absolute slack around the exact value ``value`` (an end of f(x(1 +- u))):
    rel(x) |value|, the compute format's subnormal spacing, and for the half types half
    an ulp of the half type (the final rounding)."""
    fmt = COMPUTE[dtype]
    p, emin, _ = ox.FORMATS[fmt]
    with np.errstate(invalid="ignore", over="ignore"):
        slack = relative_error(x, dtype) * np.abs(value) + 2.0 ** (emin - p + 1)
        if fmt != dtype:
            slack = slack + 0.5 * ox.ulp(np.where(np.isfinite(value), value, 0.0) + slack,
                                         dtype)
    return slack


def in_ulps(x: np.ndarray, value: np.ndarray, dtype: str) -> np.ndarray:
    """The allowance in ulps of ``dtype`` at ``value`` (for the report)."""
    return allowance(x, value, dtype) / ox.ulp(value, dtype)
