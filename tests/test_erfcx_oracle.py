"""oracles/erfcx.py against analytic values, mpmath's own derivative and scipy."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import special

from oracles import erfcx as ox

pytestmark = pytest.mark.harness_only


def test_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
    got = ox.erfcx_exact(x)
    assert got[0] == 1 and got[1] == 1 and got[2] == 0 and got[3] == np.inf
    assert np.isnan(got[4])
    d = ox.derivative(np.array([0.0, np.inf]))
    assert d[0] == -2 / math.sqrt(math.pi) and d[1] == 0


def test_asymptotic_and_overflow():
    """erfcx(x) ~ 1/(x sqrt(pi)) (1 - 1/(2x^2)) for large x; 2 exp(x^2) for x << 0; the
    large-argument series branch joins the direct evaluation at 1e8."""
    for x in (1e3, 1e6, 3e7):
        want = (1 - 1 / (2 * x * x)) / (x * math.sqrt(math.pi))
        assert ox.erfcx_exact([x])[0] == pytest.approx(want, rel=1e-12)
    below, above = ox.erfcx_exact([1e8 * (1 - 1e-15), 1e8 * (1 + 1e-15)])
    assert below == pytest.approx(above, rel=1e-14)
    assert ox.erfcx_exact([-10.0])[0] == pytest.approx(2 * math.exp(100), rel=1e-15)
    assert ox.erfcx_exact([-26.7])[0] == np.inf  # beyond float64
    assert ox.erfcx_exact([-1e300])[0] == np.inf


@pytest.mark.parametrize("x", [-5.5, -1.0, -1e-3, 1e-3, 0.7, 3.0, 49.0, 51.0, 1e4])
def test_derivative_is_mpmaths(x):
    with mpmath.workdps(40):
        want = float(mpmath.diff(lambda t: mpmath.exp(t * t) * mpmath.erfc(t), mpmath.mpf(x)))
    assert ox.derivative([x])[0] == pytest.approx(want, rel=1e-14)


def test_derivative_series_branch():
    """Beyond 1e8: -1/(sqrt(pi) x^2) (1 - 3/(2x^2)), continuous with the direct form."""
    a, b = ox.derivative([1e8 * (1 - 1e-15), 1e8 * (1 + 1e-15)])
    assert a == pytest.approx(b, rel=1e-13)
    assert ox.derivative([1e20])[0] == pytest.approx(-1 / (math.sqrt(math.pi) * 1e40), rel=1e-14)


def test_scipy_agrees_where_well_conditioned():
    """scipy (Johnson's algorithm) is within 8 ulps of the 40-digit value for x >= -1 (the
    condition number is small there); for x << 0 it is not (x^2 ulps, x*x rounded)."""
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-1, 10, 300), np.exp(rng.uniform(0, 600, 100))])
    exact = ox.erfcx_exact(x)
    ulps = np.abs(ox.erfcx(x) - exact) / ox.ulp(exact, "float64")
    assert ulps.max() <= 8
    far = ox.erfcx_exact([-20.0])[0]
    assert abs(ox.erfcx(np.array([-20.0]))[0] - far) / ox.ulp(np.array([far]), "float64")[0] \
        < 1000


@pytest.mark.parametrize("fmt,np_type", [("float16", np.float16), ("float32", np.float32),
                                         ("float64", np.float64)])
def test_ulp_is_numpys_spacing(fmt, np_type):
    info = np.finfo(np_type)
    vals = np.array([float(info.smallest_subnormal), float(info.tiny) / 3, float(info.tiny),
                     1.0, 1.5, 3.0, 1000.0], dtype=np.float64)
    want = np.spacing(vals.astype(np_type)).astype(np.float64)
    np.testing.assert_array_equal(ox.ulp(vals, fmt), want)
    top = float(info.max)  # numpy's spacing there is inf (towards the next power of two)
    assert ox.ulp(np.array([top]), fmt)[0] == top - float(np.nextafter(np_type(top),
                                                                        np_type(0)))
    assert ox.ulp(np.array([0.0]), fmt)[0] == float(info.smallest_subnormal)


def test_ulp_bfloat16():
    assert ox.ulp(np.array([1.0]), "bfloat16")[0] == 2.0**-7
    assert ox.ulp(np.array([2.0**-130]), "bfloat16")[0] == 2.0**-133
    assert special.erfcx(0.0) == 1.0


def test_ulp_just_below_a_power_of_two():
    """log2 rounds 2 - 2^-52 up to 1; the exponent must come from frexp."""
    below = np.nextafter(2.0, 0.0)
    assert ox.ulp(np.array([below]), "float64")[0] == 2.0**-52
    assert ox.ulp(np.array([2.0]), "float64")[0] == 2.0**-51
