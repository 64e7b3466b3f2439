"""Torch-facing entry point of the sm100 forward (suite contract, see impls/attention).

``fa4_sm100(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
return_lse=False)`` with q (B, Hq, Sq, D), k (B, Hkv, Sk, D), v (B, Hkv, Sk, Dv), fp16/bf16;
(D, Dv) = (64, 64) or (128, 128) with every mask and score_mod; (96, 96), (192, 192) and
(192, 128) with the compile-checked (mask, score_mod) pairs of catalogue_map.COVER_PAIRS only
(declared as such: ``conformance_limits`` from catalogue_map.shape_limits, with the backward
at the head dims bwd.py compiles, ``backward_head_dims``; docs/contracts.md). The schedule
(single, persistent, ping-pong) is the first compile-checked one in ``PREFERENCE``.
Masks and score_mods are recognised through the catalogue's ``conformance_kind`` /
``conformance_params``; anything else raises NotImplementedError. Differentiable in q, k, v
(bwd_api.py: the dK/dV and dQ kernels of bwd.py); no gradient through lse.

Written against the CuTe DSL runtime (from_dlpack, compiled-function call) but never run
here: this machine has no GPU. The kernel itself is compile-checked (variants.py).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from impls.attention.fa4.catalogue_map import recognise, shape_limits
from impls.attention.fa4.sm100.bwd_api import backward
from impls.attention.fa4.sm100.launch import dyn, ready
from impls.attention.fa4.sm100.variants import BWD_HEAD_DIMS

_CACHE: dict[str, Any] = {}


def _variant(q: torch.Tensor, k: torch.Tensor, score_mod: Any, block_mask: Any,
             dv: int | None = None) -> tuple[str, dict]:
    """Map the call to (variant name without schedule, runtime parameters), or raise
    NotImplementedError; ``dv``: v's head dim (default D). The name is accepted only if it,
    or a scheduled form of it, is compile-checked (variants.VARIANTS)."""
    from impls.attention.fa4.sm100.variants import FITS, variant_name

    if q.dtype not in (torch.float16, torch.bfloat16):
        raise NotImplementedError(f"fa4_sm100 supports float16/bfloat16, not {q.dtype}")
    d = q.shape[-1]
    dv = d if dv is None else dv
    if (d, dv) not in FITS:
        raise NotImplementedError(f"fa4_sm100 supports (D, Dv) in {sorted(FITS)}, not "
                                  f"({d}, {dv})")
    mask, mod, params = recognise(q, k, score_mod, block_mask, "fa4_sm100")
    dt = "float16" if q.dtype == torch.float16 else "bfloat16"
    name = variant_name(dt, d, dv, mask, mod)
    scheduled(name)  # NotImplementedError unless compile-checked in some schedule
    return name, params


# The adapter's preference among the compile-checked schedules of a variant.
PREFERENCE = ("pingpong_persistent", "persistent", "pingpong", "single")


def scheduled(name: str) -> str:
    """The compile-checked variant that runs ``name`` (no schedule suffix): the first of
    PREFERENCE that variants.VARIANTS lists; NotImplementedError if none."""
    from impls.attention.fa4.sm100.variants import VARIANTS

    for schedule in PREFERENCE:
        candidate = name if schedule == "single" else f"{name}-{schedule}"
        if candidate in VARIANTS:
            return candidate
    dims = name.split("-")[1]
    pairs = sorted({"-".join(v.split("-")[2:4]) for v in VARIANTS if v.split("-")[1] == dims})
    raise NotImplementedError(f"fa4_sm100: {name} is not a compile-checked variant; at {dims} "
                              f"the (mask-score_mod) pairs are {pairs}")


def fa4_sm100(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
              return_lse=False):
    """FA4-style forward on Blackwell (sm_100a); returns out, or (out, lse) with lse natural-log
    (B, Hq, Sq) fp32."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k, v must be (B, H, S, D)")
    if not (q.dtype == k.dtype == v.dtype):
        raise NotImplementedError("fa4_sm100 needs q, k, v of one dtype")
    if k.shape[-1] != q.shape[-1]:
        raise ValueError("q and k must have the same head dim")
    hq, d, hkv = q.shape[1], q.shape[3], k.shape[1]
    if hq != hkv and not (enable_gqa and hq % hkv == 0):
        raise ValueError(f"Hq={hq}, Hkv={hkv} needs enable_gqa=True and Hq % Hkv == 0")
    name, params = _variant(q, k, score_mod, block_mask, v.shape[-1])
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        out, lse = _Fa4Sm100.apply(q, k, v, name, params, scale)
    else:
        out, lse = _forward(name, params, q, k, v, scale)
    return (out, lse) if return_lse else out


def _forward(name: str, params: dict, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    """out (q's dtype) and lse (natural log, fp32) from the forward kernel."""
    b, hq, sq, _ = q.shape
    sk = k.shape[2]
    out = torch.empty((*q.shape[:3], v.shape[-1]), dtype=q.dtype, device=q.device)
    lse = torch.empty((b, hq, sq), dtype=torch.float32, device=q.device)
    if sq == 0 or b == 0 or hq == 0:
        return out, lse
    if sk == 0:  # nothing to attend to: every row is fully masked (spec fwd 7)
        out.zero_()
        lse.fill_(-math.inf)
        return out, lse

    name, args = launch_args(name, params, q, k, v, out, lse, scale)
    if name not in _CACHE:
        import cutlass.cute as cute

        from impls.attention.fa4.sm100.variants import make_kernel

        _CACHE[name] = cute.compile(make_kernel(name), *args, options="--gpu-arch sm_100a")
    _CACHE[name](*args)
    return out, lse


class _Fa4Sm100(torch.autograd.Function):
    """Forward kernel, saving out and lse; backward: bwd_api.backward (both kernels)."""

    @staticmethod
    def forward(ctx, q, k, v, name, params, scale):
        out, lse = _forward(name, params, q, k, v, scale)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.name, ctx.params, ctx.scale = name, params, scale
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, d_out, d_lse):
        if d_lse is not None and bool(torch.any(d_lse != 0)):
            raise NotImplementedError("fa4_sm100 has no gradient through lse")
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = backward(ctx.name, ctx.params, q, k, v, out, lse,
                              d_out.contiguous(), ctx.scale)
        return dq, dk, dv, None, None, None


def launch_args(name: str, params: dict, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                out: torch.Tensor, lse: torch.Tensor, scale: float) -> tuple[str, tuple]:
    """The compile-checked variant that runs ``name`` (``scheduled``) and its arguments
    (Fa4Sm100Forward.__call__ order) as CuTe DSL runtime values. Works for CPU tensors too
    (compile-only checks): the stream is then a null CUstream and the SM count a B200's."""
    import cuda.bindings.driver as cuda
    import cutlass

    from impls.attention.fa4.sm100.fwd import exp_scale_for  # imports cutlass: keep lazy
    from impls.attention.fa4.sm100.scheduler import FakeHardwareInfo
    from impls.attention.fa4.sm100.variants import parse_variant

    dev = q.device
    slopes = params["alibi"].to(dev).contiguous() if params["alibi"] is not None else None
    doc_q = params["doc_q"].to(dev).contiguous() if params["doc_q"] is not None else None
    doc_kv = params["doc_kv"].to(dev).contiguous() if params["doc_kv"] is not None else None
    q, k, v = ready(q.detach()), ready(k.detach()), ready(v.detach())
    stream = (cuda.CUstream(torch.cuda.current_stream(dev).cuda_stream) if dev.type == "cuda"
              else cuda.CUstream(0))
    name = scheduled(name) if parse_variant(name).schedule == "single" else name
    sms = (torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda"
           else FakeHardwareInfo().get_device_multiprocessor_count())
    mod = parse_variant(name).mod
    return name, (dyn(q), dyn(k), dyn(v), dyn(out), dyn(lse), dyn(slopes), dyn(doc_q),
                  dyn(doc_kv), cutlass.Float32(scale),
                  cutlass.Float32(exp_scale_for(mod, scale)),
                  cutlass.Float32(params["softcap"]),
                  cutlass.Int32(params["window"]), cutlass.Int32(sms), stream)


fa4_sm100.conformance_name = "fa4.sm100"
fa4_sm100.conformance_devices = ["cuda"]
fa4_sm100.conformance_requires = ["cutlass-dsl", "sm100"]
fa4_sm100.conformance_dtypes = ["float16", "bfloat16"]
fa4_sm100.conformance_features = [
    "mask.causal_br", "mask.sliding_window", "mask.document", "score_mod.general.softcap",
    "score_mod.additive.alibi", "gqa", "scale", "lse", "fully_masked_rows", "backward",
    "dv_ne_d",
]
fa4_sm100.conformance_limits = {**shape_limits([64, 96, 128, 192]),
                                "backward_head_dims": list(BWD_HEAD_DIMS)}
