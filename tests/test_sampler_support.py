"""The support check (conformance/areas/samplers/support.py): counted on the device, it agrees
with the host's count value by value; ±inf is possible only where the law's overflow mass in
the dtype is not negligible."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conformance.areas.samplers.support import (
    NEGLIGIBLE,
    count_impossible,
    impossible_mask,
    infinities,
)
from conformance.harness.tensors import dtype_name
from conformance.stats.gof import FORMATS
from oracles.samplers import oracle

pytestmark = pytest.mark.harness_only  # no torch sampler involved


@pytest.mark.parametrize("method,params,fmt,expected", [
    ("exponential_", (2.0,), "float32", (False, False)),
    ("exponential_", (1e-6,), "float16", (True, False)),
    ("cauchy_", (0.0, 1.0), "float32", (False, False)),   # mass beyond 3.4e38: 1e-39
    ("cauchy_", (0.0, 1000.0), "float16", (True, True)),
    ("normal_", (0.5, 2.0), "float64", (False, False)),
    ("normal_", (0.0, 1e38), "float32", (True, True)),
    ("log_normal_", (0.0, 30.0), "float32", (True, False)),
    ("log_normal_", (0.0, 30.0), "float64", (False, False)),
    ("geometric_", (1e-6,), "float16", (True, False)),
    ("geometric_", (0.3,), "float16", (False, False)),
])
def test_infinities_follow_the_overflow_mass(method, params, fmt, expected):
    assert infinities(method, params, fmt) == expected
    f = FORMATS[fmt]
    edge = f.max_finite if fmt == "float64" else f.overflow_threshold
    o = oracle(method, params)
    assert (o.dist.sf(edge) > NEGLIGIBLE) == expected[0] or o.discrete


def _samples(o, dtype: torch.dtype, rng: np.random.Generator) -> torch.Tensor:
    """Draws of the law with every kind of impossible value mixed in."""
    x = o.dist.rvs(size=4000, random_state=rng).astype(np.float64)
    lo, hi = o.dist.support()
    odd = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, lo - 1 if np.isfinite(lo) else -1e300,
           hi + 1 if np.isfinite(hi) else 1e300, 1e-45, -1e-45, 3e38, 6e4]
    x[rng.choice(x.size, len(odd), replace=False)] = odd
    if not dtype.is_floating_point:
        x = x[np.isfinite(x)]
        info = torch.iinfo(dtype)
        x = np.clip(np.round(x), info.min, info.max)
    return torch.from_numpy(x).to(dtype)


@pytest.mark.parametrize("method,params", [
    ("normal_", (0.5, 2.0)), ("exponential_", (2.0,)), ("cauchy_", (0.0, 1.0)),
    ("log_normal_", (1.0, 2.0)), ("uniform_", (-1.0, 3.0)), ("geometric_", (0.3,)),
    ("bernoulli_", (0.5,)), ("random_", (3.0, 103.0)),
])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32,
                                   torch.float64, torch.int64, torch.uint8])
def test_device_count_agrees_with_the_host(method, params, dtype):
    o = oracle(method, params)
    if not dtype.is_floating_point and not o.discrete:
        pytest.skip("a continuous law has no integer dtype")
    t = _samples(o, dtype, np.random.default_rng(7))
    fmt = FORMATS.get(dtype_name(dtype)) if dtype.is_floating_point else None
    host = impossible_mask(o, t.double().numpy(), fmt)
    count, first = count_impossible(o, t)
    assert count == int(host.sum()) and count > 0
    assert first.startswith("first: ")
    assert count_impossible(o, t[~torch.from_numpy(host)])[0] == 0
    view = t[: t.numel() // 2 * 2].view(-1, 2).t()  # a non-contiguous view
    assert count_impossible(o, view)[0] == int(impossible_mask(
        o, view.double().numpy().reshape(-1), fmt).sum())


def test_a_one_in_a_call_infinity_is_seen():
    """An exponential that writes one +inf into 4M float32 values (issue 40's first fault
    family) fails; torch's own draws do not."""
    o = oracle("exponential_", (2.0,))
    t = torch.empty(1 << 22).exponential_(2.0, generator=torch.Generator().manual_seed(3))
    assert count_impossible(o, t)[0] == 0
    t[123_457] = float("inf")
    assert count_impossible(o, t) == (1, "first: inf at flat index 123457")
