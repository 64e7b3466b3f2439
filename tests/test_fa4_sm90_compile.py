"""Our FA4-style sm90 CuTe DSL kernels: the variant list and the torch-facing adapter's
mapping of the catalogue (tests/test_fa4_compile_all.py compiles every variant, no GPU
needed)."""

from __future__ import annotations

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")

from impls.attention.fa4.sm90.variants import BY_NAME, VARIANTS


def test_variant_list_is_the_full_product():
    assert len(VARIANTS) == len(BY_NAME) == 2 * 2 * 4 * 3


def test_api_recognises_catalogue_entries():
    """The torch-facing adapter maps catalogue masks/mods to variants (no GPU needed)."""
    import numpy as np
    import torch

    from conformance.attention.catalogue import MASKS, SCORE_MODS, Geometry
    from impls.attention.fa4.sm90 import api

    geo = Geometry(batch=1, heads=4, sq=5, sk=9)
    rng = np.random.default_rng(0)
    q, k = torch.zeros(1, 4, 5, 64), torch.zeros(1, 2, 9, 64)

    class BlockMask:
        def __init__(self, fn):
            self.mask_mod = fn

    def make(entry):
        return entry.make(entry.draw(rng, geo), geo, "cpu")

    assert api._recognise(q, k, None, None)[:2] == ("none", "none")
    assert api._recognise(q, k, None, BlockMask(make(MASKS["causal_br"])))[0] == "causal"
    mask, _, p = api._recognise(q, k, None, BlockMask(make(MASKS["sliding_window"])))
    assert mask == "sliding_window" and p["window"] >= 1
    mask, _, p = api._recognise(q, k, None, BlockMask(make(MASKS["document"])))
    assert mask == "document" and p["doc_q"].dtype == torch.int32 and p["doc_kv"].shape == (9,)
    _, mod, p = api._recognise(q, k, make(SCORE_MODS["softcap"]), None)
    assert mod == "softcap" and p["softcap"] in (5.0, 20.0, 50.0)
    _, mod, p = api._recognise(q, k, make(SCORE_MODS["alibi"]), None)
    assert mod == "alibi" and p["alibi"].shape == (4,)
    for name in ("causal_tl", "prefix_lm", "block_sparse"):  # causal_tl: Sq != Sk here
        with pytest.raises(NotImplementedError):
            api._recognise(q, k, None, BlockMask(make(MASKS[name])))
    for name in ("rel_bias", "bias_lookup", "head_scale"):
        with pytest.raises(NotImplementedError):
            api._recognise(q, k, make(SCORE_MODS[name]), None)
    with pytest.raises(NotImplementedError):
        api.fa4_sm90(q.half(), k.half(), k.half())  # CPU tensors: not an sm90 device
