"""Turn FlexAttention-style mods into what dense APIs (SDPA) take: a boolean mask and an
additive bias, evaluated on index grids of the inputs' device."""

from __future__ import annotations

from typing import Any

import torch


def index_grid(b: int, h: int, sq: int, sk: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    return (torch.arange(b, device=device).view(-1, 1, 1, 1),
            torch.arange(h, device=device).view(1, -1, 1, 1),
            torch.arange(sq, device=device).view(1, 1, -1, 1),
            torch.arange(sk, device=device).view(1, 1, 1, -1))


def kind(fn: Any) -> str | None:
    return getattr(fn, "conformance_kind", None)


def dense_mask(block_mask: Any, shape: tuple[int, int, int, int],
               device: torch.device) -> torch.Tensor | None:
    """The block mask's mask_mod evaluated elementwise: (B, H, Sq, Sk) bool, or None."""
    if block_mask is None:
        return None
    grid = index_grid(*shape, device)
    return torch.broadcast_to(block_mask.mask_mod(*grid), shape)


def additive_bias(score_mod: Any, shape: tuple[int, int, int, int], device: torch.device,
                  dtype: torch.dtype) -> torch.Tensor | None:
    """score_mod(0, b, h, q, kv) for a score_mod the catalogue marks as additive."""
    if score_mod is None:
        return None
    if not getattr(score_mod, "conformance_additive", False):
        raise NotImplementedError(f"score_mod {kind(score_mod) or score_mod!r} is not additive")
    zero = torch.zeros((), dtype=torch.float32, device=device)
    bias = score_mod(zero, *index_grid(*shape, device))
    return torch.broadcast_to(bias, shape).to(dtype)
