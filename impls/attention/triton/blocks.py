"""Block-sparsity tables: which key blocks each query block visits, and the transpose.

A tile is listed when any (query, key) pair in it is unmasked; fully masked tiles are
skipped by the kernels. Causal and unmasked layouts are built arithmetically; other masks
are evaluated densely with their torch mask_mod on the device.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def _grid(b: int, h: int, sq: int, sk: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    return (torch.arange(b, device=device).view(-1, 1, 1, 1),
            torch.arange(h, device=device).view(1, -1, 1, 1),
            torch.arange(sq, device=device).view(1, 1, -1, 1),
            torch.arange(sk, device=device).view(1, 1, 1, -1))


def tile_mask(mask_mod: Callable[..., Any] | None, kind: str | None, b: int, h: int, sq: int,
              sk: int, block_m: int, block_n: int, device: torch.device) -> torch.Tensor:
    """(B, H, NUM_M, NUM_N) bool: does the tile hold any unmasked pair?"""
    num_m, num_n = -(-sq // block_m), -(-sk // block_n)
    if mask_mod is None:
        return torch.ones(b, h, num_m, num_n, dtype=torch.bool, device=device)
    if kind in ("causal_tl", "causal_br"):
        off = sk - sq if kind == "causal_br" else 0
        last_q = torch.clamp(torch.arange(num_m, device=device) * block_m + block_m - 1,
                             max=max(sq - 1, 0))
        first_k = torch.arange(num_n, device=device) * block_n
        tiles = (last_q[:, None] + off) >= first_k[None, :]
        return tiles.expand(b, h, num_m, num_n)
    dense = torch.broadcast_to(mask_mod(*_grid(b, h, sq, sk, device)), (b, h, sq, sk))
    padded = torch.zeros(b, h, num_m * block_m, num_n * block_n, dtype=torch.bool,
                         device=device)
    padded[:, :, :sq, :sk] = dense
    return padded.view(b, h, num_m, block_m, num_n, block_n).any(dim=(3, 5))


def tables(tiles: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Counts (B*H*ROWS,) and padded indices (B*H*ROWS, MAX) of the true columns per row."""
    flat = tiles.reshape(-1, tiles.shape[-1])
    counts = flat.sum(dim=1).to(torch.int32)
    width = max(int(counts.max().item()) if counts.numel() else 0, 1)
    order = torch.argsort((~flat).to(torch.int8), dim=1, stable=True)[:, :width]
    return counts.contiguous(), order.to(torch.int32).contiguous(), width
