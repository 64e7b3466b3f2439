"""TopK implementations: torch.topk on the run's device."""

from __future__ import annotations

import torch


def torch_topk(
    x: torch.Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)


torch_topk.conformance_name = "torch.topk"
