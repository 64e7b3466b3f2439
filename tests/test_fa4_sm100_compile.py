"""The sm100 (Blackwell) FA4-style forward: the variant list, the software exp2 constants
in its PTX, and the torch-facing adapter's mapping of the catalogue (tests/
test_fa4_compile_all.py compiles every variant). Nothing here runs the kernel: that needs a
B200-class GPU.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
import torch

pytest.importorskip("cutlass", reason="[skipped] nvidia-cutlass-dsl is not installed")

import cutlass
import cutlass.cute as cute
import cutlass.utils.blackwell_helpers as sm100_utils
from cutlass.cute.nvgpu import OperandMajorMode, tcgen05

from conformance.areas.attention.catalogue import MASKS, SCORE_MODS, Geometry
from impls.attention.fa4 import spec
from impls.attention.fa4.catalogue_map import COVER_PAIRS
from impls.attention.fa4.compile_cache import cached_compile
from impls.attention.fa4.sm100 import variants
from impls.attention.fa4.sm100.api import _variant, fa4_sm100


def test_variant_list_is_the_full_product():
    """The 48 base variants (full product, single tile) come first, unchanged; then the
    covering set: per new (shape, schedule) group and dtype, every mask and every score_mod."""
    base = [f"{dt}-d{d}-{m}-{s}" for dt in variants.DTYPES for d in (64, 128)
            for m in variants.MASKS for s in variants.SCORE_MODS]
    assert variants.VARIANTS[:48] == base
    assert variants.parse("bfloat16-d64-sliding_window-alibi") == (
        "bfloat16", 64, "sliding_window", "alibi")
    new = [variants.parse_variant(n) for n in variants.VARIANTS[48:]]
    assert len(new) == len(set(variants.VARIANTS[48:])) == len(variants.NEW_GROUPS) * 2 * 4
    groups = {((v.d, v.dv), v.schedule) for v in new}
    assert groups == set(variants.NEW_GROUPS)
    for group in groups:
        for dt in variants.DTYPES:
            sel = [v for v in new if ((v.d, v.dv), v.schedule) == group and v.dtype == dt]
            assert {v.mask for v in sel} == set(variants.MASKS)
            assert {v.mod for v in sel} == set(variants.SCORE_MODS)
    assert {s for _, s in groups} == set(variants.SCHEDULES)
    assert {dims for dims, _ in groups} >= {(96, 96), (192, 192), (192, 128)}
    assert all(sch in variants.FITS[dims] for dims, sch in groups)
    assert variants.parse_variant("bfloat16-d192v128-causal-none-persistent") == (
        "bfloat16", 192, 128, "causal", "none", "persistent")
    for bad in ("bfloat16-d192v128-causal-none-pingpong",  # 2 Q tiles of D = 192: no smem
                "bfloat16-d192-none-none-pingpong", "float16-d128v128-none-none",
                "float16-d128-none-none-single", "float16-d80-none-none"):
        with pytest.raises(ValueError):
            variants.parse_variant(bad)


# One persistent, one ping-pong (persistent: both new mechanisms) and one new-shape variant.
NEW_SUBSET = ("float16-d128-causal-softcap-persistent",
              "bfloat16-d128-sliding_window-none-pingpong_persistent",
              "bfloat16-d192v128-document-alibi")


@pytest.mark.parametrize("name", NEW_SUBSET)
def test_new_schedule_or_shape_compiles(name):
    # through the compile cache (keyed by the kernel sources and the compiler's versions):
    # tests/test_fa4_compile_all.py compiles the same variant and checks the committed table
    r = cached_compile("sm_100a", "fwd", name, lambda: variants.compile_variant(name))
    v = variants.parse_variant(name)
    assert r["cubin_bytes"] > 10_000
    assert r["registers"] == (128 if "pingpong" in v.schedule else 168)  # 512 / 384 threads
    assert r["shared_memory_bytes"] <= 227 * 1024


def test_fake_hardware_info_and_tile_order():
    from impls.attention.fa4.sm100 import scheduler

    assert scheduler.FakeHardwareInfo().get_device_multiprocessor_count() == 148
    # longest first: the last Q tile of every (head, batch) before any earlier one
    coords = [scheduler.tile_coords(i, 300, 2, 3, 128) for i in range(3 * 2 * 3)]
    assert sorted(coords) == sorted((m, h, b) for m in range(3) for h in range(2)
                                    for b in range(3))
    assert [m for m, _, _ in coords] == [2] * 6 + [1] * 6 + [0] * 6


def test_software_exp2_constants_are_the_spec_polynomial():
    from impls.attention.fa4.sm100 import exp2

    def f32_bits(x: float) -> str:
        return f"0f{struct.unpack('<I', struct.pack('<f', x))[0]:08X}"

    assert tuple(map(f32_bits, spec.EXP2_POLY)) == (exp2._C0, exp2._C1, exp2._C2, exp2._C3)
    assert "max.f32 y, $1, 0fC2FE0000" in exp2._EXP2_SW_PTX  # y = max(y, -127)
    assert "cvt.rmi.f32.f32" in exp2._EXP2_SW_PTX  # floor


def _mods(geo: Geometry):
    rng = np.random.default_rng(0)
    masks = {n: e.make(e.draw(rng, geo), geo, "cpu") for n, e in MASKS.items()}
    mods = {n: e.make(e.draw(rng, geo), geo, "cpu") for n, e in SCORE_MODS.items()}
    return masks, mods


class _BlockMask:
    def __init__(self, mask_mod):
        self.mask_mod = mask_mod


def test_adapter_maps_the_catalogue():
    geo = Geometry(batch=1, heads=2, sq=5, sk=9)
    masks, mods = _mods(geo)
    q = torch.zeros(1, 2, 5, 64, dtype=torch.bfloat16)
    k = torch.zeros(1, 2, 9, 64, dtype=torch.bfloat16)
    assert _variant(q, k, None, None)[0] == "bfloat16-d64-none-none"
    assert _variant(q, k, None, _BlockMask(masks["causal_br"]))[0] == "bfloat16-d64-causal-none"
    name, p = _variant(q, k, mods["softcap"], _BlockMask(masks["sliding_window"]))
    assert name == "bfloat16-d64-sliding_window-softcap"
    assert p["window"] == masks["sliding_window"].conformance_params["window"]
    name, p = _variant(q, k, mods["alibi"], _BlockMask(masks["document"]))
    assert name == "bfloat16-d64-document-alibi" and all(
        p[key] is not None for key in ("alibi", "doc_q", "doc_kv"))
    for unsupported in ("causal_tl", "prefix_lm", "block_sparse"):  # causal_tl: Sq != Sk here
        with pytest.raises(NotImplementedError):
            _variant(q, k, None, _BlockMask(masks[unsupported]))
    for unsupported in ("rel_bias", "bias_lookup", "head_scale"):
        with pytest.raises(NotImplementedError):
            _variant(q, k, mods[unsupported], None)
    with pytest.raises(NotImplementedError):
        _variant(q.float(), k.float(), None, None)
    with pytest.raises(NotImplementedError):
        _variant(torch.zeros(1, 2, 5, 80, dtype=torch.float16), k, None, None)
    q96, k96 = torch.zeros(1, 2, 5, 96), torch.zeros(1, 2, 9, 96)
    assert _variant(q96.half(), k96.half(), None, None)[0] == "float16-d96-none-none"
    with pytest.raises(NotImplementedError, match="not a compile-checked variant"):
        _variant(q96.half(), k96.half(), None, _BlockMask(masks["causal_br"]))
    q192, k192 = torch.zeros(1, 2, 5, 192).bfloat16(), torch.zeros(1, 2, 9, 192).bfloat16()
    assert _variant(q192, k192, None, None, 128)[0] == "bfloat16-d192v128-none-none"
    with pytest.raises(NotImplementedError):
        _variant(q192, k192, None, None, 64)


def test_adapter_prefers_the_compile_checked_schedule():
    from impls.attention.fa4.sm100.api import scheduled

    assert scheduled("bfloat16-d128-none-none") == "bfloat16-d128-none-none-pingpong_persistent"
    assert scheduled("bfloat16-d128-causal-alibi") == "bfloat16-d128-causal-alibi"  # base only
    assert scheduled("float16-d192v128-causal-softcap") == (
        "float16-d192v128-causal-softcap-persistent")
    assert scheduled("float16-d64-document-alibi") == "float16-d64-document-alibi"
    assert all(scheduled(n.split("-pingpong")[0].split("-persistent")[0]) in variants.VARIANTS
               for n in variants.VARIANTS)
    # launch_args runs the preferred schedule, with the SM count as a runtime argument (CPU
    # tensors: a B200's 148 from the fake HardwareInfo; on CUDA: the device's count).
    from impls.attention.fa4.sm100.api import launch_args

    q = torch.zeros(1, 2, 300, 192, dtype=torch.bfloat16)
    k, v = torch.zeros(1, 2, 70, 192, dtype=torch.bfloat16), torch.zeros(1, 2, 70, 128,
                                                                          dtype=torch.bfloat16)
    name, params = _variant(q, k, None, None, 128)
    out, lse = torch.empty(1, 2, 300, 128, dtype=torch.bfloat16), torch.empty(1, 2, 300)
    name, args = launch_args(name, params, q, k, v, out, lse, 0.1)
    assert name == "bfloat16-d192v128-none-none-persistent"
    assert int(args[-2]) == 148


def test_capabilities_are_honest():
    assert fa4_sm100.conformance_devices == ["cuda"]
    assert fa4_sm100.conformance_requires == ["cutlass-dsl", "sm100"]
    limits = fa4_sm100.conformance_limits
    assert "backward" in fa4_sm100.conformance_features  # bwd.py, compile-checked below
    assert limits["head_dims"] == [64, 96, 128, 192]
    # (D, Dv) = (192, 128) is the one Dv != D pair; at D = 96 / 192 only the covering
    # (mask, score_mod) pairs, and the backward only where bwd.py compiles
    assert "dv_ne_d" in fa4_sm100.conformance_features and limits["dv_pairs"] == [[192, 128]]
    assert limits["backward_head_dims"] == sorted({variants.parse(n)[1]
                                                   for n in variants.BWD_VARIANTS})
    kernel = {"nomask": "none", "causal_br": "causal", "nomod": "none"}
    for d, dv in ((96, 96), (192, 192), (192, 128)):
        declared = {(kernel.get(m, m), kernel.get(s, s)) for m, s in
                    limits["head_dim_combos"][str(d)]}
        for dtype in variants.DTYPES:
            compiled = {(v.mask, v.mod) for v in map(variants.parse_variant, variants.VARIANTS)
                        if (v.dtype, v.d, v.dv) == (dtype, d, dv)}
            assert declared == compiled, (d, dv, dtype)
    for dtype in variants.DTYPES:  # the backward at D = 96: the forward's covering pairs
        bwd = {(v.mask, v.mod) for v in map(variants.parse_variant, variants.BWD_VARIANTS)
               if (v.dtype, v.d) == (dtype, 96)}
        assert {(kernel.get(m, m), kernel.get(s, s))
                for m, s in limits["head_dim_combos"]["96"]} == bwd


def test_adapter_arguments_compile(tmp_path):
    """What fa4_sm100 hands to cute.compile (from_dlpack views of CPU tensors here, CUDA ones
    on a GPU) compiles: the adapter's argument plumbing matches the kernel's signature."""
    import cutlass.cute as cute

    from impls.attention.fa4.sm100.api import launch_args

    geo = Geometry(batch=2, heads=4, sq=130, sk=70)
    masks, mods = _mods(geo)
    q = torch.zeros(2, 4, 130, 64, dtype=torch.bfloat16, requires_grad=True)
    k = torch.zeros(2, 2, 70, 64, dtype=torch.bfloat16)  # GQA 4:2
    v = torch.zeros(2, 2, 70, 64, dtype=torch.bfloat16)
    name, params = _variant(q, k, mods["alibi"], _BlockMask(masks["document"]))
    out, lse = torch.empty_like(q), torch.empty(2, 4, 130)
    name, args = launch_args(name, params, q, k, v, out, lse, 0.125)
    compiled = cute.compile(variants.make_kernel(name), *args,
                            options=f"--gpu-arch sm_100a --keep-cubin --dump-dir {tmp_path}")
    assert len(compiled.__cubin__) > 10_000


# Both dtypes, every head dim, every mask and every score_mod at least once.
BWD_SUBSET = ("float16-d64-none-softcap", "bfloat16-d128-causal-alibi",
              "float16-d128-sliding_window-none", "bfloat16-d64-document-softcap",
              "bfloat16-d96-document-alibi")


def test_bwd_subset_covers_every_option():
    parts = [variants.parse(n) for n in BWD_SUBSET]
    assert {p[0] for p in parts} == set(variants.DTYPES)
    assert {p[1] for p in parts} == set(variants.BWD_HEAD_DIMS)
    assert {p[2] for p in parts} == set(variants.MASKS)
    assert {p[3] for p in parts} == set(variants.SCORE_MODS)
    assert set(BWD_SUBSET) <= set(variants.BWD_VARIANTS)
    # the 48 base variants first, unchanged; then D = 96: each dtype x the covering pairs
    assert variants.BWD_VARIANTS[:48] == tuple(variants.VARIANTS[:48])
    assert variants.BWD_VARIANTS[48:] == tuple(
        f"{dt}-d96-{m}-{s}" for dt in variants.DTYPES for m, s in COVER_PAIRS)


@pytest.mark.parametrize("d", variants.BWD_HEAD_DIMS)
def test_bwd_mn_major_views_alias_the_k_major_tiles(d):
    """The streamed tiles' MN-major views (bwd.py: dO^T, Q^T, K^T as B of dV, dK, dQ) map
    element (row, d) to the offset the K-major layout gives it: same swizzle (128B; 64B at
    D = 96), same offsets before it."""
    km, mn, one = OperandMajorMode.K, OperandMajorMode.MN, tcgen05.CtaGroup.ONE
    dt, found = cutlass.BFloat16, []

    @cute.jit
    def check(d: cutlass.Constexpr) -> None:
        ss = sm100_utils.make_trivial_tiled_mma(dt, dt, km, km, cutlass.Float32, one, (128, 128))
        ts = sm100_utils.make_trivial_tiled_mma(dt, dt, km, mn, cutlass.Float32, one, (128, d),
                                                tcgen05.OperandSource.TMEM)
        b = sm100_utils.make_smem_layout_b(ss, (128, 128, d), dt, 2)
        bt = sm100_utils.make_smem_layout_b(ts, (128, d, 128), dt, 2)
        found.append((str(b.inner), str(bt.inner), _aliased(b.outer, bt.outer, d)))

    check(d)
    assert found == [("S<2,4,3>", "S<2,4,3>", 128 * d) if d == 96 else
                     ("S<3,4,3>", "S<3,4,3>", 128 * d)]


def _aliased(b, bt, d: int) -> int:
    """How many (row, column) of a 128 x d tile (stage 1) the K-major layout b and the
    MN-major bt map to the same offset (plain Python: static layouts, outside the DSL's
    loop rewriting)."""
    return sum(cute.crd2idx(((r, c % 16), 0, c // 16, 1), b)
               == cute.crd2idx(((c, r % 16), 0, r // 16, 1), bt)
               for r in range(128) for c in range(d))


@pytest.mark.parametrize("name", BWD_SUBSET)
def test_bwd_variant_compiles(name):
    """One compile of the backward's host function: both kernels (dK/dV and dQ) in the cubin,
    within the register and shared-memory limits, no spills."""
    r = cached_compile("sm_100a", "bwd", name,
                       lambda: variants.compile_variant(name, kernel="bwd"))
    assert r["kernel_count"] == 2
    assert r["cubin_bytes"] > 10_000
    assert isinstance(r["registers"], int) and 0 < r["registers"] <= 255
    assert r["shared_memory_bytes"] <= 227 * 1024
    assert (r["spill_stores"], r["spill_loads"]) == (0, 0)


def test_bwd_variant_of_a_forward_name():
    from impls.attention.fa4.sm100.bwd_api import bwd_variant

    assert bwd_variant("bfloat16-d64-causal-none", 64) == "bfloat16-d64-causal-none"
    assert bwd_variant("float16-d96-causal-softcap-pingpong_persistent", 96) == (
        "float16-d96-causal-softcap")
    for name, dv in (("bfloat16-d64-causal-none", 128),  # Dv != D
                     ("bfloat16-d96-causal-none", 96),  # not a covering pair
                     ("bfloat16-d192-none-none", 192), ("bfloat16-d192v128-none-none", 128)):
        with pytest.raises(NotImplementedError):
            bwd_variant(name, dv)


def test_bwd_adapter_arguments_compile(tmp_path):
    """What the autograd backward hands to cute.compile (CPU tensors here) compiles: GQA 4:2,
    Sq != Sk, document mask with ALiBi."""
    import cutlass.cute as cute

    from impls.attention.fa4.sm100.bwd_api import bwd_launch_args

    geo = Geometry(batch=2, heads=4, sq=130, sk=70)
    masks, mods = _mods(geo)
    q = torch.zeros(2, 4, 130, 128, dtype=torch.float16)
    k = torch.zeros(2, 2, 70, 128, dtype=torch.float16)
    v = torch.zeros(2, 2, 70, 128, dtype=torch.float16)
    name, params = _variant(q, k, mods["alibi"], _BlockMask(masks["document"]))
    f32 = {"dtype": torch.float32}
    args = bwd_launch_args(name, params, q, k, v, torch.zeros_like(q), torch.zeros(2, 4, 130),
                           torch.zeros(2, 4, 130), torch.zeros(2, 4, 130, 128, **f32),
                           torch.zeros(2, 4, 70, 128, **f32), torch.zeros(2, 4, 70, 128, **f32),
                           0.125)
    compiled = cute.compile(variants.make_kernel(name, "bwd"), *args,
                            options=f"--gpu-arch sm_100a --keep-cubin --dump-dir {tmp_path}")
    assert len(compiled.__cubin__) > 10_000


def test_autograd_plumbing_with_stand_in_kernels(monkeypatch):
    """The torch side of the backward (autograd Function, Delta and L2, per-query-head dK/dV
    summed over GQA groups, rounding) with torch stand-ins for the two kernels: gradients
    match torch autograd of the same attention. The kernels themselves are not run here."""
    from impls.attention.fa4.sm100 import api, bwd_api

    def fwd(name, params, q, k, v, scale):
        g = q.shape[1] // k.shape[1]
        s = q.float() @ k.float().repeat_interleave(g, 1).transpose(-1, -2) * scale
        out = torch.softmax(s, -1) @ v.float().repeat_interleave(g, 1)
        return out.to(q.dtype), torch.logsumexp(s, -1)

    def kernels(q, k, v, do, l2, delta, dq, dk, dv, scale, c):  # spec bwd 2-5, no mask
        g = q.shape[1] // k.shape[1]
        kk, vv = k.float().repeat_interleave(g, 1), v.float().repeat_interleave(g, 1)
        p = torch.exp2(q.float() @ kk.transpose(-1, -2) * c - l2[..., None])
        ds = p * (do.float() @ vv.transpose(-1, -2) - delta[..., None])
        dq.copy_(ds @ kk * scale)
        dk.copy_(ds.transpose(-1, -2) @ q.float() * scale)
        dv.copy_(p.transpose(-1, -2) @ do.float())

    def launch_args(name, params, q, k, v, d_out, l2, delta, dq, dk, dv, scale):
        return q, k, v, d_out, l2, delta, dq, dk, dv, scale, scale * spec.LOG2E

    monkeypatch.setattr(api, "_forward", fwd)
    monkeypatch.setattr(bwd_api, "bwd_launch_args", launch_args)
    monkeypatch.setitem(bwd_api._CACHE, "float32-d64-none-none", kernels)
    monkeypatch.setattr(bwd_api, "bwd_variant", lambda name, dv: "float32-d64-none-none")
    monkeypatch.setattr(api, "_variant", lambda *a, **kw: ("float32-d64-none-none", {}))
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, h, s, 64, generator=gen, dtype=torch.float64)
               for h, s in ((4, 33), (2, 47), (2, 47)))
    leaves = [t.float().requires_grad_() for t in (q, k, v)]
    out = fa4_sm100(*leaves, scale=0.2, enable_gqa=True)
    grads = torch.autograd.grad((out * out).sum(), leaves)
    ref = [t.clone().requires_grad_() for t in (q, k, v)]
    ref_out = torch.nn.functional.scaled_dot_product_attention(*ref, scale=0.2, enable_gqa=True)
    ref_grads = torch.autograd.grad((ref_out * ref_out).sum(), ref)
    for got, want in zip(grads, ref_grads, strict=True):
        torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)


def test_bwd_ptx_has_the_stated_arithmetic(tmp_path):
    """PTX spot check of the backward (float16, D = 64, softcap): two kernels; S^T, dP^T,
    dV, dK (4 + 4 + 8 + 8 k-blocks) and S, dP, dQ (4 + 4 + 8) tcgen05 MMAs, the 24 of dV, dK
    and dQ with their A operand in TMEM; per kernel and tile element one div.rn for
    softcap's S * scale / cap and one for t = x / cap; P_r and dS_r by cvt.rn (two packed
    conversions per element pair)."""
    import re

    import cutlass.cute as cute

    name = "float16-d64-sliding_window-softcap"
    compiled = cute.compile(variants.make_kernel(name, "bwd"), *variants.fake_args(name, "bwd"),
                            options=f"--gpu-arch sm_100a --keep-ptx --dump-dir {tmp_path}")
    ptx = compiled.__ptx__
    elements = 2 * 128  # columns per row, both kernels
    assert ptx.count(".entry") == 2
    assert len(re.findall(r"tcgen05\.mma\.\S+ \[%r\d+\], ", ptx)) == 40
    assert len(re.findall(r"tcgen05\.mma\.\S+ \[%r\d+\], \[%r\d+\]", ptx)) == 24
    assert ptx.count("div.rn.f32") == 2 * elements
    assert ptx.count("cvt.rn.f16x2.f32") == elements
    assert ptx.count("tcgen05.alloc") == ptx.count("tcgen05.dealloc") == 2
