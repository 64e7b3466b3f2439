"""grid_sample implementations, the area ``grid_sample``.

Contract (``--impl grid_sample=module:attr``): torch.nn.functional.grid_sample's signature,
``fn(input, grid, mode="bilinear", padding_mode="zeros", align_corners=False) -> tensor``,
for 4-D input (N, C, H, W) and grid (N, Ho, Wo, 2). Features: ``mode.bilinear``,
``mode.nearest``, ``mode.bicubic``, ``channels_last`` (an NHWC-strided input),
``nonfinite_grid`` (NaN / inf grid entries), ``backward`` (input and grid gradients).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def grid_sample(input: torch.Tensor, grid: torch.Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool = False) -> torch.Tensor:
    return F.grid_sample(input, grid, mode=mode, padding_mode=padding_mode,
                         align_corners=align_corners)


grid_sample.conformance_name = "F.grid_sample"  # type: ignore[attr-defined]
