"""conformance.stats.gof and oracles.samplers against analytic values, mpmath and torch."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch
from scipy import stats as sps

from conformance.stats import gof as stats
from conformance.stats.gof import FORMATS
from oracles.samplers import oracle, perturbed


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32"])
def test_rounding_cells_match_torch(name):
    """Every real in [lo, hi) of a value's cell rounds to that value in torch."""
    fmt = FORMATS[name]
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.standard_normal(20000) * 10.0 ** rng.integers(-9, 6, 20000),
                        [0.0, 1.0, 2.0, -2.0, 65504.0, 65519.9, 65520.0, 1e38, -1e38]])
    r = torch.from_numpy(x).to(getattr(torch, name)).double().numpy()
    lo, hi = stats.rounding_cells(r, fmt)
    assert np.all((lo <= x) & (x <= hi))
    if name != "float32":
        values = stats.representable(fmt)
        lo, hi = stats.rounding_cells(values, fmt)
        assert np.array_equal(hi[:-1], lo[1:]) and lo[0] == -np.inf and hi[-1] == np.inf
    np.testing.assert_array_equal(stats.round_to(x.astype(np.float32).astype(np.float64), fmt),
                                  torch.from_numpy(x.astype(np.float32)).to(
                                      getattr(torch, name)).double().numpy())


def test_overflow_threshold():
    f16 = FORMATS["float16"]
    assert f16.max_finite == 65504.0 and f16.overflow_threshold == 65520.0
    assert torch.tensor(65519.99, dtype=torch.float64).half().item() == 65504.0
    assert math.isinf(torch.tensor(65520.0, dtype=torch.float64).half().item())


def test_ks_matches_scipy_for_continuous():
    x = np.random.default_rng(1).standard_normal(5000)
    ours = stats.ks_test(x, sps.norm.cdf)
    ref = sps.kstest(x, "norm")
    assert ours.statistic == pytest.approx(ref.statistic, rel=1e-12)
    assert ours.pvalue == pytest.approx(ref.pvalue, rel=0.05)


def test_tests_are_calibrated():
    """p-values under the null are uniform, or conservative for the chi-square (KS of 300
    p-values per test)."""
    rng = np.random.default_rng(2)
    o = oracle("normal_", (0.0, 1.0))
    mean, var = o.moments(o.tests["scale score"], None)
    ps: dict[str, list[float]] = {k: [] for k in ("ks", "chi2", "mean", "lag1", "pmf")}
    v16, p16 = o.rounded_pmf(FORMATS["bfloat16"])
    for _ in range(300):
        x = rng.standard_normal(2000)
        ps["ks"].append(stats.ks_test(x, o.cdf).pvalue)
        ps["chi2"].append(stats.binned_chisquare(x, o.cdf, o.ppf, None, 20).pvalue)
        ps["mean"].append(stats.mean_test(o.tests["scale score"](x), mean, var, "m").pvalue)
        ps["lag1"].append(stats.serial_test(o.u(x)).pvalue)
        xb = torch.from_numpy(x).bfloat16().double().numpy()
        ps["pmf"].append(stats.ks_pmf_test(xb, v16, p16).pvalue)
    for name, p in ps.items():
        # the chi-square's tail is conservative by construction (stat_tails): its p-values
        # may only be stochastically larger than uniform
        side = "greater" if name == "chi2" else "two-sided"
        assert sps.kstest(p, "uniform", alternative=side).pvalue > 1e-4, name


def test_pooling_keeps_expected_counts():
    probs = sps.geom(0.3).pmf(np.arange(1, 60))
    counts, pooled = stats.pool_cells(np.ones(59), probs, 1000)
    assert np.all(pooled * 1000 >= stats.MIN_EXPECTED) and counts.sum() == 59
    assert pooled.sum() == pytest.approx(probs.sum())


def test_repeat_and_serial_tests_detect():
    rng = np.random.default_rng(3)
    u = rng.uniform(size=1 << 16)
    assert not stats.repeat_test(u).rejected
    u[20000:24096] = u[:4096]
    assert stats.repeat_test(u).rejected
    e = rng.standard_normal(200000)
    ar = e.copy()
    ar[1:] += 0.05 * e[:-1]
    assert stats.serial_test(sps.norm.cdf(ar)).rejected


def test_two_sample():
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal(50000), rng.standard_normal(50000)
    assert not stats.two_sample_test(a, b, False).rejected
    assert stats.two_sample_test(a, b * 1.1, False).rejected
    k1, k2 = rng.geometric(0.3, 50000), rng.geometric(0.3, 50000)
    assert not stats.two_sample_test(k1, k2, True).rejected
    assert stats.two_sample_test(k1, rng.geometric(0.33, 50000), True).rejected


def test_power_formula():
    n = stats.required_n(0.01, 1.0)
    assert stats.power_of(0.01, 1.0, n) >= 0.99 > stats.power_of(0.01, 1.0, int(n * 0.9))
    assert pytest.approx(stats.FAMILY_ALPHA) == stats.ALPHA * stats.CHECK_BUDGET


# ---- oracles: torch's parameterisation ------------------------------------------------------

def test_oracle_parameterisations_analytic():
    mpmath.mp.dps = 30
    ln = oracle("log_normal_", (1.0, 0.5)).dist
    assert ln.mean() == pytest.approx(float(mpmath.exp(1 + mpmath.mpf(0.25) / 2)), rel=1e-12)
    assert ln.median() == pytest.approx(math.e, rel=1e-12)
    c = oracle("cauchy_", (2.0, 3.0)).dist
    assert c.median() == 2.0 and c.cdf(5.0) == pytest.approx(0.75, rel=1e-14)
    g = oracle("geometric_", (0.3,)).dist
    for k in (1, 2, 7):
        assert g.pmf(k) == pytest.approx(0.3 * 0.7 ** (k - 1), rel=1e-12)
    assert g.pmf(0) == 0
    assert oracle("exponential_", (4.0,)).dist.mean() == pytest.approx(0.25)
    r = oracle("random_", (3, 10)).dist
    assert r.pmf(3) == pytest.approx(1 / 7) and r.pmf(10) == 0
    u = oracle("uniform_", (-1.0, 3.0)).dist
    assert u.cdf(-1.0) == 0 and u.cdf(3.0) == 1 and u.cdf(1.0) == 0.5


def test_score_moments():
    """Targeted test functions: mean 0 and the Fisher information as variance (scores)."""
    c = oracle("cauchy_", (0.0, 1.0))
    for name in ("location score", "scale score"):
        m, v = c.moments(c.tests[name], None)
        assert abs(m) < 1e-9 and v == pytest.approx(0.5, rel=1e-7)
    n = oracle("normal_", (0.5, 2.0))
    m, v = n.moments(n.tests["location score"], None)
    assert abs(m) < 1e-9 and v == pytest.approx(1.0, rel=1e-9)
    m, v = n.moments(n.tests["scale score"], None)
    assert m == pytest.approx(1.0, rel=1e-9) and v == pytest.approx(2.0, rel=1e-8)


def test_rounded_law_of_cauchy_in_float16_overflows():
    """P(+inf) = P(X >= 65520) = 1/2 - atan(65520)/pi (mpmath)."""
    values, probs = oracle("cauchy_", (0.0, 1.0)).rounded_pmf(FORMATS["float16"])
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    mpmath.mp.dps = 30
    want = float(mpmath.mpf(1) / 2 - mpmath.atan(65520) / mpmath.pi)
    assert values[-1] == np.inf and probs[-1] == pytest.approx(want, rel=1e-9)


def test_uniform_folds_to_onto_from():
    values, probs = oracle("uniform_", (2.0, 2.5)).rounded_pmf(FORMATS["bfloat16"])
    inside = probs > 0
    assert values[inside][0] == 2.0 and values[inside][-1] == 2.484375
    np.testing.assert_allclose(probs[inside], 1 / 32, rtol=1e-12)


@pytest.mark.parametrize("method,params,check", [
    ("log_normal_", (1.0, 0.5), lambda x: (np.log(x).mean(), np.log(x).std(), 1.0, 0.5)),
    ("normal_", (-2.0, 3.0), lambda x: (x.mean(), x.std(), -2.0, 3.0)),
    ("exponential_", (4.0,), lambda x: (x.mean(), x.std(), 0.25, 0.25)),
    ("geometric_", (0.25,), lambda x: (x.mean(), x.std(), 4.0, math.sqrt(0.75) / 0.25)),
])
def test_torch_parameterisation(method, params, check):
    """torch's samples have the oracle's moments (5-sigma bands at n = 1e5)."""
    t = getattr(torch.empty(100000, dtype=torch.float64), method)(
        *params, generator=torch.Generator().manual_seed(5))
    m, s, m0, s0 = check(t.numpy())
    assert abs(m - m0) < 5 * s0 / math.sqrt(1e5) and abs(s / s0 - 1) < 0.02
    o = oracle(method, params)
    assert o.dist.mean() == pytest.approx(np.exp(1.125) if method == "log_normal_"
                                          else (m0 if method != "geometric_" else 4.0))


def test_perturbations():
    assert perturbed("normal_", (1.0, 2.0), "location") == (1.02, 2.0)
    assert perturbed("cauchy_", (0.0, 1.0), "scale") == (0.0, 1.01)
    assert perturbed("geometric_", (0.3,), "p") == pytest.approx((0.303,))
    assert perturbed("random_", (3.0, 103.0), "scale") == (3.0, 104.0)


def test_support_rule_allows_the_generators_grid():
    """torch draws uniform_(-1, 3) in bfloat16 from 24-bit uniforms, so 0.0 comes out with
    probability 2^-24 although its bfloat16 rounding cell is ~1e-45 wide: interior values
    are never 'impossible'; extreme-tail values of negligible mass are."""
    from conformance.areas.samplers.checks import impossible_values

    bf16, f16 = FORMATS["bfloat16"], FORMATS["float16"]
    assert impossible_values(oracle("uniform_", (-1.0, 3.0)), np.array([0.0]), bf16)[0] == 0
    assert impossible_values(oracle("uniform_", (-1.0, 3.0)), np.array([3.0]), bf16)[0] == 1
    assert impossible_values(oracle("uniform_", (-1.0, 3.0)), np.array([-1.0078125]),
                             bf16)[0] == 1
    assert impossible_values(oracle("normal_", (0.0, 1.0)), np.array([1e10]), bf16)[0] == 1
    assert impossible_values(oracle("log_normal_", (3.0, 1.0)), np.array([0.0]), f16)[0] == 1
    assert impossible_values(oracle("normal_", (0.0, 1.0)), np.array([np.nan]), f16)[0] == 1


@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_counts_from_bit_patterns_match_a_search(name):
    """The 16-bit counts (by bit pattern, no search) equal a search over the sorted
    values, ±inf and -0 included; NaN is left out."""
    from conformance.areas.samplers.checks import rounded_counts

    fmt = FORMATS[name]
    values = stats.representable(fmt)
    x = torch.randn(50_000, generator=torch.Generator().manual_seed(3)).mul(3e4)
    x = np.concatenate([x.to(getattr(torch, name)).double().numpy(),
                        [np.inf, -np.inf, -0.0, 0.0, np.nan]])
    finite = x[~np.isnan(x)]
    expected = np.bincount(np.searchsorted(values, finite), minlength=values.size)
    np.testing.assert_array_equal(rounded_counts(x, fmt), expected)


def test_chisquare_pools_a_count_in_a_zero_probability_cell():
    """Found by a thorough run (seed 837978523, torch 2.13): bfloat16 uniform_(-1, 3) on a
    strided view of 400,149 elements returned 0.0 once (mass 2^-24 on torch's grid, ~1e-41
    in the rounded law, 0 in float64). Impossibility is the support check's call; the
    chi-square pools the cell (the sample here: the law's multinomial plus that 0.0)."""
    from conformance.areas.samplers.checks import _rounded

    values, probs, _ = _rounded("uniform", (-1.0, 3.0), "bfloat16")
    zero = int(np.searchsorted(values, 0.0))
    assert probs[zero] == 0.0
    counts = np.random.default_rng(837978523).multinomial(400_148, probs / probs.sum())
    counts[zero] += 1
    assert not stats.chisquare_test(counts, probs).rejected


def test_ks_tail_is_exact_near_the_level():
    """Where a KS p-value can decide a rejection it is the exact finite-n tail (scipy's
    kstwo), not Stephens' approximation, which is slightly small there."""
    from conformance.stats.gof import ALPHA, ks_sf

    n = 100_013
    d = 6.5 / math.sqrt(n)
    assert ks_sf(d, n) == pytest.approx(sps.kstwo.sf(d, n), rel=1e-12)
    assert ks_sf(d, n) < ALPHA
    scale = math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)  # Stephens' finite-n form
    assert sps.kstwobign.sf(d * scale) < ks_sf(d, n)  # alone it would reject more often
    far = 1.0 / math.sqrt(n)  # far from the level: the cheap form
    assert ks_sf(far, n) == pytest.approx(sps.kstwobign.sf(far * scale))
