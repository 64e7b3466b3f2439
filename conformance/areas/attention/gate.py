"""The attention benchmark's correctness gate (benchmarks/attention_gpu.py): a speed is
worth reporting only for an output that is right at that size. Each implementation's output
(and, for the backward pass, dQ, dK, dV) is checked under the suite's FlashAttention rule
(checks.fa_rule) against the float64 oracle, on two (batch, head) slices of the benchmarked
tensors: the first and the last, so a wrong batch or head stride shows, and two more drawn
at random (seeded by the shape, so every implementation gets the same). Attention is
independent per (batch, head), so a slice of the full call's output is the output of that
slice's problem. The oracle and the plain baseline are computed once per slice and shared
by every implementation (about 1 s per slice at S = 4096, D = 128 on 16 cores, forward and
backward).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from conformance.areas.attention.cases import AttnCase
from conformance.areas.attention.checks import fa_rule
from conformance.areas.attention.reference import Reference, baseline, oracle_reference
from conformance.harness.tensors import exact_numpy

Slice = tuple[int, int]
GRADS = ("dq", "dk", "dv")
EXTRA = 2  # slices drawn at random besides the first and the last


class Gate:
    """The references of one benchmarked input (q, k, v, dO), per slice and causal flag."""

    def __init__(self, qkv: tuple[torch.Tensor, ...], d_out: torch.Tensor) -> None:
        self.qkv, self.d_out = qkv, d_out
        b, h = qkv[0].shape[:2]
        ends = {(0, 0), (b - 1, h - 1)}
        rest = [(i, j) for i in range(b) for j in range(h) if (i, j) not in ends]
        rng = np.random.default_rng(list(qkv[0].shape))
        drawn = [rest[i] for i in rng.choice(len(rest), min(EXTRA, len(rest)), replace=False)]
        self.slices: list[Slice] = sorted(ends | set(drawn))
        self._refs: dict[tuple[Slice, bool], tuple[Reference, Reference]] = {}

    def _case(self, causal: bool) -> AttnCase:
        q = self.qkv[0]
        s, d = q.shape[2], q.shape[3]
        return AttnCase(batch=1, hq=1, hkv=1, sq=s, sk=s, d=d, dv=d, dtype=q.dtype,
                        mask="causal_tl" if causal else None, device=q.device)

    def _part(self, t: torch.Tensor, where: Slice) -> torch.Tensor:
        b, h = where
        return t[b:b + 1, h:h + 1]

    def references(self, where: Slice, causal: bool) -> tuple[Reference, Reference]:
        key = (where, causal)
        if key not in self._refs:
            case = self._case(causal)
            parts = [self._part(t, where) for t in (*self.qkv, self.d_out)]
            self._refs[key] = (oracle_reference(case, *parts), baseline(case, *parts))
        return self._refs[key]

    def check(self, causal: bool, out: torch.Tensor | None = None,
              grads: tuple[torch.Tensor, ...] | None = None) -> dict[str, Any]:
        """{"fwd": "pass" | "fail: ...", "bwd": ..., "fwd_margin": the largest error / bound
        over the slices, ...} for what is given."""
        dtype = self.qkv[0].dtype
        verdicts: dict[str, list[str]] = {"fwd": [], "bwd": []}
        margin = {"fwd": 0.0, "bwd": 0.0}
        for where in self.slices:
            ref, base = self.references(where, causal)
            tensors = []
            if out is not None:
                tensors.append(("fwd", "out", 2.0, out, ref.out, base.out))
            if grads is not None:
                tensors += [("bwd", n, 3.0, g, getattr(ref, n), getattr(base, n))
                            for n, g in zip(GRADS, grads, strict=True)]
            for side, name, r, got, want, b in tensors:
                m = fa_rule(name, exact_numpy(self._part(got, where)), np.asarray(want),
                            np.asarray(b), r, dtype, ref.terms[name], ref.score_error[name])
                margin[side] = max(margin[side], m.measured / m.bound if m.bound else np.inf)
                if not m.ok:
                    verdicts[side].append(f"{name} at (b, h) = {where}: error "
                                          f"{m.measured:.3g} > bound {m.bound:.3g}")
        given = {"fwd": out is not None, "bwd": grads is not None}
        result: dict[str, Any] = {}
        for side, bad in verdicts.items():
            if given[side]:
                result[side] = "pass" if not bad else "fail: " + "; ".join(bad)[:300]
                result[f"{side}_margin"] = round(float(margin[side]), 3)
        return result
