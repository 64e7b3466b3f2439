"""Inputs for the special-function areas: the whole range of a dtype, by region."""

from __future__ import annotations

import math

import numpy as np
import torch

from conformance.harness.tensors import dtype_name, rounded


def representable(values: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """``values`` rounded to ``dtype`` (float64 again), unique, in a stable order."""
    with np.errstate(over="ignore"):
        out = rounded(np.asarray(values, dtype=np.float64), dtype_name(dtype))
    _, first = np.unique(out.view(np.int64), return_index=True)
    return out[np.sort(first)]


def erfcx_inputs(dtype: torch.dtype, seed: int, n_random: int = 1500) -> dict[str, np.ndarray]:
    """Named regions: specials, subnormals, tiny, the branch points of common
    implementations (Johnson's Faddeeva erfcx: x > 50 continued fraction, x > 5e7 1/(x
    sqrt(pi)), x < -6.1 2 exp(x^2), x < -26.7 overflow; also (26, 26.65) and (30, 50),
    where a misplaced branch or a table band shows in float64), the dtype's overflow
    threshold (2 exp(x^2) > max), large positive up to max, and random values log-uniform over the
    whole range and uniform over [-10, 10]."""
    fi = torch.finfo(dtype)
    rng = np.random.default_rng([seed, 11])
    tiny, big = float(fi.tiny), float(fi.max)
    sub = float(fi.smallest_normal) * float(fi.eps)  # the smallest subnormal
    x_ov = -math.sqrt(math.log(big / 2))
    near = lambda c, w: c + w * np.linspace(-1, 1, 41)  # noqa: E731
    regions = {
        "specials": np.array([0.0, -0.0, np.inf, -np.inf, np.nan]),
        "subnormals": np.concatenate([[sub, -sub, 3 * sub, tiny - sub, -(tiny - sub)],
                                      rng.uniform(-tiny, tiny, 20)]),
        "tiny": np.array([tiny, -tiny, 1e-30, -1e-30, 1e-10, -1e-10, 1e-4, -1e-4]),
        "branches": np.concatenate([near(50.0, 0.5), near(5e7, 5e4), near(-6.1, 0.05),
                                    near(-26.7, 0.05), near(0.0, 1e-3), near(12.0, 0.1),
                                    near(26.3, 0.35), rng.uniform(30, 50, 41)]),
        "overflow": near(x_ov, 0.02),
        "large": np.concatenate([[big, -big, big / 2, math.sqrt(big)],
                                 np.exp(rng.uniform(math.log(1e3), math.log(big), 50))]),
        "random": np.concatenate([
            rng.choice([-1.0, 1.0], n_random) * np.exp(rng.uniform(math.log(tiny),
                                                                   math.log(big), n_random)),
            rng.uniform(-10, 10, n_random)]),
    }
    return {k: representable(v, dtype) for k, v in regions.items()}
