"""Wrong samplers (``--impl sampler.<name>=planted.sampler_faults:<attr>``).

The issue's faults (each a plausible backend bug) and samplers with exactly a 1 % error in
one parameter (location shifted by 1 % of the scale, scale x 1.01, rate or p x 1.01),
which the powered goodness-of-fit check must detect with probability >= 0.99.
"""

from __future__ import annotations

from typing import Any

import torch

from oracles.samplers import perturbed

Gen = torch.Generator | None


def geometric_from_zero(t: torch.Tensor, p: float, *, generator: Gen = None) -> torch.Tensor:
    """Counts failures before the first success (support 0, 1, ...), not trials."""
    return t.geometric_(p, generator=generator).sub_(1)


def cauchy_sigma_1pct(t: torch.Tensor, median: float = 0.0, sigma: float = 1.0, *,
                      generator: Gen = None) -> torch.Tensor:
    """Scale 1 % too large."""
    return t.cauchy_(median, sigma * 1.01, generator=generator)


def log_normal_std_squared(t: torch.Tensor, mean: float = 1.0, std: float = 2.0, *,
                           generator: Gen = None) -> torch.Tensor:
    """Passes the variance where the standard deviation is due."""
    return t.log_normal_(mean, std * std, generator=generator)


def exponential_scale_for_rate(t: torch.Tensor, lambd: float = 1.0, *,
                               generator: Gen = None) -> torch.Tensor:
    """Uses lambd as the scale (mean) instead of the rate."""
    return t.exponential_(1.0 / lambd, generator=generator)


BLOCK = 16384


def normal_repeats_block(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
                         generator: Gen = None) -> torch.Tensor:
    """A counter-based stream whose offset did not advance after its first block: the
    second block of 16384 values repeats the first (every value has the right law)."""
    flat = torch.empty(t.numel(), dtype=t.dtype, device=t.device)
    flat.normal_(mean, std, generator=generator)
    if flat.numel() >= 2 * BLOCK:
        flat[BLOCK:2 * BLOCK] = flat[:BLOCK]
    t.copy_(flat.view(t.shape))
    return t


def _one_pct(method: str, which: str) -> Any:
    def sampler(t: torch.Tensor, *params: Any, generator: Gen = None) -> torch.Tensor:
        if method == "bernoulli_" and isinstance(params[0], torch.Tensor):
            return t.bernoulli_((params[0] * 1.01).clamp(max=1.0), generator=generator)
        new = perturbed(method, tuple(float(p) for p in params), which)
        if method in ("geometric_", "bernoulli_") and new[0] >= 1.0:
            new = params  # p near 1: a 1 % larger p is not a valid parameter
        if method == "random_":
            new = tuple(round(p) for p in new)
        return getattr(t, method)(*new, generator=generator)

    sampler.__doc__ = f"{method} with a 1 % {which} error"
    sampler.__name__ = f"{method.rstrip('_')}_{which}_1pct"
    return sampler


ONE_PERCENT = {
    "normal": ["location", "scale"],
    "log_normal": ["location", "scale"],
    "cauchy": ["location", "scale"],
    "exponential": ["rate"],
    "uniform": ["location", "scale"],
    "geometric": ["p"],
    "bernoulli": ["p"],
    "random": ["location", "scale"],
}

normal_location_1pct = _one_pct("normal_", "location")
normal_scale_1pct = _one_pct("normal_", "scale")
log_normal_location_1pct = _one_pct("log_normal_", "location")
log_normal_scale_1pct = _one_pct("log_normal_", "scale")
cauchy_location_1pct = _one_pct("cauchy_", "location")
cauchy_scale_1pct = _one_pct("cauchy_", "scale")
exponential_rate_1pct = _one_pct("exponential_", "rate")
uniform_location_1pct = _one_pct("uniform_", "location")
uniform_scale_1pct = _one_pct("uniform_", "scale")
geometric_p_1pct = _one_pct("geometric_", "p")
bernoulli_p_1pct = _one_pct("bernoulli_", "p")
random_location_1pct = _one_pct("random_", "location")
random_scale_1pct = _one_pct("random_", "scale")


# ---- faults of the tails, of dependence, of streams and of remainders ----------------------

def _flat_fill(t: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    t.copy_(values.view(t.shape).to(t.dtype))
    return t


def _uniform(n: int, generator: Gen, device: torch.device) -> torch.Tensor:
    return torch.rand(n, dtype=torch.float64, generator=generator, device=device)


def _truncated_normal(t: torch.Tensor, mean: float, std: float, limit: float,
                      generator: Gen) -> torch.Tensor:
    """Standard normals redrawn while beyond ±limit, scaled into ``t``."""
    z = torch.empty(t.numel(), dtype=torch.float64, device=t.device).normal_(
        generator=generator)
    while bool((bad := z.abs() > limit).any()):
        z[bad] = torch.empty(int(bad.sum()), dtype=torch.float64, device=t.device).normal_(
            generator=generator)
    return _flat_fill(t, z * std + mean)


def _box_muller(t: torch.Tensor, mean: float, std: float, bits: int,
                generator: Gen) -> torch.Tensor:
    """Box-Muller whose radius uniform has ``bits`` bits: |z| <= sqrt(2 ln 2^bits)."""
    n = t.numel()
    u1 = (torch.floor(_uniform(n, generator, t.device) * 2**bits) + 1) / 2**bits  # (0, 1]
    z = torch.sqrt(-2 * torch.log(u1)) * torch.cos(2 * torch.pi * _uniform(n, generator,
                                                                             t.device))
    return _flat_fill(t, z * std + mean)


def normal_truncated_3p5(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
                         generator: Gen = None) -> torch.Tensor:
    """A normal truncated at ±3.5 sigma (rejection of the tails): right in the body."""
    return _truncated_normal(t, mean, std, 3.5, generator)


def normal_truncated_4sigma(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
                            generator: Gen = None) -> torch.Tensor:
    """A normal truncated at ±4 sigma (a bfloat16 kernel that clamps its radius)."""
    return _truncated_normal(t, mean, std, 4.0, generator)


def normal_box_muller_11bit(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
                            generator: Gen = None) -> torch.Tensor:
    """Box-Muller whose radius uniform has 11 bits: |z| never beyond 3.90."""
    return _box_muller(t, mean, std, 11, generator)


def normal_box_muller_12bit(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
                            generator: Gen = None) -> torch.Tensor:
    """Box-Muller whose radius uniform has 12 bits: |z| never beyond sqrt(2 ln 4096)."""
    return _box_muller(t, mean, std, 12, generator)


def normal_shared_radius(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
                         generator: Gen = None) -> torch.Tensor:
    """Consecutive outputs share a Box-Muller radius with independent angles: exact
    normal marginals, but corr(|z_2i|, |z_2i+1|) ~ 0.5."""
    n = t.numel()
    half = (n + 1) // 2
    r = torch.sqrt(-2 * torch.log1p(-_uniform(half, generator, t.device)))
    r = r.repeat_interleave(2)[:n]
    z = r * torch.cos(2 * torch.pi * _uniform(n, generator, t.device))
    return _flat_fill(t, z * std + mean)


def exponential_16bit_uniform(t: torch.Tensor, lambd: float = 1.0, *,
                              generator: Gen = None) -> torch.Tensor:
    """-log(u) / lambd with u on a 16-bit grid: nothing beyond ln(65536) / lambd, the
    law's 1.5e-5 quantile (the far tail is missing)."""
    u = (torch.floor(_uniform(t.numel(), generator, t.device) * 65536) + 1) / 65536
    return _flat_fill(t, -torch.log(u) / lambd)


def _exponential_from_bits(t: torch.Tensor, lambd: float, bits: int,
                           generator: Gen) -> torch.Tensor:
    k = torch.randint(0, 2**bits, (t.numel(),), generator=generator, device=t.device,
                      dtype=torch.int64)
    u = (k.to(torch.float64) + 1) / 2**bits  # (0, 1]
    return _flat_fill(t, -torch.log(u) / lambd)


def exponential_32bit_uniform(t: torch.Tensor, lambd: float = 1.0, *,
                              generator: Gen = None) -> torch.Tensor:
    """-log(u) / lambd with u from 32 random bits (issue 64's blind round), meant for float64:
    the law is right to 2^-32 and its values are not float32 ones, but it takes only 2^32
    distinct values, so draws repeat (about 75 in 800,013; float64 resolution: none)."""
    return _exponential_from_bits(t, lambd, 32, generator)


def exponential_20bit_uniform(t: torch.Tensor, lambd: float = 1.0, *,
                              generator: Gen = None) -> torch.Tensor:
    """The same from 20 random bits, meant for float32: nothing beyond ln(2^20) / lambd (the
    law's 8.5e-7 quantile, past what the tail checks reach), values that are not bfloat16 or
    float16 ones, and about 240,000 repeats in 800,013 draws (torch's float32: under 19,000)."""
    return _exponential_from_bits(t, lambd, 20, generator)


def normal_overlapping_calls(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
                             generator: Gen = None) -> torch.Tensor:
    """Advances the generator by half the values it used: the next call repeats the
    second half of this one (a counter-based offset advanced too little)."""
    gen = generator if generator is not None else torch.default_generator
    flat = torch.empty(t.numel(), dtype=t.dtype, device=t.device)
    half = t.numel() // 2
    flat[:half].normal_(mean, std, generator=gen)
    state = gen.get_state()
    flat[half:].normal_(mean, std, generator=gen)
    gen.set_state(state)
    return _flat_fill(t, flat)


def normal_remainder_unscaled(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
                              generator: Gen = None) -> torch.Tensor:
    """The last numel % 16 elements (the scalar epilogue of a 16-wide loop) come out
    standard normal: the epilogue forgets mean and std."""
    flat = torch.empty(t.numel(), dtype=t.dtype, device=t.device)
    flat.normal_(mean, std, generator=generator)
    rem = t.numel() % 16
    if rem:
        flat[t.numel() - rem:].normal_(0.0, 1.0, generator=generator)
    return _flat_fill(t, flat)

for _name, _fn in list(globals().items()):
    if callable(_fn) and getattr(_fn, "__module__", None) == __name__ and not _name.startswith(
            "_") and _name != "perturbed":
        _fn.conformance_name = f"planted.{_name}"

# The five sampler faults, with tests/test_sampler_faults.py's selection (the
# 1 %-error samplers are left to that test: each is caught with power 0.99, so a fixed seed
# may miss one, which the test judges by the binomial tail rather than one by one)
SELFTEST = [  # torch-conformance selftest (conformance/cli/selftest.py)
    {"area": f"sampler.{area}", "impl": name, "path": "samplers", "expect": "killed",
     "select": f"planted.{name} and (goodness_of_fit or independence)"}
    for area, name in (("geometric", "geometric_from_zero"), ("cauchy", "cauchy_sigma_1pct"),
                       ("log_normal", "log_normal_std_squared"),
                       ("exponential", "exponential_scale_for_rate"),
                       ("normal", "normal_repeats_block"))
]
