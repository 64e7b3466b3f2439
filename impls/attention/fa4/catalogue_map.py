"""Which FA4 kernel variant runs a call: the catalogue masks and score mods (recognised by
``conformance_kind``) the CuTe DSL kernels compile, and their runtime parameters. Shared by
the sm90 and sm100 adapters."""

from __future__ import annotations

from typing import Any

import torch

from impls.attention.dense import kind


def recognise(q: torch.Tensor, k: torch.Tensor, score_mod: Any, block_mask: Any,
              who: str) -> tuple[str, str, dict[str, Any]]:
    """(mask, score_mod, parameters) with mask in none/causal/sliding_window/document and
    score_mod in none/softcap/alibi; parameters: window (int), softcap (float), alibi
    (fp32 slopes, one per query head), doc_q / doc_kv (int32 ids, one per position), all on
    q's device; NotImplementedError for anything the kernels cannot express."""
    sq, sk, hq = q.shape[2], k.shape[2], q.shape[1]
    params: dict[str, Any] = {"window": 1, "softcap": 1.0, "alibi": None, "doc_q": None,
                              "doc_kv": None}
    mask_fn = block_mask.mask_mod if block_mask is not None else None
    mask_kind = kind(mask_fn)
    if mask_fn is None:
        mask = "none"
    elif mask_kind == "causal_br" or (mask_kind == "causal_tl" and sq == sk):
        mask = "causal"  # the kernels align bottom-right; top-left coincides when Sq == Sk
    elif mask_kind == "sliding_window":
        mask, params["window"] = "sliding_window", int(mask_fn.conformance_params["window"])
    elif mask_kind == "document":
        p = mask_fn.conformance_params
        mask = "document"
        params["doc_q"] = torch.as_tensor(p["doc_q"], dtype=torch.int32, device=q.device)
        params["doc_kv"] = torch.as_tensor(p["doc_kv"], dtype=torch.int32, device=q.device)
        if params["doc_q"].shape != (sq,) or params["doc_kv"].shape != (sk,):
            raise NotImplementedError("document ids must be one per position (batch-shared)")
    else:
        raise NotImplementedError(f"{who} cannot express mask {mask_kind or mask_fn!r}")
    mod_kind = kind(score_mod)
    if score_mod is None:
        mod = "none"
    elif mod_kind == "softcap":
        mod, params["softcap"] = "softcap", float(score_mod.conformance_params["cap"])
    elif mod_kind == "alibi":
        mod = "alibi"
        slopes = torch.as_tensor(score_mod.conformance_params["slopes"], dtype=torch.float32)
        if slopes.shape != (hq,):
            raise NotImplementedError("alibi slopes must be one per query head")
        params["alibi"] = slopes.to(q.device)
    else:
        raise NotImplementedError(f"{who} cannot express score_mod {mod_kind or score_mod!r}")
    return mask, mod, params


# Head-dim shapes beyond D = 64 / 128 compile a covering set of variants, not the whole
# mask x score_mod product (compile time): every mask and every score_mod at each shape.
COVER_SHAPES = ((96, 96), (192, 192), (192, 128))
COVER_PAIRS = (("none", "none"), ("causal", "softcap"), ("document", "alibi"),
               ("sliding_window", "none"))
_CATALOGUE = {"none": "nomask", "causal": "causal_br"}


def shape_limits(head_dims: list[int], cover_shapes: tuple[tuple[int, int], ...] = COVER_SHAPES,
                 cover_pairs: tuple[tuple[str, str], ...] = COVER_PAIRS) -> dict:
    """An adapter's conformance_limits for these shapes (docs/contracts.md): head_dims, the
    Dv != D pairs, and at each covering-set head dim the catalogue's mask + score_mod pairs."""
    combos = [[_CATALOGUE.get(m, m), "nomod" if s == "none" else s] for m, s in cover_pairs]
    return {"head_dims": sorted(head_dims),
            "dv_pairs": [[d, dv] for d, dv in cover_shapes if d != dv],
            "head_dim_combos": {str(d): combos for d in sorted({d for d, _ in cover_shapes})}}
