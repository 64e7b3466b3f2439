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

from conformance.attention.catalogue import MASKS, SCORE_MODS, Geometry
from impls.attention.fa4 import spec
from impls.attention.fa4.sm100 import variants
from impls.attention.fa4.sm100.api import _variant, fa4_sm100


def test_variant_list_is_the_full_product():
    assert len(variants.VARIANTS) == 2 * 2 * 4 * 3
    assert variants.parse("bfloat16-d64-sliding_window-alibi") == (
        "bfloat16", 64, "sliding_window", "alibi")


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
        _variant(torch.zeros(1, 2, 5, 96, dtype=torch.float16), k, None, None)


def test_capabilities_are_honest():
    assert fa4_sm100.conformance_devices == ["cuda"]
    assert fa4_sm100.conformance_requires == ["cutlass-dsl", "sm100"]
    assert fa4_sm100.conformance_limits == {"head_dims": [64, 128]}
    assert "backward" not in fa4_sm100.conformance_features
    assert "dv_ne_d" not in fa4_sm100.conformance_features


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
