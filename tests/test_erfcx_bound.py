"""The erfcx bound's derivation, checked: the approximation errors it takes as at most u
(mpmath, 30 digits), its size where the docs state it, and that it holds an independent
float32 evaluation of the algorithm's shape (positive terms, the argument's rounding)."""

from __future__ import annotations

import math

import mpmath
import numpy as np

from conformance.areas.special import erfcx_bound as bound
from oracles import erfcx as ox

U64 = 2.0**-53


def _chebyshev_tail(k: int, n: int = 24) -> float:
    """sum_{j > 6} |a_j| / min erfcx on piece k (y in [k, k + 1)): the truncation error of
    the degree-6 Chebyshev series in t."""
    with mpmath.workdps(30):
        nodes = [mpmath.cos(mpmath.pi * (i + mpmath.mpf(0.5)) / n) for i in range(n)]
        vals = []
        for t in nodes:
            x = mpmath.mpf(800) / (t + 2 * k + 1) - 4
            vals.append(mpmath.exp(x * x) * mpmath.erfc(x))
        tail = sum(abs(sum(v * mpmath.cos(j * mpmath.pi * (i + mpmath.mpf(0.5)) / n)
                           for i, v in enumerate(vals)) * 2 / n) for j in range(7, 12))
        return float(tail / min(vals))


def test_degree_six_pieces_are_exact_to_u64():
    worst = max(_chebyshev_tail(k) for k in range(bound.FIRST, bound.LAST + 1, 4))
    assert worst < 0.25 * U64, worst / U64


def test_continued_fraction_is_exact_to_u64_past_50():
    with mpmath.workdps(40):
        worst = 0.0
        for v in np.geomspace(50, 5e7, 60):
            x = mpmath.mpf(v)
            x2 = x * x
            cf = (x2 * (x2 + mpmath.mpf(4.5)) + 2) / (x * (x2 * (x2 + 5) + mpmath.mpf(3.75)))
            exact = mpmath.exp(x2) * mpmath.erfc(x)
            worst = max(worst, float(abs(cf / mpmath.sqrt(mpmath.pi) - exact) / exact))
    assert worst < 0.5 * U64, worst / U64


def test_the_bound_where_the_docs_state_it():
    """float32 and float64 alike in ulps: ~27 just above 0 (the argument's rounding at
    kappa_y = 4.5 plus Horner's 13), 8-12 past 50, ~5 for x <= -1; half types: half an ulp
    plus a float32 allowance far below one half-type ulp."""
    x = np.array([1e-3, 0.5, 5.0, 60.0, 1e9, -1.0, -5.0])
    for dtype in ("float32", "float64"):
        ulps = bound.in_ulps(x, ox.erfcx(x), dtype)
        assert 25 < ulps[0] < 30 and 8 < ulps[3] < 12 and ulps[4] < 3, ulps
        assert (ulps[5:] < 6).all(), ulps
    half = bound.in_ulps(x, ox.erfcx(x), "bfloat16")
    assert (np.abs(half - 0.5) < 0.01).all(), half
    assert bound.gamma(3, 2.0**-24) == 3 * 2.0**-24 / (1 - 3 * 2.0**-24)


def test_kappa_is_the_arguments_condition_number():
    """A relative change theta of y = 400 / (4 + x) moves erfcx by kappa_y theta."""
    x = np.array([0.01, 1.0, 10.0, 40.0])
    theta = 1e-7
    y = 400 / (4 + x)
    x_moved = 400 / (y * (1 + theta)) - 4
    moved = np.abs(ox.erfcx_exact(x_moved) / ox.erfcx_exact(x) - 1) / theta
    f = ox.erfcx(x)
    kappa = np.abs(2 * x * f - 2 / math.sqrt(math.pi)) * (4 + x) / f
    assert np.allclose(moved, kappa, rtol=1e-3), (moved, kappa)


def test_backward_criterion_fails_zero_and_flipped_gradients_past_700():
    """The issue's case: in float32 past x = 700 a gradient forced to 0 or of the wrong sign
    failed nothing (the formula's slack exceeded the gradient); now both fail, and the true
    gradient off by 2^-9 relative passes."""
    from conformance.areas.special.erfcx_checks import backward_bound

    x = np.linspace(700, 1e4, 50)
    g = np.ones_like(x)
    d, fx = ox.derivative(x), ox.erfcx_exact(x)
    allowed = backward_bound(x, g, fx, d, "float32")
    assert (np.abs(0 - d) > allowed).all() and (np.abs(-d - d) > allowed).all()
    assert (np.abs(d * 2.0**-9) <= allowed).all()
