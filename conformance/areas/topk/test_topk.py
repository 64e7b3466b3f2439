"""TopK conformance: values exact, any valid index set on ties, NaN largest, ±0 identity.

Every test runs once per registered topk implementation (the id shows its name) and per
dtype of the area unless it says otherwise; the device is the run's ``--device``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from conformance.areas.topk.checks import check_topk
from conformance.areas.topk.data import (
    KINDS,
    MULTIBLOCK_SWEEP,
    ROCM_SWEEP,
    make_input,
    nan_variants,
)
from conformance.harness.strategies import seeds, shapes
from conformance.harness.tensors import LAYOUTS, relayout

pytestmark = pytest.mark.area("topk")
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


@given(data=st.data())
def test_random(impl, dtype, device, record, data):
    """Random shapes (zero-size dims included), every dim, k, order and layout."""
    shape = data.draw(shapes(1, 3, max_numel=4096), label="shape")
    ndim = len(shape)
    dim = data.draw(st.integers(-ndim, ndim - 1), label="dim")
    n = shape[dim]
    k = data.draw(st.sampled_from(sorted({0, min(1, n), max(n - 1, 0), n})) | st.integers(0, n),
                  label="k")
    largest = data.draw(st.booleans(), label="largest")
    sorted_ = data.draw(st.booleans(), label="sorted")
    kind = data.draw(st.sampled_from(KINDS), label="values")
    layout = data.draw(st.sampled_from(LAYOUTS), label="layout")
    rng = np.random.default_rng(data.draw(seeds(), label="seed"))
    x = relayout(make_input(rng, shape, dtype, kind, device), layout)
    check_topk(record, impl, x, k, dim, largest, sorted_)


def test_k_extremes_every_dim(impl, dtype, device, record, rng):
    """k = 0, 1, n-1, n along every dim, negative dims included, both orders."""
    x = make_input(rng, (3, 17, 5), dtype, "ties", device)
    for dim in range(-3, 3):
        n = x.shape[dim]
        for k in sorted({0, 1, n - 1, n}):
            for largest in (True, False):
                for sorted_ in (True, False):
                    check_topk(record, impl, x, k, dim, largest, sorted_)


SPECIAL_ROWS = {
    "nan_first_last": [float("nan"), 1.0, -1.0, float("nan")],
    "signed_zeros": [-0.0, 0.0, -0.0, 0.0, -0.0],
    "infinities": [float("inf"), -float("inf"), float("nan"), 0.0, -0.0, 1.0],
    "all_nan": [float("nan")] * 5,
    "all_equal": [2.5] * 9,
    "nan_and_inf_ties": [float("inf"), float("nan"), float("inf"), -float("inf"),
                         float("nan"), -float("inf")],
}


# Rows with NaNs given by bit pattern: ("nan", i) is nan_variants(dtype)[i] (0-2: sign bit
# set, quiet / signalling / all-ones payload; 3-4: positive with payloads). torch's rule,
# the oracle's: every NaN, whatever its sign and payload, is larger than every number.
NAN_ROWS = {
    "signed_nans": [("nan", 0), -float("inf"), ("nan", 1), -1.0, 0.0, ("nan", 3),
                    float("inf"), ("nan", 2), ("nan", 4)],
    "negative_nans_and_infs": [-float("inf"), ("nan", 0), float("inf"), ("nan", 2),
                               -float("inf"), ("nan", 1)],
}


def _special_row(row: str, dtype: torch.dtype) -> torch.Tensor:
    if row in SPECIAL_ROWS:
        return torch.tensor(SPECIAL_ROWS[row], dtype=torch.float64).to(dtype)
    spec = NAN_ROWS[row]
    x = torch.tensor([float("nan") if isinstance(v, tuple) else v for v in spec],
                     dtype=torch.float64).to(dtype)
    variants = nan_variants(dtype)
    for i, v in enumerate(spec):
        if isinstance(v, tuple):
            x[i] = variants[v[1]]
    return x


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("row", [*SPECIAL_ROWS, *NAN_ROWS], ids=str)
def test_special_values(impl, dtype, device, record, row):
    """NaN is the largest value (sign bit and payload notwithstanding); -0.0 ties 0.0 but
    keeps its sign bit; inf ordering."""
    base = _special_row(row, dtype)
    x = torch.stack([base, base.flip(0)]).to(device)
    n = x.shape[1]
    for k in range(n + 1):
        for largest in (True, False):
            for sorted_ in (True, False):
                check_topk(record, impl, x, k, 1, largest, sorted_)


@pytest.mark.parametrize("shape,dim,k", [
    ((0,), 0, 0), ((0, 4), 0, 0), ((0, 4), 1, 2), ((3, 0), 1, 0), ((2, 0, 3), -1, 3),
    ((2, 0, 3), 1, 0), ((), 0, 1), ((), -1, 0), ((1,), 0, 1),
], ids=str)
def test_zero_size_and_scalars(impl, dtype, device, record, rng, shape, dim, k):
    """Empty tensors and 0-d scalars."""
    x = make_input(rng, shape, dtype, "random", device)
    for largest in (True, False):
        check_topk(record, impl, x, k, dim, largest, True)


def test_invalid_k_raises(impl, dtype, device, record, rng):
    """k > n and k < 0 must raise, not return garbage."""
    from conformance.harness.compare import exact

    x = make_input(rng, (4, 6), dtype, "random", device)
    silent = []
    for k in (7, -1):
        record.case(shape=(4, 6), dim=1, k=k)
        try:
            out = impl(x, k, dim=1, largest=True, sorted=True)
            if x.device.type != "cpu":
                torch.accelerator.synchronize()  # surface asynchronous errors
        except (RuntimeError, IndexError, ValueError):
            continue
        silent.append(f"k={k} returned {type(out).__name__} instead of raising")
    record.require(exact("k out of range raises", len(silent), 2, "; ".join(silent)))


@pytest.mark.parametrize("n", ROCM_SWEEP, ids=lambda n: f"n{n}")
def test_rocm_smem_boundaries(impl, dtype, device, record, rng, n):
    """Slice lengths around the ROCm radix-select shared-memory cache capacities
    (3 KB: 384 float64/int64, 768 float32/int32, 1536 float16/bfloat16, 3072 int8/uint8)."""
    rows = [make_input(rng, (1, n), dtype, kind, device) for kind in ("random", "ties")]
    if dtype.is_floating_point:
        rows.append(make_input(rng, (1, n), dtype, "special", device))
    x = torch.cat(rows)
    for k in sorted({1, 2, n // 2, n - 1, n}):
        for largest in (True, False):
            check_topk(record, impl, x, k, -1, largest, True)
    check_topk(record, impl, x.t(), n // 3, 0, True, False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int64],
                         ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("slices,n", MULTIBLOCK_SWEEP, ids=lambda v: str(v))
def test_multiblock_boundaries(impl, dtype, device, record, rng, slices, n):
    """Both sides of CUDA's single-block / multi-block radix-select switch, long slices."""
    x = make_input(rng, (slices, n), dtype, "ties" if n % 2 else "random", device)
    for k in (1, 100, n // 2):
        check_topk(record, impl, x, k, 1, True, True)
    check_topk(record, impl, x, 37, 1, False, False)
