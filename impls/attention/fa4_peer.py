"""flash-attn-4's ``flash_attn_func`` (CuTe DSL, sm90/sm100) as a peer implementation.

Its layout is (B, S, H, D) and its masks are flags: ``causal`` (bottom-right aligned) and
``window_size=(left, right)``; ``softcap`` applies cap * tanh(s / cap). Only the catalogue
entries it can express are declared. Not yet run on a GPU here.
"""

from __future__ import annotations

from typing import Any

from impls.attention.dense import kind


def flash_attn_func(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                    return_lse=False):
    from flash_attn.cute import flash_attn_func as fa4  # optional dependency

    mask_fn = block_mask.mask_mod if block_mask is not None else None
    kwargs: dict[str, Any] = {"softmax_scale": scale}
    mask_kind = kind(mask_fn)
    if mask_kind == "causal_br":
        kwargs["causal"] = True
    elif mask_kind == "sliding_window":
        kwargs["window_size"] = (mask_fn.conformance_params["window"] - 1, 0)
    elif mask_fn is not None:
        raise NotImplementedError(f"flash_attn_func cannot express mask {mask_kind!r}")
    if kind(score_mod) == "softcap":
        kwargs["softcap"] = score_mod.conformance_params["cap"]
    elif score_mod is not None:
        raise NotImplementedError(f"flash_attn_func cannot express score_mod {kind(score_mod)!r}")
    result = fa4(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), **kwargs)
    out, lse = result if isinstance(result, tuple) else (result, None)
    out = out.transpose(1, 2)
    if return_lse:
        if lse is None:
            raise NotImplementedError("this flash_attn_func build returned no lse")
        return out, lse
    return out


flash_attn_func.conformance_name = "fa4.flash_attn_func"
flash_attn_func.conformance_devices = ["cuda"]
flash_attn_func.conformance_requires = ["flash-attn-4", "sm90|sm100"]
flash_attn_func.conformance_dtypes = ["float16", "bfloat16"]
flash_attn_func.conformance_features = [
    "mask.causal_br", "mask.sliding_window", "score_mod.general.softcap", "gqa", "scale",
    "lse", "backward", "dv_ne_d",
]
flash_attn_func.conformance_limits = {"head_dims": [64, 96, 128]}
