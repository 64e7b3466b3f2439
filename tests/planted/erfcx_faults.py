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


def correct(x: torch.Tensor) -> torch.Tensor:
    return torch.special.erfcx(x)


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
