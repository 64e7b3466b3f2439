"""Power of the sampler checks, shown on planted samplers with exactly a 1 % error.

The sample sizes in ``conformance/areas/samplers/data.py`` must be at least what the oracles say
a 1 % parameter error needs for power 0.99 at the per-check level; the power formula agrees
with a simulation of the statistic; over 20 seeds the targeted tests (a subset of the
powered check's family, so a lower bound on its power) detect each 1 %-error sampler at a
rate plausible for that power (reported with its interval), and the correct samplers raise
no alarm.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats as sps

from conformance.areas.samplers.checks import null_moments, to_numpy
from conformance.areas.samplers.data import SPECS
from conformance.stats.gof import ALPHA, FORMATS, mean_test, power_of, required_n
from oracles.samplers import detectable, oracle
from tests.planted import sampler_faults

SEEDS = range(20)


@pytest.mark.parametrize("name", list(SPECS))
def test_sample_sizes_have_the_power(name):
    """n >= the size at which a 1 % error is detected with probability 0.99 (float32 law
    and the coarsest rounded law, bfloat16)."""
    spec = SPECS[name]
    for fmt in (None, FORMATS["bfloat16"]):
        best: dict[str, float] = {}
        for kind, _test, shift, sd in detectable(spec.method, spec.main, fmt):
            best[kind] = max(best.get(kind, 0.0), power_of(shift, sd, spec.n))
            assert required_n(shift, sd) > 0
        for kind, power in best.items():
            assert power >= 0.99, (name, kind, fmt and fmt.name, power)


def _targeted_z(method: str, params: tuple, sampler, n: int, seed: int,
                dtype: torch.dtype = torch.float32) -> list[float]:
    o = oracle(method, params)
    t = torch.empty(n, dtype=dtype)
    sampler(t, *params, generator=torch.Generator().manual_seed(seed))
    x = to_numpy(t)
    fmt = dtype.__repr__().removeprefix("torch.")
    low = fmt if fmt in ("float16", "bfloat16") else None
    out = []
    for test, g in o.tests.items():
        mean, var = null_moments(o.method, o.params, low, test)
        out.append(mean_test(g(x), mean, var, test).statistic)
    return out


PLANTED = [(name, which) for name, kinds in sampler_faults.ONE_PERCENT.items() for which in kinds]
STATED_POWER = 0.99
IMPLAUSIBLE = 1e-6  # fail when P(this few detections | power 0.99) is below this


def _clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(sps.beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(sps.beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


@pytest.mark.parametrize("name,which", PLANTED, ids=[f"{n}-{w}" for n, w in PLANTED])
def test_one_percent_errors_are_detected(name, which):
    """A measurement: the detection rate of a 1 %-error sampler over 20 seeds, with its
    95 % interval; it fails only when so few detections are implausible (P < 1e-6) for the
    stated power 0.99, so a change of torch's random stream cannot flip it."""
    spec = SPECS[name]
    sampler = getattr(sampler_faults, f"{name}_{which}_1pct")
    params = tuple(int(p) for p in spec.main) if name == "random" else spec.main
    zmax = []
    for seed in SEEDS:
        z = _targeted_z(spec.method, params, sampler, spec.n, 1000 + seed)
        zmax.append(max(abs(v) for v in z))
    crit = float(sps.norm.isf(ALPHA / 2))
    detected = sum(v > crit for v in zmax)
    lo, hi = _clopper_pearson(detected, len(zmax))
    chance = float(sps.binom.cdf(detected, len(zmax), STATED_POWER))
    print(f"{name} {which}: detected {detected}/{len(zmax)} (95 % interval {lo:.3f}-{hi:.3f}), "
          f"|z| min {min(zmax):.2f} mean {np.mean(zmax):.2f} (critical {crit:.2f}); "
          f"P(<= {detected} | power {STATED_POWER}) = {chance:.2g}")
    assert chance >= IMPLAUSIBLE, (detected, zmax)


def test_power_formula_matches_a_simulation_of_the_statistic():
    """``power_of`` against the targeted statistic simulated from the perturbed law
    (numpy draws, not a sampler), at an n where the formula predicts power ~0.5 at a level
    where simulation is cheap (1e-3)."""
    o = oracle("normal_", (0.5, 2.0))
    g = o.tests["location score"]
    mean, var = o.moments(g, None)
    shift = float(o.moments(lambda x: g(np.asarray(x) + 0.02), None)[0] - mean)
    alpha, sd = 1e-3, float(np.sqrt(var))
    n = int((sps.norm.isf(alpha / 2) * sd / shift) ** 2)
    predicted = power_of(shift, sd, n, alpha)
    rng = np.random.default_rng(11)
    reps = 600
    hits = sum(mean_test(g(rng.normal(0.52, 2.0, n)), mean, var, "m").pvalue < alpha
               for _ in range(reps))
    lo, hi = _clopper_pearson(hits, reps, 0.999)
    print(f"predicted power {predicted:.3f}, simulated {hits / reps:.3f} ({lo:.3f}-{hi:.3f})")
    assert lo <= predicted <= hi


@pytest.mark.parametrize("name", list(SPECS))
def test_correct_samplers_raise_no_alarm(name):
    spec = SPECS[name]
    impl = getattr(__import__("impls.samplers").samplers, name)
    params = tuple(int(p) for p in spec.main) if name == "random" else spec.main
    crit = float(sps.norm.isf(ALPHA / 2))
    worst = max(max(abs(v) for v in _targeted_z(spec.method, params, impl, spec.n // 4,
                                                 2000 + seed)) for seed in SEEDS)
    assert worst < crit, worst


def test_tail_and_dependence_power_as_stated():
    """The power of the tail checks (exact binomial at TAIL_N) and of the magnitude lag-1
    test (normal approximation at SERIAL_N) as docs/areas/samplers.md states it."""
    from conformance.areas.samplers.data import SERIAL_N, TAIL_N
    from conformance.areas.samplers.dependence import TAIL_SLACK
    from conformance.stats.tails import binomial_power

    for q, low, high in ((1e-4, 0.60, 1.48), (1e-5, 0.057, 2.79)):
        assert binomial_power(TAIL_N, q, low * q, ALPHA, TAIL_SLACK) >= 0.99
        assert binomial_power(TAIL_N, q, high * q, ALPHA, TAIL_SLACK) >= 0.99
        assert binomial_power(TAIL_N, q, 0.0, ALPHA, TAIL_SLACK) == pytest.approx(1.0)
    rho = (sps.norm.isf(ALPHA / 2) + sps.norm.isf(0.01)) / np.sqrt(SERIAL_N)
    assert rho <= 0.017
    page = (Path(__file__).parents[1] / "docs" / "areas" / "samplers.md").read_text()
    page = " ".join(page.split())  # the page's line breaks fall anywhere
    for stated in ("below 0.60x or above 1.48x", "below 0.057x or above 2.79x",
                   "of 0.017 or more", f"n = {TAIL_N:,}", f"n = {SERIAL_N:,}"):
        assert stated in page, f"docs/areas/samplers.md no longer states {stated!r}"


def _bf16(x: float) -> float:
    return float(torch.tensor(x, dtype=torch.float64).to(torch.bfloat16).double())


def _rounded_as_stated(method: str, c) -> None:
    """``Precision.shifted`` is what the stated rounding gives."""
    (v,), (w,) = c.params[-1:], c.shifted[-1:]
    if method == "bernoulli_":
        assert float(np.float16(v)) == w and _bf16(v) == 1.0
    elif method == "geometric_":
        assert 1.0 - float(np.float32(1.0 - v)) == w
    elif method == "exponential_":
        assert float(np.float16(v)) == w
    else:
        assert _bf16(v) == w


@pytest.mark.parametrize("name", [n for n, s in SPECS.items() if s.precision])
def test_parameter_precision_cases_have_the_power(name):
    """Each parameter-precision case: its ``shifted`` parameters are what the stated rounding
    gives, and at its n the targeted test sees that shift with probability >= 0.99 (the
    mean of g(X) under the shifted law against the null's mean and sd)."""
    spec = SPECS[name]
    for c in spec.precision:
        _rounded_as_stated(spec.method, c)
        if name == "bernoulli":  # mean of x
            p, q = c.params[0], c.shifted[0]
            shift, sd = q - p, np.sqrt(p * (1 - p))
        elif name == "geometric":  # mean of p x: 1 under p, p / p' under p'
            p, q = c.params[0], c.shifted[0]
            shift, sd = p / q - 1.0, np.sqrt(1 - p)
        elif name == "exponential":  # mean of lambd x
            shift, sd = c.params[0] / c.shifted[0] - 1.0, 1.0
        else:  # the scale score against the law rounded to each 16-bit output format
            for fmt in c.dtypes:
                o, alt = oracle(spec.method, c.params), oracle(spec.method, c.shifted)
                m0, v0 = null_moments(o.method, o.params, fmt, "scale score")
                values, probs = alt.rounded_pmf(FORMATS[fmt])
                with np.errstate(all="ignore"):
                    g = o.tests["scale score"](values)
                keep = probs > 0
                m1 = float(np.dot(probs[keep], g[keep]) / probs[keep].sum())
                assert power_of(m1 - m0, np.sqrt(v0), c.n) >= 0.99, (name, fmt)
            continue
        assert power_of(shift, sd, c.n) >= 0.99, (name, c)
