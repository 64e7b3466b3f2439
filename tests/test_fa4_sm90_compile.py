"""Compile check of our FA4-style sm90 CuTe DSL kernels (no GPU needed).

Every variant takes 5-10 s to compile on a 2-core machine (96 kernels: about 12 minutes), so
the tests compile a representative subset covering every dtype, head dim, mask and score_mod
at least once; ``python -m impls.attention.fa4.sm90.variants --table`` compiles all of them and
writes docs/results/fa4-sm90-compile.md.
"""

from __future__ import annotations

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")

from impls.attention.fa4.sm90.variants import BY_NAME, VARIANTS, compile_variant

SUBSET = [
    ("fwd", "float16-d128-causal-none"),
    ("fwd", "bfloat16-d64-sliding_window-softcap"),
    ("fwd", "float16-d64-document-alibi"),
    ("fwd", "bfloat16-d128-none-alibi"),
    ("bwd", "float16-d64-causal-softcap"),
    ("bwd", "bfloat16-d128-document-alibi"),
]


def test_variant_list_is_the_full_product():
    assert len(VARIANTS) == len(BY_NAME) == 2 * 2 * 4 * 3
    covered = {(BY_NAME[n].dtype, BY_NAME[n].head_dim, BY_NAME[n].mask, BY_NAME[n].score_mod)
               for _, n in SUBSET}
    for i, values in enumerate(zip(*covered, strict=True)):
        universe = {(v.dtype, v.head_dim, v.mask, v.score_mod)[i] for v in VARIANTS}
        assert set(values) == universe, "the subset must cover every value of every field"


@pytest.mark.parametrize(("kernel", "name"), SUBSET, ids=[f"{k}-{n}" for k, n in SUBSET])
def test_compiles_for_sm90a(kernel, name):
    r = compile_variant(name, arch="sm_90a", kernel=kernel)
    assert r["cubin_bytes"] > 10_000
    assert r["kernels"], "no kernel found in the cubin"
    assert len(r["kernels"]) == (1 if kernel == "fwd" else 2)
    for info in r["kernels"].values():
        assert info["registers"] is not None and 0 < info["registers"] <= 255
        assert info["static_shared_bytes"] <= 48 * 1024
    if r["ptxas_registers"] is not None:
        assert r["ptxas_registers"] == r["registers"]  # cubin parser agrees with ptxas -v
    assert r["spill_stores"] == 0 and r["spill_loads"] == 0, r
    assert r["shared_memory_bytes"] <= 227 * 1024  # sm90 per-block opt-in maximum


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
