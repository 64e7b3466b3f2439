"""``fa4_sm90``: our FA4-style CuTe DSL kernels for Hopper behind the suite's contract.

FlexAttention-style signature: q (B, Hq, Sq, D), k (B, Hkv, Sk, D), v (B, Hkv, Sk, Dv), lse in
natural log. Catalogue masks and score_mods are recognised by ``conformance_kind`` and their
parameters read from ``conformance_params``. Only the compile-checked variants run
(``variants.VARIANTS``: (D, Dv) in {64, 128} with every mask and score_mod; 96, 192 and
(192, 128) with a covering set of (mask, score_mod) pairs); anything else raises
NotImplementedError. Kernels are compiled once per variant on first use.

Written against the CuTe DSL runtime API but never run here (no GPU in this project's CI).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from impls.attention.fa4 import spec
from impls.attention.fa4.catalogue_map import recognise, shape_limits

if TYPE_CHECKING:  # common.py imports cutlass: only where a kernel is compiled or launched
    from impls.attention.fa4.sm90.common import Variant

_DTYPES = {torch.float16: "float16", torch.bfloat16: "bfloat16"}
# (D, Dv) of the compiled kernels (common.SHAPES, repeated here: common imports cutlass)
_SHAPES = ((64, 64), (128, 128), (96, 96), (192, 192), (192, 128))
_CACHE: dict[tuple[str, str], Any] = {}


def _recognise(q: torch.Tensor, k: torch.Tensor, score_mod: Any,
               block_mask: Any) -> tuple[str, str, dict[str, Any]]:
    """(mask, score_mod, runtime parameters) or NotImplementedError."""
    return recognise(q, k, score_mod, block_mask, "fa4_sm90")


def _check(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, enable_gqa: bool) -> None:
    if q.device.type != "cuda":
        raise NotImplementedError("fa4_sm90 runs on CUDA sm90 devices only")
    if torch.cuda.get_device_capability(q.device) != (9, 0):
        raise NotImplementedError("fa4_sm90 needs an sm90 (Hopper) GPU")
    _check_shapes(q, k, v, enable_gqa)


def _check_shapes(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, enable_gqa: bool) -> None:
    """dtypes, (D, Dv) and head counts the kernels take, or NotImplementedError."""
    if q.dtype not in _DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
        raise NotImplementedError(f"fa4_sm90 supports float16/bfloat16, got {q.dtype}")
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4 or v.shape[:3] != k.shape[:3]:
        raise NotImplementedError("fa4_sm90 expects (B, H, S, D) tensors")
    shape = (q.shape[-1], v.shape[-1])
    if k.shape[-1] != q.shape[-1] or shape not in _SHAPES:
        raise NotImplementedError(f"fa4_sm90 supports (D, Dv) in {list(_SHAPES)}, got (D of q, "
                                  f"D of k, Dv) = {(q.shape[-1], k.shape[-1], v.shape[-1])}")
    hq, hkv = q.shape[1], k.shape[1]
    if hq != hkv and (not enable_gqa or hq % hkv):
        raise NotImplementedError("query heads must equal kv heads, or be a multiple with GQA")
    if q.shape[0] != k.shape[0] or min(q.shape[2], k.shape[2]) == 0:
        raise NotImplementedError("fa4_sm90 needs equal batch sizes and non-empty sequences")


def _cute(t: torch.Tensor | None, align: int = 16) -> Any:
    if t is None:
        return None
    from cutlass.cute.runtime import from_dlpack
    return from_dlpack(t, assumed_align=align).mark_layout_dynamic(leading_dim=t.dim() - 1)


def _stream() -> Any:
    import cuda.bindings.driver as cuda
    return cuda.CUstream(torch.cuda.current_stream().cuda_stream)


def fwd_launch_args(q, k, v, o, lse, variant: Variant, scale: float, params: dict[str, Any],
                    stream: Any = None) -> tuple[Any, ...]:
    """What the forward kernel is compiled for and launched with: from_dlpack views with
    dynamic layouts, the scalars, the auxiliary tensors and the stream (the current CUDA
    stream by default; tests/test_fa4_sm90_compile.py compiles these for sm_90a from CPU
    tensors and the null stream)."""
    return (_cute(q), _cute(k), _cute(v), _cute(o), _cute(lse, 4),
            *_scalars(scale, variant, params), *_aux(params),
            _stream() if stream is None else stream)


def bwd_launch_args(q, k, v, d_out, l2, delta, dq, dk, dv, variant: Variant, scale: float,
                    params: dict[str, Any], stream: Any = None) -> tuple[Any, ...]:
    """As fwd_launch_args, for the backward kernel (l2: lse in log2, +inf where a row is
    fully masked; delta: rowsum(dO * O); dq, dk, dv: float32, per query head)."""
    return (_cute(q), _cute(k), _cute(v), _cute(d_out), _cute(l2, 4), _cute(delta, 4),
            _cute(dq, 4), _cute(dk, 4), _cute(dv, 4), *_scalars(scale, variant, params),
            *_aux(params), _stream() if stream is None else stream)


def _run(kernel: str, variant: Variant, args: tuple[Any, ...]) -> None:
    """Compile on first use (per variant and kernel), then launch."""
    key = (kernel, variant.name)
    if key not in _CACHE:
        import cutlass.cute as cute

        from impls.attention.fa4.sm90.variants import make_kernel
        _CACHE[key] = cute.compile(make_kernel(variant, kernel), *args,
                                   options="--gpu-arch sm_90a")
    _CACHE[key](*args)


def _scalars(scale: float, variant: Variant, params: dict[str, Any]) -> tuple[Any, ...]:
    import cutlass

    from impls.attention.fa4.sm90.common import exponent_scale

    c = exponent_scale(scale, variant.score_mod)  # spec fwd 2
    return (cutlass.Float32(scale), cutlass.Float32(c), cutlass.Int32(params["window"]),
            cutlass.Float32(params["softcap"]))


def _aux(params: dict[str, Any]) -> tuple[Any, ...]:
    return (_cute(params["alibi"], 4), _cute(params["doc_q"], 4), _cute(params["doc_kv"], 4))


def _variant(q: torch.Tensor, v: torch.Tensor, mask: str, mod: str) -> Variant:
    """The compile-checked variant for this call, or NotImplementedError."""
    from impls.attention.fa4.sm90.common import Variant
    from impls.attention.fa4.sm90.variants import BY_NAME

    variant = Variant(_DTYPES[q.dtype], q.shape[-1], mask, mod, v.shape[-1])
    if variant.name not in BY_NAME:
        raise NotImplementedError(
            f"fa4_sm90 has no compiled kernel {variant.name}: at (D, Dv) = {variant.shape} "
            f"only the (mask, score_mod) pairs none-none, causal-softcap, document-alibi and "
            f"sliding_window-none are compiled")
    return variant


def _forward(q, k, v, variant, scale, params):
    o = q.new_empty((*q.shape[:3], v.shape[-1]))
    lse = torch.empty(q.shape[:3], dtype=torch.float32, device=q.device)
    _run("fwd", variant, fwd_launch_args(q, k, v, o, lse, variant, scale, params))
    return o, lse


class _Fa4Sm90(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, variant, scale, params):
        o, lse = _forward(q, k, v, variant, scale, params)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.variant, ctx.scale, ctx.params = variant, scale, params
        ctx.mark_non_differentiable(lse)
        return o, lse

    @staticmethod
    def backward(ctx, d_out, d_lse):
        if d_lse is not None and bool(torch.any(d_lse != 0)):
            raise NotImplementedError("fa4_sm90 has no gradient through lse")
        from impls.attention.fa4.sm90.bwd import HAVE_BWD
        if not HAVE_BWD:
            raise NotImplementedError("fa4_sm90 backward kernel not available")
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, o, lse, d_out.contiguous(), ctx.variant, ctx.scale,
                               ctx.params)
        return dq, dk, dv, None, None, None


def _backward(q, k, v, o, lse, d_out, variant, scale, params):
    """Spec bwd 1 here (torch, fp32), bwd 2-5 in the kernels; GQA groups summed in fp32."""
    b, hq, sq, d = q.shape
    hkv, sk, d_v = k.shape[1], k.shape[2], v.shape[3]
    delta = (d_out.float() * o.float()).sum(-1)  # Delta = rowsum(fp32(dO) * fp32(O))
    l2 = torch.where(lse == -math.inf, math.inf, lse * spec.LOG2E)  # +inf: fully masked
    dq = torch.empty((b, hq, sq, d), dtype=torch.float32, device=q.device)
    dk = torch.empty((b, hq, sk, d), dtype=torch.float32, device=q.device)
    dv = torch.empty((b, hq, sk, d_v), dtype=torch.float32, device=q.device)
    _run("bwd", variant, bwd_launch_args(q, k, v, d_out, l2.contiguous(), delta.contiguous(),
                                         dq, dk, dv, variant, scale, params))
    g = hq // hkv  # dK/dV are per query head: sum each GQA group, then round once
    dk = dk.view(b, hkv, g, sk, d).sum(2)
    dv = dv.view(b, hkv, g, sk, d_v).sum(2)
    return dq.to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)


def fa4_sm90(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
             return_lse=False):
    _check(q, k, v, enable_gqa)
    mask, mod, params = _recognise(q, k, score_mod, block_mask)
    variant = _variant(q, v, mask, mod)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        out, lse = _Fa4Sm90.apply(q, k, v, variant, scale, params)
    else:
        out, lse = _forward(q, k, v, variant, scale, params)
    return (out, lse) if return_lse else out


fa4_sm90.conformance_name = "fa4.sm90"
fa4_sm90.conformance_devices = ["cuda"]
fa4_sm90.conformance_requires = ["cutlass-dsl", "sm90"]
fa4_sm90.conformance_dtypes = ["float16", "bfloat16"]
fa4_sm90.conformance_features = [
    "mask.causal_br", "mask.sliding_window", "mask.document", "score_mod.general.softcap",
    "score_mod.additive.alibi", "gqa", "scale", "lse", "fully_masked_rows", "backward",
    "dv_ne_d",
]
fa4_sm90.conformance_limits = shape_limits([64, 96, 128, 192])
