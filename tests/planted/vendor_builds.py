"""Two builds of one vendor's erfcx under the same name, as a qualification engineer
compares two driver builds: ``build_1`` is right, ``build_2`` regressed to the naive
formula exp(x^2) erfc(x) (NaN from x ~ 9.4 in float32). Same test ids in both reports, so
``torch-conformance diff`` sees outcome changes, not new tests."""

from __future__ import annotations

import torch
from planted.erfcx_faults import correct


def build_1(x: torch.Tensor) -> torch.Tensor:
    """Right: torch's forward and an accurate backward (erfcx_faults.correct)."""
    return correct(x)


def build_2(x: torch.Tensor) -> torch.Tensor:
    return torch.exp(x * x) * torch.erfc(x)


for _f in (build_1, build_2):
    _f.conformance_name = "vendor.erfcx"  # type: ignore[attr-defined]
    _f.conformance_dtypes = ("float32", "float64")  # type: ignore[attr-defined]
