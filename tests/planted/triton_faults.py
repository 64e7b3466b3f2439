"""Faults planted in our Triton flash-attention kernel (impls/attention/triton/fwd.py,
FAULT constexpr); each must be flagged by the attention suite under the interpreter."""

from __future__ import annotations

from impls.attention.triton_fa import triton_attention


def _with(fault: int, name: str):
    def attention(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                  return_lse=False):
        return triton_attention(q, k, v, score_mod, block_mask, scale, enable_gqa, return_lse,
                                fault=fault)

    for attr in ("conformance_requires", "conformance_features", "conformance_limits"):
        setattr(attention, attr, getattr(triton_attention, attr))
    attention.conformance_dtypes = ["float16", "float32"]
    attention.conformance_name = f"planted.triton_{name}"
    return attention


no_rescale = _with(1, "no_rescale")
off_by_one_key = _with(2, "off_by_one_key")
drops_last_partial_block = _with(3, "drops_last_partial_block")
lse_zero_on_masked_rows = _with(4, "lse_zero_on_masked_rows")
