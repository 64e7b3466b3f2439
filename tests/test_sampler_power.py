"""Power of the sampler checks, shown on planted samplers with exactly a 1 % error.

The sample sizes in ``conformance/samplers/data.py`` must be at least what the oracles say
a 1 % parameter error needs for power 0.99 at the per-check level; and over 20 fixed seeds
the targeted tests (a subset of the powered check's family, so a lower bound on its power)
flag every 1 %-error sampler, while the correct samplers raise no alarm.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conformance.samplers.checks import null_moments, to_numpy
from conformance.samplers.data import SPECS
from conformance.stats import ALPHA, FORMATS, mean_test, power_of, required_n
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


@pytest.mark.parametrize("name,which", PLANTED, ids=[f"{n}-{w}" for n, w in PLANTED])
def test_one_percent_errors_are_detected(name, which):
    spec = SPECS[name]
    sampler = getattr(sampler_faults, f"{name}_{which}_1pct")
    params = tuple(int(p) for p in spec.main) if name == "random" else spec.main
    zmax = []
    for seed in SEEDS:
        z = _targeted_z(spec.method, params, sampler, spec.n, 1000 + seed)
        zmax.append(max(abs(v) for v in z))
    crit = float(__import__("scipy.stats").stats.norm.isf(ALPHA / 2))
    detected = sum(v > crit for v in zmax)
    print(f"{name} {which}: detected {detected}/{len(zmax)}, |z| min {min(zmax):.2f} "
          f"mean {np.mean(zmax):.2f} sd {np.std(zmax):.2f} (critical {crit:.2f})")
    assert detected == len(zmax), (detected, zmax)


@pytest.mark.parametrize("name", list(SPECS))
def test_correct_samplers_raise_no_alarm(name):
    spec = SPECS[name]
    impl = getattr(__import__("impls.samplers").samplers, name)
    params = tuple(int(p) for p in spec.main) if name == "random" else spec.main
    crit = float(__import__("scipy.stats").stats.norm.isf(ALPHA / 2))
    worst = max(max(abs(v) for v in _targeted_z(spec.method, params, impl, spec.n // 4,
                                                 2000 + seed)) for seed in SEEDS)
    assert worst < crit, worst
