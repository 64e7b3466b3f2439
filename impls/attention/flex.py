"""FlexAttention: eager, compiled (Triton on GPUs, C++ on CPU), and the FlashAttention-4
backend (``kernel_options={"BACKEND": "FLASH"}``, CUDA sm90/sm100 with flash-attn-4).

Device-specific limits (no backward on CPU, no lse or float64 under Inductor on CPU) are
recorded in the device matrix, not here.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import torch
from torch.nn.attention import flex_attention as _flex_module
from torch.nn.attention.flex_attention import flex_attention

_HAS_AUX = hasattr(_flex_module, "AuxRequest")


def _flex(fn: Any, q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
          return_lse=False, kernel_options=None):
    kwargs: dict[str, Any] = {"score_mod": score_mod, "block_mask": block_mask, "scale": scale,
                              "enable_gqa": enable_gqa}
    if kernel_options:
        kwargs["kernel_options"] = kernel_options
    if not return_lse:
        return fn(q, k, v, **kwargs)
    if _HAS_AUX:
        out, aux = fn(q, k, v, return_aux=_flex_module.AuxRequest(lse=True), **kwargs)
        return out, aux.lse
    return fn(q, k, v, return_lse=True, **kwargs)


def flex_eager(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
               return_lse=False):
    # uncompiled on purpose (the reference path): torch's advice to compile it is noise here
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        return _flex(flex_attention, q, k, v, score_mod, block_mask, scale, enable_gqa,
                     return_lse)


# Dynamo compiles flex_attention once per (mask, score mod, shape, dtype) and, past its
# recompile_limit (8 by default), runs the function eagerly without a word: measured on
# 2026-12-04 (2 cores, CPU), the 9th to 12th flex.compiled cases of a qualification returned
# flex.eager's results bit for bit. Compiled calls therefore lift the limits and, should
# they still be hit, fail instead of falling back (tests/test_flex_adapter.py).
NO_FALLBACK = {"recompile_limit": 1 << 20, "accumulated_recompile_limit": 1 << 20,
               "fail_on_recompile_limit_hit": True}


def no_eager_fallback() -> Any:
    """A context in which torch.compile'd calls compile or raise, never run eagerly."""
    cfg = torch._dynamo.config
    return cfg.patch(**{k: v for k, v in NO_FALLBACK.items() if hasattr(cfg, k)})


@functools.cache
def _compiled() -> Any:
    return torch.compile(flex_attention, dynamic=False)


def flex_compiled(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                  return_lse=False):
    with no_eager_fallback():
        return _flex(_compiled(), q, k, v, score_mod, block_mask, scale, enable_gqa,
                     return_lse)


def flex_flash(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
               return_lse=False):
    with no_eager_fallback():
        return _flex(_compiled(), q, k, v, score_mod, block_mask, scale, enable_gqa,
                     return_lse, kernel_options={"BACKEND": "FLASH"})


flex_eager.conformance_name = "flex.eager"
flex_compiled.conformance_name = "flex.compiled"
flex_flash.conformance_name = "flex.flash"
flex_flash.conformance_devices = ["cuda"]
flex_flash.conformance_requires = ["flash-attn-4", "sm90|sm100"]
flex_flash.conformance_dtypes = ["float16", "bfloat16"]
flex_flash.conformance_limits = {"head_dims": [64, 96, 128]}
