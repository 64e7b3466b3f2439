"""Planted erfcx implementations the special.erfcx area must flag, and their correct twin."""

from __future__ import annotations

import math

import torch


def naive(x: torch.Tensor) -> torch.Tensor:
    """The definition as written: exp(x^2) overflows (and erfc underflows) for moderate x,
    giving inf * 0 = NaN from x ~ 9.4 (float32) / 26.6 (float64)."""
    return torch.exp(x * x) * torch.erfc(x)


def early_asymptotic(x: torch.Tensor) -> torch.Tensor:
    """The asymptotic 1 / (x sqrt(pi)) from x > 5 instead of x > 5e7 (2% off at x = 5)."""
    return torch.where(x > 5, 1 / (x * math.sqrt(math.pi)), torch.special.erfcx(x))


class _HalfGrad(torch.autograd.Function):
    """torch's forward; a backward that drops the factor 2 of 2x erfcx(x)."""

    @staticmethod
    def forward(ctx, x):
        y = torch.special.erfcx(x)
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * (x * y - 2 / math.sqrt(math.pi))


def half_grad(x: torch.Tensor) -> torch.Tensor:
    return _HalfGrad.apply(x)


def _derivative(x: torch.Tensor) -> torch.Tensor:
    """d/dx erfcx in float64: 2x erfcx(x) - 2/sqrt(pi) below 16 (float64 keeps 2x^2 u ~ 6e-14
    of it), the asymptotic series -(1/(sqrt(pi) x^2)) sum_n (-1)^n (2n+1)!! / (2x^2)^n past
    16 (14 terms: the next is below 1e-18 relative there), where the difference cancels."""
    x64 = x.double()
    near = 2 * x64 * torch.special.erfcx(x64) - 2 / math.sqrt(math.pi)
    big = torch.where(x64 >= 16, x64, torch.full_like(x64, 16.0))
    r = 1 / (2 * big * big)
    term, total = torch.ones_like(big), torch.ones_like(big)
    for n in range(1, 15):
        term = -term * (2 * n + 1) * r
        total = total + term
    far = -total / (math.sqrt(math.pi) * big) / big
    return torch.where(x64 >= 16, far, near)


class _Accurate(torch.autograd.Function):
    """torch's forward; the true derivative (``_derivative``) in the backward, rounded once
    (torch's own formula cancels past x ~ 140 in float32: an expected failure of torch's)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.special.erfcx(x)

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return (g.double() * _derivative(x)).to(x.dtype)


def correct(x: torch.Tensor) -> torch.Tensor:
    """torch's forward and an accurate backward: the twin, correct where torch's backward
    is not (x >= 16)."""
    return _Accurate.apply(x)


for _f in (naive, early_asymptotic, half_grad, correct):
    _f.conformance_name = _f.__name__  # type: ignore[attr-defined]

_ERFCX = "special/test_erfcx.py"
SELFTEST = [
    *({"area": "special.erfcx", "impl": name, "path": _ERFCX, "expect": "killed",
       "select": f"{name} and test_forward and (float32 or float64)"}
      for name in ("naive", "early_asymptotic")),
    {"area": "special.erfcx", "impl": "half_grad", "path": _ERFCX, "expect": "killed",
     "select": "half_grad and test_backward[ and float32"},
    {"area": "special.erfcx", "impl": "correct", "path": _ERFCX, "expect": "passes",
     "select": "correct and not backward_huge and (float32 or float64)"},
]
