"""The grid_sample area's shared cases: every mode x padding x align_corners, random
images and grids rounded to the dtype, and one call of an implementation with its output
structure checked."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from conformance.harness.compare import exact
from conformance.harness.tensors import exact_numpy, from_numpy

BASE_SEED = 2011
COMBOS = [pytest.param(m, p, a, marks=[pytest.mark.needs(f"mode.{m}")],
                       id=f"{m}-{p}-{'ac' if a else 'noac'}")
          for m, p, a in itertools.product(("bilinear", "nearest", "bicubic"),
                                           ("zeros", "border", "reflection"), (False, True))]


def data(dtype: torch.dtype, seed: int, k: int, shape=(2, 3, 7, 9), out=(5, 6), reach=1.3):
    rng = np.random.default_rng([seed, k])
    n = shape[0]
    inp = rng.uniform(-1, 1, shape)
    grid = rng.uniform(-reach, reach, (n, *out, 2))
    return exact_numpy(from_numpy(inp, dtype, "cpu")), exact_numpy(from_numpy(grid, dtype, "cpu"))


def run(impl, inp, grid, mode, padding, align, dtype, device, record, channels_last=False):
    t = from_numpy(inp, dtype, device)
    if channels_last:
        t = t.to(memory_format=torch.channels_last)
    out = impl(t, from_numpy(grid, dtype, device), mode=mode, padding_mode=padding,
               align_corners=align)
    want = (inp.shape[0], inp.shape[1], *grid.shape[1:3])
    problems = [] if (isinstance(out, torch.Tensor) and tuple(out.shape) == want
                      and out.dtype == dtype) else [f"got {getattr(out, 'shape', out)}"]
    record.require(exact("output structure", len(problems), 1, "; ".join(problems)))
    return exact_numpy(out)


