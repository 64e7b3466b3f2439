"""torch.nn.functional.scaled_dot_product_attention, one adapter per backend.

SDPA takes a dense mask, so masks and additive score_mods are evaluated on index grids
(impls/attention/dense.py); a top-left causal mask goes through ``is_causal=True``, which is
top-left aligned in SDPA. SDPA returns no lse. Capability declarations per backend follow
torch 2.11's documented constraints; the CUDA ones were not yet run on a GPU here.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from impls.attention.dense import additive_bias, dense_mask, kind


def _run(backend: SDPBackend, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
         score_mod: Any = None, block_mask: Any = None, scale: float | None = None,
         enable_gqa: bool = False, return_lse: bool = False) -> torch.Tensor:
    if return_lse:
        raise NotImplementedError("scaled_dot_product_attention does not return lse")
    shape = (q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    mask_fn = block_mask.mask_mod if block_mask is not None else None
    attn_mask, is_causal = None, False
    if kind(mask_fn) == "causal_tl" and score_mod is None:
        is_causal = True
    else:
        keep = dense_mask(block_mask, shape, q.device)
        bias = additive_bias(score_mod, shape, q.device, q.dtype)
        if bias is None:
            attn_mask = keep
        else:
            attn_mask = bias if keep is None else bias.masked_fill(~keep, float("-inf"))
    with sdpa_kernel(backend):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, is_causal=is_causal,
                                              scale=scale, enable_gqa=enable_gqa)


def sdpa_math(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
              return_lse=False):
    return _run(SDPBackend.MATH, q, k, v, score_mod, block_mask, scale, enable_gqa, return_lse)


def sdpa_flash_cpu(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                   return_lse=False):
    return _run(SDPBackend.FLASH_ATTENTION, q, k, v, score_mod, block_mask, scale, enable_gqa,
                return_lse)


def sdpa_flash(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
               return_lse=False):
    return _run(SDPBackend.FLASH_ATTENTION, q, k, v, score_mod, block_mask, scale, enable_gqa,
                return_lse)


def sdpa_efficient(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                   return_lse=False):
    return _run(SDPBackend.EFFICIENT_ATTENTION, q, k, v, score_mod, block_mask, scale,
                enable_gqa, return_lse)


def sdpa_cudnn(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
               return_lse=False):
    return _run(SDPBackend.CUDNN_ATTENTION, q, k, v, score_mod, block_mask, scale, enable_gqa,
                return_lse)


_DENSE = ["mask", "score_mod.additive", "scale", "backward", "fully_masked_rows"]
_ALL_FLOATS = ["float16", "bfloat16", "float32", "float64"]

sdpa_math.conformance_name = "sdpa.math"
sdpa_math.conformance_features = [*_DENSE, "gqa", "dv_ne_d"]
sdpa_math.conformance_dtypes = _ALL_FLOATS

sdpa_flash_cpu.conformance_name = "sdpa.flash_cpu"
sdpa_flash_cpu.conformance_devices = ["cpu"]
sdpa_flash_cpu.conformance_features = [*_DENSE, "gqa"]
sdpa_flash_cpu.conformance_dtypes = _ALL_FLOATS

sdpa_flash.conformance_name = "sdpa.flash"
sdpa_flash.conformance_devices = ["cuda", "rocm"]
sdpa_flash.conformance_features = ["mask.causal_tl", "scale", "backward", "gqa"]
sdpa_flash.conformance_dtypes = ["float16", "bfloat16"]
sdpa_flash.conformance_limits = {"head_dims": [16, 32, 64, 96, 128, 192, 256]}

sdpa_efficient.conformance_name = "sdpa.efficient"
sdpa_efficient.conformance_devices = ["cuda", "rocm"]
sdpa_efficient.conformance_features = ["mask", "score_mod.additive", "scale", "backward",
                                       "dv_ne_d"]
sdpa_efficient.conformance_dtypes = ["float16", "bfloat16", "float32"]

sdpa_cudnn.conformance_name = "sdpa.cudnn"
sdpa_cudnn.conformance_devices = ["cuda"]
sdpa_cudnn.conformance_features = ["mask.causal_tl", "scale", "backward"]
sdpa_cudnn.conformance_dtypes = ["float16", "bfloat16"]
sdpa_cudnn.conformance_limits = {"head_dims": [64, 128]}
