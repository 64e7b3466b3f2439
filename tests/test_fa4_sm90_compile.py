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
