"""Attention implementations under test. The contract is FlexAttention's signature:

    fn(query, key, value, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
       return_lse=False) -> out, or (out, lse) when return_lse

with query (B, Hq, Sq, D), key (B, Hkv, Sk, D), value (B, Hkv, Sk, Dv), lse natural-log.
Features an implementation may declare (``conformance_features``; dotted names are implied
by their prefixes): "mask" or "mask.<name>", "score_mod", "score_mod.additive" or
"score_mod.<kind>.<name>", "gqa", "dv_ne_d", "fully_masked_rows", "scale", "lse",
"backward". Limits: ``conformance_limits = {"head_dims": [...]}``.
"""
