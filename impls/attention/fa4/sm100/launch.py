"""Tensors as the sm100 kernels take them at launch (shared by the forward and backward
launchers, api.py and bwd_api.py)."""

from __future__ import annotations

from typing import Any

import torch


def ready(t: torch.Tensor) -> torch.Tensor:
    """Last dim contiguous, 16-byte aligned base and strides (TMA requirements)."""
    ok = (t.stride(-1) == 1 and t.data_ptr() % 16 == 0
          and all(s * t.element_size() % 16 == 0 for s in t.stride()[:-1]))
    return t if ok else t.contiguous()


def dyn(t: torch.Tensor | None) -> Any:
    from cutlass.cute.runtime import from_dlpack

    if t is None:
        return None
    return from_dlpack(t, assumed_align=16 if t.dim() == 4 else 4).mark_layout_dynamic(
        leading_dim=t.dim() - 1)
