"""2-D grid_sample (area ``grid_sample``): every mode x padding x align_corners, grids that
reach outside [-1, 1], exact pixel positions, channels-last input and non-finite grids,
against the float64 oracle (oracles/grid_sample.py) under the forward-error bound of
checks.py; the CPU backward's crash on NaN grids in a child process."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conformance.areas.grid_sample.cases import BASE_SEED, COMBOS
from conformance.areas.grid_sample.cases import data as _data
from conformance.areas.grid_sample.cases import run as _run
from conformance.areas.grid_sample.checks import check_backward, check_forward
from conformance.harness.compare import exact
from conformance.harness.tensors import exact_numpy, from_numpy

pytestmark = pytest.mark.area("grid_sample")


@pytest.fixture
def seed(run_seed: int) -> int:
    """BASE_SEED + the run's --seed."""
    return BASE_SEED + run_seed


@pytest.mark.parametrize("mode,padding,align", COMBOS)
def test_random(impl, dtype, device, record, mode, padding, align, seed):
    """Random images and grids uniform in [-1.3, 1.3] (a margin outside the image)."""
    inp, grid = _data(dtype, seed, 1)
    record.case(mode=mode, padding=padding, align_corners=align, seed=seed)
    got = _run(impl, inp, grid, mode, padding, align, dtype, device, record)
    check_forward(record, inp, grid, got, mode, padding, align, dtype, "random grid")


@pytest.mark.parametrize("mode,padding,align", COMBOS)
def test_far_grid(impl, dtype, device, record, mode, padding, align, seed):
    """Grids reaching 3.5 image sizes outside: reflection reflects again and again."""
    inp, grid = _data(dtype, seed, 6, reach=3.5)
    record.case(mode=mode, padding=padding, align_corners=align, seed=seed, reach=3.5)
    got = _run(impl, inp, grid, mode, padding, align, dtype, device, record)
    check_forward(record, inp, grid, got, mode, padding, align, dtype, "far grid")


@pytest.mark.parametrize("mode,padding,align", COMBOS)
def test_pixel_positions(impl, dtype, device, record, mode, padding, align, seed):
    """Grids at exact pixel centres and exact half-pixel positions (ties for nearest: half
    to even) over the image and one pixel beyond."""
    inp, _ = _data(dtype, seed, 2)
    n, _, h, w = inp.shape
    den_x, den_y = (w - 1, h - 1) if align else (w, h)
    off = 0.0 if align else 0.5
    xs = (2 * (np.arange(-2, 2 * w + 2) / 2 + off) / den_x) - 1
    ys = (2 * (np.arange(-2, 2 * h + 2) / 2 + off) / den_y) - 1
    gx, gy = np.meshgrid(xs, ys)
    grid = np.broadcast_to(np.stack([gx, gy], -1), (n, *gx.shape, 2)).copy()
    grid = exact_numpy(from_numpy(grid, dtype, "cpu"))
    record.case(mode=mode, padding=padding, align_corners=align)
    got = _run(impl, inp, grid, mode, padding, align, dtype, device, record)
    check_forward(record, inp, grid, got, mode, padding, align, dtype, "pixel positions")


@pytest.mark.needs("channels_last")
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_channels_last(impl, dtype, device, record, mode, seed):
    """An NHWC-strided input (pytorch#174339: the MPSGraph NHWC path was wrong)."""
    inp, grid = _data(dtype, seed, 3)
    record.case(mode=mode)
    got = _run(impl, inp, grid, mode, "zeros", False, dtype, device, record, channels_last=True)
    check_forward(record, inp, grid, got, mode, "zeros", False, dtype, "channels last")


@pytest.mark.needs("nonfinite_grid")
@pytest.mark.parametrize("mode,padding,align", COMBOS)
def test_nonfinite_grid(impl, dtype, device, record, mode, padding, align, seed):
    """NaN, +inf, -inf and huge grid entries: torch's documented-by-code behaviour (the
    oracle's docstring): NaN where the oracle has NaN, the bound elsewhere."""
    if dtype in (torch.float16, torch.bfloat16):
        from conformance.harness.outcomes import unsupported

        unsupported("the non-finite cases run in float32 and float64")
    inp, grid = _data(dtype, seed, 4)
    flat = grid.reshape(-1)
    rng = np.random.default_rng([seed, 5])
    picks = rng.choice(flat.size, 24, replace=False)
    flat[picks] = np.tile([np.nan, np.inf, -np.inf, 1e30], 6)
    record.case(mode=mode, padding=padding, align_corners=align)
    got = _run(impl, inp, grid, mode, padding, align, dtype, device, record)
    check_forward(record, inp, grid, got, mode, padding, align, dtype, "non-finite grid")


@pytest.mark.needs("backward")
@pytest.mark.parametrize("mode,padding,align", COMBOS)
def test_backward(impl, dtype, device, record, mode, padding, align, seed):
    """Input and grid gradients through autograd, random cotangents in [-1, 1]."""
    inp, grid = _data(dtype, seed, 7)
    rng = np.random.default_rng([seed, 8])
    g = exact_numpy(from_numpy(rng.uniform(-1, 1, (*inp.shape[:2], *grid.shape[1:3])),
                               dtype, "cpu"))
    record.case(mode=mode, padding=padding, align_corners=align, seed=seed)
    x = from_numpy(inp, dtype, device).requires_grad_(True)
    gr = from_numpy(grid, dtype, device).requires_grad_(True)
    out = impl(x, gr, mode=mode, padding_mode=padding, align_corners=align)
    out.backward(from_numpy(g, dtype, device))
    missing = [n for n, t in (("input", x), ("grid", gr)) if t.grad is None]
    record.require(exact("both inputs have gradients", len(missing), 2, ", ".join(missing)))
    check_backward(record, inp, grid, g, exact_numpy(x.grad), exact_numpy(gr.grad), mode,
                   padding, align, dtype, leaves=(x, gr))

