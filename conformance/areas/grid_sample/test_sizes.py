"""grid_sample at sizes where index and coordinate arithmetic runs out of bits: a 4099-wide
image (coordinates past 4096: a float16 coordinate is off by up to 2 pixels, a bfloat16 one
by 16), a grid of 66,427 points (past 2^16: a 16-bit point index, a tiled loop's missed
tail) and a 4097 x 4097 plane (past 2^24 pixels: a flat offset in float32, a 24-bit index),
the last in the isolation runner's child (torch's CPU float16 kernel reads garbage there)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from conformance.areas.grid_sample.cases import BASE_SEED, COMBOS
from conformance.areas.grid_sample.cases import data as _data
from conformance.areas.grid_sample.cases import run as _run
from conformance.areas.grid_sample.checks import check_forward
from conformance.harness.compare import exact
from conformance.harness.outcomes import unsupported
from conformance.harness.registry import load_object
from conformance.harness.tensors import exact_numpy, from_numpy

pytestmark = pytest.mark.area("grid_sample")
SIDE = 4097  # SIDE^2 = 2^24 + 8193
HUGE_MODES = {"ci": ("bilinear",), "dev": ("bilinear", "nearest", "bicubic"),
              "thorough": ("bilinear", "nearest", "bicubic")}


@pytest.fixture
def seed(run_seed: int) -> int:
    return BASE_SEED + run_seed


@pytest.mark.parametrize("mode,padding,align", COMBOS)
def test_wide_image(impl, dtype, device, record, mode, padding, align, seed):
    """A 5 x 4099 image, grid reaching 10 % outside."""
    inp, grid = _data(dtype, seed, 9, shape=(1, 2, 5, 4099), out=(4, 64), reach=1.1)
    record.case(mode=mode, padding=padding, align_corners=align, seed=seed, width=4099)
    got = _run(impl, inp, grid, mode, padding, align, dtype, device, record)
    check_forward(record, inp, grid, got, mode, padding, align, dtype, "wide image")


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_large_grid(impl, dtype, device, record, mode, seed):
    """181 x 367 = 66,427 output points, border padding, on a 9 x 11 image."""
    inp, grid = _data(dtype, seed, 10, shape=(1, 1, 9, 11), out=(181, 367), reach=1.2)
    record.case(mode=mode, padding="border", align_corners=False, seed=seed, points=181 * 367)
    got = _run(impl, inp, grid, mode, "border", False, dtype, device, record)
    check_forward(record, inp, grid, got, mode, "border", False, dtype, "large grid")


def huge_inputs(dtype: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The plane and a grid, 3 of its 4 rows on the plane's last two pixel rows."""
    dt = getattr(torch, dtype)
    rng = np.random.default_rng([seed, 11])
    inp = exact_numpy(from_numpy(rng.uniform(-1, 1, (1, 1, SIDE, SIDE)), dt, "cpu"))
    gx = rng.uniform(-1, 1, (1, 4, 64))
    gy = np.concatenate([rng.uniform(0.9990, 1.0, (1, 3, 64)), rng.uniform(-1, 1, (1, 1, 64))],
                        axis=1)
    return inp, exact_numpy(from_numpy(np.stack([gx, gy], -1), dt, "cpu"))


def huge_plane_case(spec: str, device: str, dtype: str, mode: str, seed: int) -> dict[str, Any]:
    """Child side: the implementation on the huge plane; its output as float64."""
    fn = load_object(spec, "--impl grid_sample")
    dt = getattr(torch, dtype)
    inp, grid = huge_inputs(dtype, seed)
    out = fn(from_numpy(inp, dt, device), from_numpy(grid, dt, device), mode=mode,
             padding_mode="zeros", align_corners=False)
    ok = isinstance(out, torch.Tensor) and tuple(out.shape) == (1, 1, 4, 64) and out.dtype == dt
    return {"structure": ok, "out": exact_numpy(out) if ok else None}


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_huge_plane(impl, dtype, device, record, isolated, conformance_state, mode, seed):
    """A 4097 x 4097 plane, sampled mostly on its last two rows (past 2^24 pixels), zeros
    padding; bilinear in the ci profile, every mode in dev and thorough."""
    if mode not in HUGE_MODES[conformance_state.profile]:
        unsupported(f"{mode} on a {SIDE} x {SIDE} plane runs in the dev and thorough profiles")
    name = str(dtype).removeprefix("torch.")
    record.case(mode=mode, padding="zeros", align_corners=False, seed=seed, plane=SIDE * SIDE)
    outcome = isolated(huge_plane_case, impl.spec, str(device), name, mode, seed, timeout=120.0)
    if outcome.kind != "returned":
        record.require(exact("the call returns (no crash, no hang)", 1, 1,
                             isolated.explain().replace("\n", " | ")))
    record.require(exact("output structure", 0 if outcome.value["structure"] else 1, 1))
    inp, grid = huge_inputs(name, seed)
    check_forward(record, inp, grid, outcome.value["out"], mode, "zeros", False, dtype,
                  "huge plane")
