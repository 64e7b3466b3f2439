"""Special functions, the implementations of the areas ``special.<name>``.

Contract (``--impl special.erfcx=module:attr``): the signature of the torch function,
``fn(x) -> tensor`` of x's shape, dtype and device, differentiable where the area checks
the backward (feature ``backward``).
"""

from __future__ import annotations

import torch


def erfcx(x: torch.Tensor) -> torch.Tensor:
    return torch.special.erfcx(x)


erfcx.conformance_name = "torch.special.erfcx"  # type: ignore[attr-defined]
