"""Sampler implementations: the in-place torch.Tensor sampling methods.

Contract (one area per method, ``sampler.<name>``): a callable with the Tensor method's
semantics, ``fn(t, *params, generator=None) -> t``: it fills ``t`` in place (any layout)
from the distribution, draws only from ``generator`` when one is given, and returns ``t``.
Parameters are passed positionally, in the method's order:

| area | call |
|---|---|
| sampler.normal | ``fn(t, mean, std)`` |
| sampler.log_normal | ``fn(t, mean, std)`` (of the underlying normal) |
| sampler.cauchy | ``fn(t, median, sigma)`` |
| sampler.exponential | ``fn(t, lambd)`` (rate) |
| sampler.uniform | ``fn(t, from, to)`` |
| sampler.geometric | ``fn(t, p)`` |
| sampler.bernoulli | ``fn(t, p)`` (a float, or a tensor of probabilities) |
| sampler.random | ``fn(t, from, to)``, ``fn(t, to)`` or ``fn(t)`` |
"""

from __future__ import annotations

from typing import Any

import torch


def normal(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
           generator: torch.Generator | None = None) -> torch.Tensor:
    return t.normal_(mean, std, generator=generator)


def log_normal(t: torch.Tensor, mean: float = 1.0, std: float = 2.0, *,
               generator: torch.Generator | None = None) -> torch.Tensor:
    return t.log_normal_(mean, std, generator=generator)


def cauchy(t: torch.Tensor, median: float = 0.0, sigma: float = 1.0, *,
           generator: torch.Generator | None = None) -> torch.Tensor:
    return t.cauchy_(median, sigma, generator=generator)


def exponential(t: torch.Tensor, lambd: float = 1.0, *,
                generator: torch.Generator | None = None) -> torch.Tensor:
    return t.exponential_(lambd, generator=generator)


def uniform(t: torch.Tensor, low: float = 0.0, high: float = 1.0, *,
            generator: torch.Generator | None = None) -> torch.Tensor:
    return t.uniform_(low, high, generator=generator)


def geometric(t: torch.Tensor, p: float, *,
              generator: torch.Generator | None = None) -> torch.Tensor:
    return t.geometric_(p, generator=generator)


def bernoulli(t: torch.Tensor, p: Any = 0.5, *,
              generator: torch.Generator | None = None) -> torch.Tensor:
    return t.bernoulli_(p, generator=generator)


def random(t: torch.Tensor, *bounds: int, generator: torch.Generator | None = None) -> torch.Tensor:
    return t.random_(*bounds, generator=generator)


for _fn in (normal, log_normal, cauchy, exponential, uniform, geometric, bernoulli):
    _fn.conformance_name = f"torch.{_fn.__name__}_"
random.conformance_name = "torch.random_"
