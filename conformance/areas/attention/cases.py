"""Attention cases: geometry, dtype, scale, mask and score modification, and the tensors.

A case draws its parameters with numpy (seeded), then builds inputs on the device, the
mods for the device and for the CPU oracle, and a BlockMask. ``features()`` names what an
implementation must declare to be tested on it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import torch

from conformance.areas.attention.catalogue import MASKS, SCORE_MODS, Geometry, Mod
from conformance.harness.tensors import dtype_name


@dataclass
class AttnCase:
    batch: int
    hq: int
    hkv: int
    sq: int
    sk: int
    d: int
    dv: int
    dtype: torch.dtype
    mask: str | None = None
    score_mod: str | None = None
    scale: float | None = None
    seed: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))

    @property
    def geometry(self) -> Geometry:
        return Geometry(self.batch, self.hq, self.sq, self.sk)

    @cached_property
    def params(self) -> dict[str, Any]:
        rng = np.random.default_rng([self.seed, 17])
        out: dict[str, Any] = {}
        if self.mask:
            out["mask"] = MASKS[self.mask].draw(rng, self.geometry)
        if self.score_mod:
            out["score_mod"] = SCORE_MODS[self.score_mod].draw(rng, self.geometry)
        return out

    def mask_mod(self, device: torch.device | str) -> Mod | None:
        if not self.mask:
            return None
        return MASKS[self.mask].make(self.params["mask"], self.geometry, device)

    def score_mod_fn(self, device: torch.device | str) -> Mod | None:
        if not self.score_mod:
            return None
        return SCORE_MODS[self.score_mod].make(self.params["score_mod"], self.geometry, device)

    @cached_property
    def dense_mask(self) -> np.ndarray | None:
        """The mask evaluated on the CPU index grid: (B, Hq, Sq, Sk) bool."""
        fn = self.mask_mod("cpu")
        if fn is None:
            return None
        b, h, q, kv = index_grid(self.batch, self.hq, self.sq, self.sk)
        with torch.no_grad():
            m = fn(b, h, q, kv)
        return np.broadcast_to(m.numpy(), (self.batch, self.hq, self.sq, self.sk)).copy()

    @property
    def has_fully_masked_rows(self) -> bool:
        m = self.dense_mask
        return m is not None and m.shape[-1] > 0 and bool((~m.any(axis=-1)).any())

    def features(self, *, lse: bool = False, backward: bool = False) -> list[str]:
        needs = []
        if self.mask:
            needs.append(f"mask.{self.mask}")
        if self.score_mod:
            needs.append(f"score_mod.{SCORE_MODS[self.score_mod].kind}.{self.score_mod}")
        if self.hq != self.hkv:
            needs.append("gqa")
        if self.dv != self.d:
            needs.append("dv_ne_d")
        if self.has_fully_masked_rows:
            needs.append("fully_masked_rows")
        if self.scale is not None:
            needs.append("scale")
        if lse:
            needs.append("lse")
        if backward:
            needs.append("backward")
        return needs

    def inputs(self, requires_grad: bool = False) -> tuple[torch.Tensor, ...]:
        """q, k, v (and dO) on the device in the case dtype; values ~ N(0, 1)."""
        rng = np.random.default_rng([self.seed, 3])
        shapes = [(self.batch, self.hq, self.sq, self.d), (self.batch, self.hkv, self.sk, self.d),
                  (self.batch, self.hkv, self.sk, self.dv), (self.batch, self.hq, self.sq, self.dv)]
        ts = [torch.from_numpy(rng.standard_normal(s)).to(self.dtype).to(self.device)
              for s in shapes]
        if requires_grad:
            for t in ts[:3]:
                t.requires_grad_(True)
        return tuple(ts)

    def describe(self) -> dict[str, Any]:
        return {"B": self.batch, "Hq": self.hq, "Hkv": self.hkv, "Sq": self.sq, "Sk": self.sk,
                "D": self.d, "Dv": self.dv, "dtype": dtype_name(self.dtype),
                "mask": self.mask or "none", "score_mod": self.score_mod or "none",
                "scale": self.scale, "seed": self.seed}


def growing_scores(case: AttnCase, growth: float) -> tuple[torch.Tensor, ...]:
    """Inputs whose scores s' = scale q.k carry a ramp of ``growth`` log2 units per 128
    keys on top of N(0, 1) noise: increasing along the row in head 0, decreasing in head 1,
    so that a kernel visiting kv tiles in either order sees its running max keep growing."""
    q, k, v, _ = case.inputs()
    scale = 1.0 / math.sqrt(case.d)
    ramp = growth * math.log(2.0) * torch.arange(case.sk, dtype=torch.float64) / 128
    q, k = q.clone(), k.clone()
    q[..., 0] = 0.0
    q[:, 0, :, 0], q[:, 1, :, 0] = 1.0, -1.0
    k[..., 0] = (ramp / scale).to(case.dtype).to(k.device)
    return q, k, v


def index_grid(batch: int, heads: int, sq: int, sk: int) -> tuple[torch.Tensor, ...]:
    """Broadcastable int64 index tensors b, h, q_idx, kv_idx on the CPU."""
    return (torch.arange(batch).view(-1, 1, 1, 1), torch.arange(heads).view(1, -1, 1, 1),
            torch.arange(sq).view(1, 1, -1, 1), torch.arange(sk).view(1, 1, 1, -1))
