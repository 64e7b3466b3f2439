"""Our FA4-style sm90 CuTe DSL kernels: the variant list and names, the torch-facing adapter's
mapping of the catalogue and its shape checks, and a small compile subset for the shapes
beyond D = Dv in {64, 128} (tests/test_fa4_compile_all.py compiles every variant; no GPU
needed)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

pytest.importorskip("cutlass", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")
pytest.importorskip("cutlass.cute", reason="nvidia-cutlass-dsl (CuTe DSL) is not installed")

from impls.attention.fa4.sm90.common import MASKS, SCORE_MODS, SHAPES, Variant
from impls.attention.fa4.sm90.variants import BY_NAME, COVER, FULL, VARIANTS, parse

TABLE = Path(__file__).resolve().parents[1] / "docs" / "results" / "fa4-sm90-compile.md"
NEW_SHAPES = ((96, 96), (192, 192), (192, 128))


def test_variant_list_full_product_and_covering_set():
    assert len(FULL) == 2 * 2 * 4 * 3 and {v.shape for v in FULL} == {(64, 64), (128, 128)}
    assert len(COVER) == 3 * 2 * 4 and VARIANTS == FULL + COVER
    assert len(BY_NAME) == len(VARIANTS) == 72
    for shape, dtype in itertools.product(NEW_SHAPES, ("float16", "bfloat16")):
        vs = [v for v in COVER if v.shape == shape and v.dtype == dtype]
        assert {v.mask for v in vs} == set(MASKS), (shape, dtype)
        assert {v.score_mod for v in vs} == set(SCORE_MODS), (shape, dtype)


def test_variant_names_parse_back():
    for v in VARIANTS:
        assert parse(v.name) == v
    v = parse("bfloat16-d192v128-causal-softcap")
    assert (v.head_dim, v.head_dim_v, v.mask, v.score_mod) == (192, 128, "causal", "softcap")
    assert parse("float16-d128-sliding_window-alibi").shape == (128, 128)
    assert Variant("float16", 96).name == "float16-d96-none-none"
    with pytest.raises(KeyError):  # a valid kernel, but not compile-checked
        parse("bfloat16-d96-causal-none")
    for bad in ("float16-d128v128-none-none", "float16-d80-none-none", "float16-d64v128-none-none",
                "float32-d64-none-none", "float16-d64-none"):
        with pytest.raises(ValueError):
            parse(bad)


def test_api_recognises_catalogue_entries():
    """The torch-facing adapter maps catalogue masks/mods to variants (no GPU needed)."""
    import numpy as np
    import torch

    from conformance.areas.attention.catalogue import MASKS, SCORE_MODS, Geometry
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


def test_api_takes_exactly_the_compiled_shapes_and_variants():
    """(D, Dv) checks and the covering set: anything not compile-checked is refused with
    NotImplementedError before a kernel is compiled or launched."""
    import torch

    from impls.attention.fa4.sm90 import api

    def qkv(d, dv, dk=None):
        return (torch.zeros(1, 2, 3, d, dtype=torch.bfloat16),
                torch.zeros(1, 2, 4, dk or d, dtype=torch.bfloat16),
                torch.zeros(1, 2, 4, dv, dtype=torch.bfloat16))

    for d, dv in ((64, 64), (128, 128), *NEW_SHAPES):
        q, k, v = qkv(d, dv)
        api._check_shapes(q, k, v, False)
        assert api._variant(q, v, "none", "none").shape == (d, dv)
    for d, dv, dk in ((64, 128, 64), (128, 64, 128), (192, 96, 192), (80, 80, 80), (256, 256, 256),
                      (192, 128, 128)):
        with pytest.raises(NotImplementedError, match="supports \\(D, Dv\\)"):
            api._check_shapes(*qkv(d, dv, dk), False)
    q, k, v = qkv(192, 128)
    assert api._variant(q, v, "document", "alibi").name == "bfloat16-d192v128-document-alibi"
    for mask, mod in (("causal", "none"), ("none", "softcap"), ("document", "none")):
        with pytest.raises(NotImplementedError, match="no compiled kernel"):
            api._variant(q, v, mask, mod)
    assert set(api._SHAPES) == set(SHAPES) == {v.shape for v in VARIANTS}


def test_capability_declaration():
    from impls.attention.fa4.sm90.api import fa4_sm90

    limits = fa4_sm90.conformance_limits
    assert limits["head_dims"] == [64, 96, 128, 192]
    # Dv != D is one pair, (192, 128): declared as that pair only (docs/contracts.md)
    assert "dv_ne_d" in fa4_sm90.conformance_features and limits["dv_pairs"] == [[192, 128]]
    # at the covering-set head dims, exactly the compiled (mask, score_mod) pairs
    kernel = {"nomask": "none", "causal_br": "causal", "nomod": "none"}
    for (d, dv) in ((96, 96), (192, 192), (192, 128)):
        for dtype in ("float16", "bfloat16"):
            compiled = {(v.mask, v.score_mod) for v in VARIANTS
                        if (v.head_dim, v.head_dim_v or v.head_dim, v.dtype) == (d, dv, dtype)}
            declared = {(kernel.get(m, m), kernel.get(s, s))
                        for m, s in limits["head_dim_combos"][str(d)]}
            assert declared == compiled, (d, dv, dtype)


def _recorded(name: str, kernel: str) -> tuple[int, int, str]:
    for line in TABLE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[:2] == [name, kernel]:
            return int(cells[2]), int(cells[3]), cells[4]
    raise AssertionError(f"{name} {kernel} is not in {TABLE.name}")


# One kernel per new code path: Dv != D forward; D = 192 forward (one K stage, no
# intra-warpgroup overlap); Dv != D backward with the dK / dV warpgroup roles.
COMPILE_CASES = [("bfloat16-d192v128-causal-softcap", "fwd"),
                 ("float16-d192-document-alibi", "fwd"),
                 ("float16-d192v128-document-alibi", "bwd")]


@pytest.mark.kernel_compile
@pytest.mark.parametrize(("name", "kernel"), COMPILE_CASES,
                         ids=[f"{k}-{n}" for n, k in COMPILE_CASES])
def test_new_shape_compiles_with_recorded_resources(name, kernel):
    from impls.attention.fa4.sm90.variants import compile_variant

    r = compile_variant(name, kernel=kernel, return_compiled=True)
    assert r["cubin_bytes"] > 10_000 and 0 < r["registers"] <= 255
    assert r["shared_memory_bytes"] <= 227 * 1024
    assert r["spill_stores"] <= 32 and r["spill_loads"] <= 24  # the D = 128 worst
    got = (r["registers"], r["shared_memory_bytes"], f"{r['spill_stores']}/{r['spill_loads']}")
    assert got == _recorded(name, kernel)
    # wgmma N of the products over Dv / D: fwd O += P V (N = Dv); bwd dV (N = Dv), dK, dQ (N = D)
    d, dv = BY_NAME[name].shape
    wgmma_n = set(map(int, re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16",
                                      str(r["ptx"]))))
    assert wgmma_n == ({128, dv} if kernel == "fwd" else {64, d, dv}), wgmma_n


def _adapter_inputs(d: int, dv: int, dtype):
    """A call as fa4_sm90 sees it: GQA 4:2, Sq != Sk, document mask with ALiBi."""
    import numpy as np
    import torch

    from conformance.areas.attention.catalogue import MASKS, SCORE_MODS, Geometry
    from impls.attention.fa4.sm90 import api

    geo = Geometry(batch=2, heads=4, sq=130, sk=70)
    rng = np.random.default_rng(1)

    class BlockMask:
        def __init__(self, fn):
            self.mask_mod = fn

    def make(entry):
        return entry.make(entry.draw(rng, geo), geo, "cpu")

    q = torch.zeros(2, 4, 130, d, dtype=dtype)
    k = torch.zeros(2, 2, 70, d, dtype=dtype)
    v = torch.zeros(2, 2, 70, dv, dtype=dtype)
    mask, mod, params = api._recognise(q, k, make(SCORE_MODS["alibi"]),
                                       BlockMask(make(MASKS["document"])))
    return q, k, v, api._variant(q, v, mask, mod), params


@pytest.mark.kernel_compile
@pytest.mark.parametrize("kernel", ["fwd", "bwd"])
def test_adapter_arguments_compile(tmp_path, kernel):
    """What fa4_sm90 hands to cute.compile at a call (from_dlpack views with dynamic layouts
    of CPU tensors here, CUDA ones on a GPU; the scalars; the ALiBi slopes and document ids;
    a CUstream: the null stream here, the current stream on a GPU) compiles for sm_90a: the
    adapter's argument plumbing matches the kernels' signatures."""
    import cuda.bindings.driver as cuda
    import cutlass.cute as cute
    import torch

    from impls.attention.fa4.sm90 import api
    from impls.attention.fa4.sm90.variants import make_kernel

    q, k, v, variant, params = _adapter_inputs(128, 128, torch.float16)
    assert variant.name == "float16-d128-document-alibi"
    null = cuda.CUstream(0)
    if kernel == "fwd":
        o, lse = torch.empty(2, 4, 130, 128, dtype=q.dtype), torch.empty(2, 4, 130)
        args = api.fwd_launch_args(q, k, v, o, lse, variant, 0.125, params, stream=null)
    else:
        f32 = {"dtype": torch.float32}
        args = api.bwd_launch_args(
            q, k, v, torch.zeros_like(q), torch.zeros(2, 4, 130), torch.zeros(2, 4, 130),
            torch.zeros(2, 4, 130, 128, **f32), torch.zeros(2, 4, 70, 128, **f32),
            torch.zeros(2, 4, 70, 128, **f32), variant, 0.125, params, stream=null)
    compiled = cute.compile(make_kernel(variant, kernel), *args,
                            options=f"--gpu-arch sm_90a --keep-cubin --dump-dir {tmp_path}")
    assert len(compiled.__cubin__) > 10_000
