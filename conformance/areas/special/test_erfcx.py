"""torch.special.erfcx (area ``special.erfcx``) over the whole range of each dtype, region by
region (conformance/areas/special/inputs.py), against the 40-digit oracle (oracles/erfcx.py):
forward by an ulp bound with the input's rounding allowed for, backward by a forward-error
bound (conformance/areas/special/erfcx_checks.py says why each bound is what it is)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conformance.areas.special.erfcx_checks import check_backward, check_forward, round_to
from conformance.areas.special.inputs import erfcx_inputs, representable
from conformance.harness.compare import exact
from conformance.harness.tensors import exact_numpy, from_numpy

pytestmark = pytest.mark.area("special.erfcx")
BASE_SEED = 1729
REGIONS = ("specials", "subnormals", "tiny", "branches", "overflow", "large", "random")

@pytest.fixture
def seed(run_seed: int) -> int:
    """BASE_SEED + the run's --seed."""
    return BASE_SEED + run_seed



def _run(impl, x: np.ndarray, dtype: torch.dtype, device: torch.device, record
         ) -> np.ndarray:
    t = from_numpy(x, dtype, device)
    out = impl(t)
    problems = []
    if not isinstance(out, torch.Tensor):
        problems.append(f"returned {type(out).__name__}")
    elif out.shape != t.shape or out.dtype != dtype or out.device != t.device:
        problems.append(f"{tuple(out.shape)} {out.dtype} on {out.device} for "
                        f"{tuple(t.shape)} {dtype} on {t.device}")
    record.require(exact("output structure", len(problems), 1, "; ".join(problems)))
    return exact_numpy(out)


@pytest.mark.parametrize("region", REGIONS)
def test_forward(impl, dtype, device, record, region, seed):
    """erfcx(x) for every x of the region (rounded to the dtype)."""
    x = erfcx_inputs(dtype, seed)[region]
    record.case(region=region, n=int(x.size), seed=seed)
    check_forward(record, x, _run(impl, x, dtype, device, record), dtype, region)


def _backward(impl, x: np.ndarray, dtype: torch.dtype, device: torch.device, record,
              seed: int) -> None:
    rng = np.random.default_rng([seed, 2])
    g = round_to(rng.uniform(0.5, 2.0, x.shape), dtype)
    record.case(n=int(x.size), seed=seed)
    t = from_numpy(x, dtype, device).requires_grad_(True)
    impl(t).backward(from_numpy(g, dtype, device))
    record.require(exact("the input has a gradient", 0 if t.grad is not None else 1, 1))
    check_backward(record, x, g, exact_numpy(t.grad), dtype, leaf=t)


LARGE = 16.0  # test_backward_large from here: where the formula 2x erfcx(x) - 2/sqrt(pi) cancels


def _split(dtype: torch.dtype, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(x < LARGE, LARGE <= x < max/2, x >= max/2): the large part with 60 more points
    log-uniform in [LARGE, 1e6] and 21 in [700, 800] (where the float32 gradient is ~1e-6)."""
    regions = erfcx_inputs(dtype, seed)
    x = np.concatenate([regions[r] for r in REGIONS if r != "specials"])
    half = float(torch.finfo(dtype).max) / 2
    rng = np.random.default_rng([seed, 3])
    extra = np.concatenate([np.exp(rng.uniform(np.log(LARGE), np.log(1e6), 60)),
                            np.linspace(700, 800, 21)])
    large = np.concatenate([x[(x >= LARGE) & (x < half)],
                            representable(extra[extra < half], dtype)])
    return x[x < LARGE], np.unique(large), x[x >= half]


@pytest.mark.needs("backward")
def test_backward(impl, dtype, device, record, seed):
    """d/dx erfcx through autograd, with random cotangents in [0.5, 2], for every input
    below LARGE (the negative ones included)."""
    _backward(impl, _split(dtype, seed)[0], dtype, device, record, seed)


@pytest.mark.needs("backward")
def test_backward_large(impl, dtype, device, record, seed):
    """The gradient for LARGE <= x < max/2, ~ -1/(sqrt(pi) x^2), where torch's formula
    2x erfcx(x) - 2/sqrt(pi) cancels: held to 2^-8 relative of the true derivative."""
    _backward(impl, _split(dtype, seed)[1], dtype, device, record, seed)


@pytest.mark.needs("backward")
def test_backward_huge(impl, dtype, device, record, seed):
    """The gradient for max/2 <= x <= max, where it is ~ -1/(sqrt(pi) x^2): a formula that
    forms 2 x first overflows there."""
    _backward(impl, _split(dtype, seed)[2], dtype, device, record, seed)
