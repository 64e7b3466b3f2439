"""Our Triton flash-attention path under the suite's attention contract.

Masks and score mods are the catalogue's (conformance/areas/attention/catalogue.py): the adapter
recognises them by ``conformance_kind`` and runs the matching Triton functions
(impls/attention/triton/mods.py) with their parameters packed into two small buffers.
Arbitrary torch callables are not compiled, and the capability declaration says so.

On a machine without CUDA the kernels run under Triton's interpreter (TRITON_INTERPRET=1,
set here before the kernels are defined) with guard regions around every tensor
(impls/attention/triton/guards.py), so out-of-bounds loads and stores are caught on CPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before any kernel is defined

try:
    from impls.attention.triton import mods
    from impls.attention.triton.blocks import tables, tile_mask
    from impls.attention.triton.bwd import attn_bwd_dkdv, attn_bwd_dq, attn_bwd_preprocess
    from impls.attention.triton.fwd import attn_fwd
    from impls.attention.triton.guards import Guarded, Unguarded
except ImportError as exc:  # no triton: the capability tag "triton" is then absent
    _MISSING = exc
    SCORE_MODS: dict = {}
    MASK_MODS: dict = dict.fromkeys(["causal_tl", "causal_br", "sliding_window", "prefix_lm",
                                     "document", "block_sparse"])
else:
    _MISSING = None
    SCORE_MODS = {None: (mods.no_score_mod, mods.unit_grad),
                  "alibi": (mods.alibi, mods.unit_grad),
                  "softcap": (mods.softcap, mods.softcap_grad),
                  "rel_bias": (mods.rel_bias, mods.unit_grad),
                  "bias_lookup": (mods.bias_lookup, mods.unit_grad),
                  "head_scale": (mods.head_scale, mods.head_scale_grad)}
    MASK_MODS = {None: mods.no_mask, "causal_tl": mods.causal_tl, "causal_br": mods.causal_br,
                 "sliding_window": mods.sliding_window, "prefix_lm": mods.prefix_lm,
                 "document": mods.document, "block_sparse": mods.block_sparse}

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


@dataclass
class Spec:
    """Which Triton mods to run and their packed parameters."""

    score_mod: Any
    score_grad: Any
    mask_mod: Any
    mask_fn: Any  # the torch mask_mod, for the block-sparsity table
    mask_kind: str | None
    auxf: torch.Tensor
    auxi: torch.Tensor


def _kind(fn: Any) -> str | None:
    if fn is None:
        return None
    kind = getattr(fn, "conformance_kind", None)
    if kind is None:
        raise NotImplementedError("triton_attention runs the catalogue's mods only "
                                  "(callables with conformance_kind)")
    return kind


def _pack(score_mod: Any, mask_fn: Any, device: torch.device) -> Spec:
    s_kind, m_kind = _kind(score_mod), _kind(mask_fn)
    if s_kind not in SCORE_MODS or m_kind not in MASK_MODS:
        raise NotImplementedError(f"no Triton version of score_mod {s_kind!r} / mask {m_kind!r}")
    floats: list[float] = []
    ints: list[int] = []
    sp = getattr(score_mod, "conformance_params", {})
    mp = getattr(mask_fn, "conformance_params", {})
    if s_kind == "alibi":
        floats = list(np.asarray(sp["slopes"], np.float32))
    elif s_kind == "softcap":
        floats = [sp["cap"]]
    elif s_kind == "rel_bias":
        floats = list(np.asarray(sp["table"], np.float32))
    elif s_kind == "bias_lookup":
        floats = list(np.asarray(sp["bias"], np.float32).ravel())
    elif s_kind == "head_scale":
        floats = list(np.asarray(sp["scales"], np.float32))
    if m_kind == "sliding_window":
        ints = [mp["window"]]
    elif m_kind == "prefix_lm":
        ints = [mp["prefix"]]
    elif m_kind == "document":
        ints = [*np.asarray(mp["doc_q"]).tolist(), *np.asarray(mp["doc_kv"]).tolist()]
    elif m_kind == "block_sparse":
        coarse, fine = np.asarray(mp["coarse"]), np.asarray(mp["fine"])
        dead = np.asarray(mp["dead_rows"]).tolist()
        ints = [dead[0], dead[-1], coarse.shape[1], coarse.shape[2], fine.shape[0],
                fine.shape[1], *coarse.astype(np.int32).ravel().tolist(),
                *fine.astype(np.int32).ravel().tolist()]
    score, grad = SCORE_MODS[s_kind]
    return Spec(score, grad, MASK_MODS[m_kind], mask_fn, m_kind,
                torch.tensor(floats or [0.0], dtype=torch.float32, device=device),
                torch.tensor(ints or [0], dtype=torch.int32, device=device))


def _blocks(d: int) -> tuple[int, int]:
    if INTERPRETED:
        return 32, 32
    return (64, 64) if d <= 128 else (32, 32)


def _pow2(n: int) -> int:
    return max(16, 1 << (n - 1).bit_length())


class _Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, spec: Spec, scale: float, fault: int):
        b, h, sq, d = q.shape
        hkv, sk, dv = k.shape[1], k.shape[2], v.shape[3]
        bm, bn = _blocks(max(d, dv))
        guard = Guarded() if INTERPRETED else Unguarded()
        qc, kc, vc = guard.copy("q", q), guard.copy("k", k), guard.copy("v", v)
        out = guard.empty("out", (b, h, sq, dv), q.dtype, q.device)
        lse = guard.empty("lse", (b, h, sq), torch.float32, q.device)
        tiles = tile_mask(spec.mask_fn, spec.mask_kind, b, h, sq, sk, bm, bn, q.device)
        kv_cnt, kv_idx, width = tables(tiles)
        grid = (tiles.shape[2], b * h)
        attn_fwd[grid](
            qc, kc, vc, out, lse, kv_cnt, kv_idx, spec.auxf, spec.auxi,
            qc.stride(0), qc.stride(1), qc.stride(2), kc.stride(0), kc.stride(1), kc.stride(2),
            vc.stride(0), vc.stride(1), vc.stride(2), out.stride(0), out.stride(1),
            out.stride(2), h, h // hkv, sq, sk, tiles.shape[2], width, scale,
            D=d, DV=dv, BLOCK_D=_pow2(d), BLOCK_DV=_pow2(dv), BLOCK_M=bm, BLOCK_N=bn,
            SCORE_MOD=spec.score_mod, MASK_MOD=spec.mask_mod, PRECISION="ieee", FAULT=fault)
        guard.check()
        ctx.save_for_backward(qc, kc, vc, out, lse)
        ctx.spec, ctx.scale, ctx.tiles, ctx.blocks = spec, scale, tiles, (bm, bn)
        return out.clone(), lse.clone()

    @staticmethod
    def backward(ctx, d_out, d_lse):
        if d_lse is not None and bool((d_lse != 0).any()):
            raise NotImplementedError("triton_attention has no gradient through lse")
        q, k, v, out, lse = ctx.saved_tensors
        spec, scale, tiles, (bm, bn) = ctx.spec, ctx.scale, ctx.tiles, ctx.blocks
        b, h, sq, d = q.shape
        hkv, sk, dv = k.shape[1], k.shape[2], v.shape[3]
        guard = Guarded() if INTERPRETED else Unguarded()
        do = guard.copy("d_out", d_out)
        delta = guard.empty("delta", (b, h, sq), torch.float32, q.device)
        dq = guard.empty("dq", tuple(q.shape), q.dtype, q.device)
        dk = guard.empty("dk", tuple(k.shape), k.dtype, k.device)
        dvv = guard.empty("dv", tuple(v.shape), v.dtype, v.device)
        consts = {"D": d, "DV": dv, "BLOCK_D": _pow2(d), "BLOCK_DV": _pow2(dv), "BLOCK_M": bm,
                  "BLOCK_N": bn, "SCORE_MOD": spec.score_mod, "SCORE_GRAD": spec.score_grad,
                  "MASK_MOD": spec.mask_mod, "PRECISION": "ieee"}
        attn_bwd_preprocess[(tiles.shape[2], b * h)](
            out, do, delta, out.stride(0), out.stride(1), out.stride(2), do.stride(0),
            do.stride(1), do.stride(2), h, sq, DV=dv, BLOCK_M=bm, BLOCK_DV=_pow2(dv))
        strides = (q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                   v.stride(0), v.stride(1), v.stride(2), do.stride(0), do.stride(1),
                   do.stride(2))
        q_cnt, q_idx, q_width = tables(tiles.transpose(2, 3))
        attn_bwd_dkdv[(tiles.shape[3], b * hkv)](
            q, k, v, do, lse, delta, dk, dvv, q_cnt, q_idx, spec.auxf, spec.auxi, *strides,
            dk.stride(0), dk.stride(1), dk.stride(2), dvv.stride(0), dvv.stride(1),
            dvv.stride(2), h, hkv, h // hkv, sq, sk, tiles.shape[3], q_width, scale, **consts)
        kv_cnt, kv_idx, kv_width = tables(tiles)
        attn_bwd_dq[(tiles.shape[2], b * h)](
            q, k, v, do, lse, delta, dq, kv_cnt, kv_idx, spec.auxf, spec.auxi, *strides,
            dq.stride(0), dq.stride(1), dq.stride(2), h, h // hkv, sq, sk, tiles.shape[2],
            kv_width, scale, **consts)
        guard.check()
        return dq.clone(), dk.clone(), dvv.clone(), None, None, None


def triton_attention(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
                     return_lse=False, *, fault: int = 0):
    if _MISSING is not None:
        raise NotImplementedError(f"triton is not installed ({_MISSING})")
    mask_fn = block_mask.mask_mod if block_mask is not None else None
    spec = _pack(score_mod, mask_fn, q.device)
    scale = 1.0 / float(q.shape[-1]) ** 0.5 if scale is None else float(scale)
    out, lse = _Attention.apply(q, k, v, spec, scale, fault)
    return (out, lse) if return_lse else out


triton_attention.conformance_name = "triton_fa"
# Interpreted, the start-up probe must show that the interpreter works with this numpy
# (conformance/harness/deps.py: triton < 3.7 cannot run with numpy >= 2.4).
triton_attention.conformance_requires = ["triton-interpreter" if INTERPRETED else "triton"]
triton_attention.conformance_dtypes = ["float16", "bfloat16", "float32"]
if INTERPRETED:  # a test of our kernel's logic, not of the device: opt-in (--emulated)
    triton_attention.conformance_emulation = "our Triton kernel in Triton's CPU interpreter"
triton_attention.conformance_features = [
    *(f"mask.{m}" for m in MASK_MODS if m),
    "score_mod.additive.alibi", "score_mod.additive.rel_bias",
    "score_mod.additive.bias_lookup", "score_mod.general.softcap",
    "score_mod.general.head_scale", "gqa", "dv_ne_d", "fully_masked_rows", "scale", "lse",
    "backward",
]
triton_attention.conformance_limits = {"head_dims": [16, 32, 64, 128, 256]}
if INTERPRETED:  # the interpreter runs every program in Python: keep CPU cases small
    triton_attention.conformance_limits["max_scores"] = 1 << 15
