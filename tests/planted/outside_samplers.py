"""Correct outside samplers (``--impl sampler.<name>=planted.outside_samplers:<attr>``): they
must pass every sampler test; a failure is a false alarm. Written with the blind faults
(``blind_sampler_faults``), without reading the checks.

- ``pcg64_<method>``: numpy ``PCG64`` keyed by two 62-bit integers drawn from ``generator``
  on every call (normal, log_normal, cauchy, exponential, uniform, geometric, bernoulli);
- ``philox_<method>``: numpy ``Philox`` keyed by ``generator.initial_seed()`` with a per-call
  counter kept on the side (normal, exponential, uniform, geometric, bernoulli);
- ``ziggurat_normal``: the ziggurat of ``normal_ziggurat_wedge_bug`` without the bug (the
  control that tells the bug from the method).

``OUTSIDE`` maps each attribute to its area.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from .blind_sampler_common import (
    Gen,
    _check,
    _CountedPhilox,
    _fill,
    _gen,
    _uniform_from,
    _ziggurat,
)


def ziggurat_normal(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
                    generator: Gen = None) -> torch.Tensor:
    """CORRECT: the ziggurat of ``normal_ziggurat_wedge_bug`` without the bug (the
    control)."""
    _check("normal_", t, mean, std)
    z = _ziggurat(t.numel(), _gen(t, generator), t.device, wedge_bug=False)
    return _fill(t, z * std + mean)


def _put(t: torch.Tensor, values: np.ndarray) -> torch.Tensor:
    return _fill(t, torch.from_numpy(np.ascontiguousarray(values)))


def _u_open(rng: np.random.Generator, n: int) -> np.ndarray:
    """Uniforms on the open interval (0, 1), 53 bits: (k + 1/2) / 2**53."""
    return (rng.integers(0, 2**53, n, dtype=np.int64).astype(np.float64) + 0.5) / 2**53


def _sampler(method: str, draw: Any, rng_of: Any) -> Any:
    def sampler(t: torch.Tensor, *params: Any, generator: Gen = None) -> torch.Tensor:
        _check(method + "_", t, *params)
        rng = rng_of(t, generator)
        if method == "uniform":
            return _uniform_from(t, float(params[0]), float(params[1]), rng)
        return _put(t, draw(rng, t.numel(), *params))
    return sampler


def _pcg64_rng(t: torch.Tensor, generator: Gen) -> np.random.Generator:
    gen = _gen(t, generator)
    key = torch.randint(0, 2**62, (2,), generator=gen, device=gen.device).tolist()
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(key)))


_PHILOX = _CountedPhilox(2**64 - 1, "hash")


def _bernoulli_draw(rng: np.random.Generator, n: int, p: Any = 0.5) -> np.ndarray:
    u = rng.random(n)
    if isinstance(p, torch.Tensor):
        return (u < p.detach().cpu().to(torch.float64).reshape(-1).numpy()).astype(np.float64)
    return (u < float(p)).astype(np.float64)


_DRAW = {
    "normal": lambda rng, n, mean=0.0, std=1.0: mean + std * rng.standard_normal(n),
    "log_normal": lambda rng, n, mean=1.0, std=2.0: np.exp(mean + std * rng.standard_normal(n)),
    "cauchy": lambda rng, n, median=0.0, sigma=1.0: median + sigma * rng.standard_cauchy(n),
    "exponential": lambda rng, n, lambd=1.0: -np.log(_u_open(rng, n)) / lambd,
    "uniform": None,
    "geometric": lambda rng, n, p: rng.geometric(float(p), n),
    "bernoulli": _bernoulli_draw,
}

pcg64_normal = _sampler("normal", _DRAW["normal"], _pcg64_rng)
pcg64_log_normal = _sampler("log_normal", _DRAW["log_normal"], _pcg64_rng)
pcg64_cauchy = _sampler("cauchy", _DRAW["cauchy"], _pcg64_rng)
pcg64_exponential = _sampler("exponential", _DRAW["exponential"], _pcg64_rng)
pcg64_uniform = _sampler("uniform", None, _pcg64_rng)
pcg64_geometric = _sampler("geometric", _DRAW["geometric"], _pcg64_rng)
pcg64_bernoulli = _sampler("bernoulli", _DRAW["bernoulli"], _pcg64_rng)

philox_normal = _sampler("normal", _DRAW["normal"], _PHILOX.rng)
philox_exponential = _sampler("exponential", _DRAW["exponential"], _PHILOX.rng)
philox_uniform = _sampler("uniform", None, _PHILOX.rng)
philox_geometric = _sampler("geometric", _DRAW["geometric"], _PHILOX.rng)
philox_bernoulli = _sampler("bernoulli", _DRAW["bernoulli"], _PHILOX.rng)

_HOW = {"pcg64": "PCG64 keyed by two integers drawn from generator",
        "philox": "Philox keyed by initial_seed() and a per-call counter"}
for _name in [n for n in globals() if n.startswith(("pcg64_", "philox_"))]:
    _kind, _method = _name.split("_", 1)
    globals()[_name].__name__ = _name
    globals()[_name].__doc__ = (f"CORRECT: {_method} from numpy's {_HOW[_kind]}, computed in "
                                "float64 and rounded to t's dtype.")


OUTSIDE = {  # attribute -> area; all correct
    **{f"pcg64_{m}": m for m in ("normal", "log_normal", "cauchy", "exponential", "uniform",
                                 "geometric", "bernoulli")},
    **{f"philox_{m}": m for m in ("normal", "exponential", "uniform", "geometric",
                                  "bernoulli")},
    "ziggurat_normal": "normal",
}

for _name in OUTSIDE:
    globals()[_name].conformance_name = f"blind.{_name}"
