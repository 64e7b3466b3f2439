"""Regression cases of the grid_sample area from real bugs.

- pytorch#24823 (open): NaN / inf grid entries crash the CPU kernel. The forward now maps
  them (border / reflection: to 0; test_grid_sample.py checks that), but the CPU backward
  still segfaults for bilinear with NaN under border and NaN / inf under reflection: its
  clip lets NaN through, and a NaN tap becomes an out-of-range scatter index. Run in the
  isolation runner's child: the backward must return, with finite gradients for the input.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from conformance.harness.compare import exact
from conformance.harness.registry import load_object

pytestmark = pytest.mark.area("grid_sample")
CASES = [("border", float("nan")), ("reflection", float("nan")), ("reflection", float("inf"))]


def backward_nonfinite(spec: str, device: str, dtype: str, padding: str, value: float
                       ) -> dict[str, Any]:
    """Child side: one non-finite grid entry, bilinear, backward."""
    fn = load_object(spec, "--impl grid_sample")
    dt = getattr(torch, dtype.removeprefix("torch."))
    gen = torch.Generator().manual_seed(24823)
    x = torch.rand(1, 1, 5, 5, generator=gen, dtype=dt).to(device).requires_grad_(True)
    grid = (torch.rand(1, 2, 2, 2, generator=gen, dtype=dt) * 2 - 1)
    grid[0, 0, 0, 0] = value
    grid = grid.to(device).requires_grad_(True)
    fn(x, grid, mode="bilinear", padding_mode=padding, align_corners=False).sum().backward()
    return {"input_grad_finite": bool(torch.isfinite(x.grad).all())}


@pytest.mark.needs("nonfinite_grid")
@pytest.mark.parametrize("padding,value", [pytest.param(p, v, id=f"{p}-{v}") for p, v in CASES])
def test_backward_nonfinite_grid(impl, device, record, isolated, padding, value):
    """pytorch#24823: the backward with a NaN / inf grid entry returns (no crash) and the
    input's gradient is finite (the forward reads a finite pixel there); float32 (a child
    process per case: one dtype keeps the cost down)."""
    record.case(padding=padding, value=str(value), dtype="float32")
    outcome = isolated(backward_nonfinite, impl.spec, str(device), "float32", padding, value,
                       timeout=60.0)
    if outcome.kind != "returned":
        record.require(exact("the backward returns (no crash, no hang)", 1, 1,
                             isolated.explain().replace("\n", " | ")))
    record.require(exact("the input's gradient is finite",
                         0 if outcome.value["input_grad_finite"] else 1, 1))
