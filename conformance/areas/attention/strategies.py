"""Hypothesis strategy for attention cases an implementation declares it supports."""

from __future__ import annotations

import torch
from hypothesis import assume
from hypothesis import strategies as st

from conformance.areas.attention.cases import AttnCase
from conformance.areas.attention.catalogue import MASKS, SCORE_MODS, Geometry
from conformance.areas.attention.checks import shape_lacks
from conformance.harness.registry import Impl

SEQ_LENS = (1, 3, 17, 113, 127, 128, 129, 239)
HEAD_DIMS = (16, 32, 64, 128, 256)
MAX_SCORES = 1 << 17  # B * Hq * Sq * Sk per example: keeps the oracle and CPU backends fast


@st.composite
def attn_cases(draw: st.DrawFn, impl: Impl, dtype: torch.dtype, device: torch.device, *,
               lse: bool = False, backward: bool = False) -> AttnCase:
    caps = impl.caps
    hkv = draw(st.sampled_from([1, 2]), label="Hkv")
    group = draw(st.sampled_from([1, 2, 4] if caps.claims("gqa") else [1]), label="group")
    hq = hkv * group
    sq = draw(st.sampled_from(SEQ_LENS), label="Sq")
    sk = draw(st.sampled_from(SEQ_LENS), label="Sk")
    batch = draw(st.sampled_from([1, 2]), label="B")
    assume(batch * hq * sq * sk <= min(MAX_SCORES, caps.limits.get("max_scores", MAX_SCORES)))
    dims = [d for d in HEAD_DIMS if d in caps.limits.get("head_dims", HEAD_DIMS)]
    assume(dims)
    d = draw(st.sampled_from(dims), label="D")
    pairs = caps.limits.get("dv_pairs")
    dvs = dims if pairs is None else [d, *(p[1] for p in pairs if p[0] == d and p[1] in dims)]
    dv = draw(st.sampled_from(dvs), label="Dv") if caps.claims("dv_ne_d") else d
    geo = Geometry(batch, hq, sq, sk)
    masks = [m for m, e in MASKS.items() if caps.claims(f"mask.{m}") and e.applies(geo)]
    mask = draw(st.sampled_from([None, *masks]), label="mask")
    mods = [m for m, e in SCORE_MODS.items() if caps.claims(f"score_mod.{e.kind}.{m}")]
    score_mod = draw(st.sampled_from([None, *mods]), label="score_mod")
    scale = (draw(st.sampled_from([None, 0.05, 0.3, 1.0]), label="scale")
             if caps.claims("scale") else None)
    seed = draw(st.integers(0, 2**31 - 1), label="seed")
    case = AttnCase(batch, hq, hkv, sq, sk, d, dv, dtype, mask, score_mod, scale, seed, device)
    assume(caps.lacks(features=case.features(lse=lse, backward=backward)) is None)
    assume(shape_lacks(caps.limits, d, dv, mask, score_mod, backward) is None)
    return case
