"""Blind, deliberately faulty in-place samplers for mutation testing.

Each fault is a plausible bit-to-float conversion bug of the kind a vendor
backend might ship. Means and variances stay right to ~1e-3; the faults live in
the low bits, the tails, the lattice, the period or correlations.
All randomness comes from torch ops with ``generator=generator``.
"""
import math

import torch

__all__ = [
    "cauchy_counter_wraps_at_2_16",
    "correct_exponential",
    "exponential_mantissa_fill_lost_bit",
    "log_normal_lut_quantised_inverse_cdf",
    "normal_float32_intermediate_box_muller",
    "uniform_float32_rounds_up_to_bound",
    "uniform_float64_two_words_shared",
]


def _words(n, bits, t, generator):
    return torch.randint(0, 2 ** bits, (n,), dtype=torch.int64,
                         device=t.device, generator=generator)


def _store(t, values):
    t.copy_(values.view(t.shape).to(t.dtype))
    return t


def uniform_float64_two_words_shared(t, from_=0.0, to=1.0, *, generator=None):
    """FAULTY. Builds each 53-bit float64 uniform from 32-bit word i (high bits)
    and the top 21 bits of word i+1 (low bits), so consecutive outputs share a
    32-bit word: output i's low bits equal output i+1's high bits.
    Meant to break float64 (float32 rounds the shared low bits away)."""
    n = t.numel()
    w = _words(n + 1, 32, t, generator)
    k = w[:-1] * (2 ** 21) + (w[1:] >> 11)
    u = k.to(torch.float64) * 2.0 ** -53
    return _store(t, from_ + (to - from_) * u)


def normal_float32_intermediate_box_muller(t, mean=0.0, std=1.0, *, generator=None):
    """FAULTY. Box-Muller evaluated entirely in float32 (24-bit uniforms,
    float32 log/sqrt/cos) even for float64 tensors, then widened. Tails are
    clipped near |z| ~ 5.77 and values sit on a float32 lattice.
    Meant to break float64."""
    n = t.numel()
    m = (n + 1) // 2
    u1 = (_words(m, 24, t, generator).to(torch.float32) + 1.0) * 2.0 ** -24  # (0,1]
    u2 = _words(m, 24, t, generator).to(torch.float32) * 2.0 ** -24
    r = torch.sqrt(-2.0 * torch.log(u1))
    th = (2.0 * math.pi) * u2
    z = torch.cat([r * torch.cos(th), r * torch.sin(th)])[:n]
    z = z.to(torch.float32)
    return _store(t, mean + std * z.to(torch.float64))


def exponential_mantissa_fill_lost_bit(t, lambd=1.0, *, generator=None):
    """FAULTY. Uniform made by mantissa fill (random bits into a [1,2) float,
    minus 1) where the shift drops the lowest mantissa bit: only 22 random bits,
    last bit always 0. -log1p(-u)/lambd then has a 2^-22 lattice and its tail
    stops at 22*ln2 ~ 15.2. Meant to break float32 (and float64)."""
    n = t.numel()
    bits = _words(n, 22, t, generator) << 1          # lost bit: LSB always 0
    u = bits.to(torch.float64) * 2.0 ** -23          # in [0, 1)
    x = -torch.log1p(-u) / lambd
    return _store(t, x)


_LUT_BITS = 16
_LUT_CACHE = {}


def _lut(device):
    if device not in _LUT_CACHE:
        k = torch.arange(2 ** _LUT_BITS, dtype=torch.float64, device=device)
        _LUT_CACHE[device] = torch.special.ndtri((k + 0.5) * 2.0 ** -_LUT_BITS)
    return _LUT_CACHE[device]


def log_normal_lut_quantised_inverse_cdf(t, mean=1.0, std=2.0, *, generator=None):
    """FAULTY. The underlying normal is a 65536-entry inverse-CDF lookup table
    indexed by a 16-bit random word, so only 65536 distinct values exist and
    |z| <= ~4.17. exp(mean + std*z) then has quantised values and a truncated
    upper tail. Meant to break float32 (and float64)."""
    n = t.numel()
    idx = _words(n, _LUT_BITS, t, generator)
    z = _lut(t.device)[idx]
    return _store(t, torch.exp(mean + std * z))


def cauchy_counter_wraps_at_2_16(t, median=0.0, sigma=1.0, *, generator=None):
    """FAULTY. The per-element counter of the stream is 16 bits wide and wraps:
    element i uses the uniform drawn for i mod 65536, so tensors larger than
    65536 repeat with period 65536. Values are median + sigma*tan(pi*(u-1/2))
    with correct 24/53-bit uniforms. Meant to break float32 (and float64)
    on large tensors."""
    n = t.numel()
    bits = 24 if t.dtype != torch.float64 else 53
    period = min(n, 2 ** 16)
    k = _words(period, bits, t, generator)
    u = (k.to(torch.float64) + 0.5) * 2.0 ** -bits
    idx = torch.arange(n, device=t.device) % period
    x = median + sigma * torch.tan(math.pi * (u[idx] - 0.5))
    return _store(t, x)


def uniform_float32_rounds_up_to_bound(t, from_=0.0, to=1.0, *, generator=None):
    """FAULTY. float32 uniform made by drawing a full 53-bit float64 uniform
    and rounding to float32 (round-to-nearest), then scaling in float32.
    Values within 2^-25 of 1 round up, so `to` is returned (about once per
    2^25 draws) and the lattice is non-uniform. Meant to break float32."""
    n = t.numel()
    k = _words(n, 53, t, generator)
    u = (k.to(torch.float64) * 2.0 ** -53).to(torch.float32)
    if t.dtype == torch.float64:
        x = from_ + (to - from_) * u.to(torch.float64)
    else:
        x = (torch.tensor(from_, dtype=torch.float32)
             + torch.tensor(to - from_, dtype=torch.float32) * u)
    return _store(t, x)


def correct_exponential(t, lambd=1.0, *, generator=None):
    """CORRECT. Outside implementation: uniform u = k * 2^-b in [0,1) from
    torch.randint with b = 53 bits for float64 and 24 bits for float32, then
    x = -log1p(-u) / lambd computed in float64 and rounded to t's dtype."""
    n = t.numel()
    bits = 53 if t.dtype == torch.float64 else 24
    k = _words(n, bits, t, generator)
    u = k.to(torch.float64) * 2.0 ** -bits
    return _store(t, -torch.log1p(-u) / lambd)


for _name in __all__:
    globals()[_name].conformance_name = "blind." + _name
del _name

FAULTS = [
    ("uniform", "uniform_float64_two_words_shared", "float64"),
    ("normal", "normal_float32_intermediate_box_muller", "float64"),
    ("exponential", "exponential_mantissa_fill_lost_bit", "float32"),
    ("log_normal", "log_normal_lut_quantised_inverse_cdf", "float32"),
    ("cauchy", "cauchy_counter_wraps_at_2_16", "float32"),
    ("uniform", "uniform_float32_rounds_up_to_bound", "float32"),
]

TWINS = [("exponential", "correct_exponential")]
