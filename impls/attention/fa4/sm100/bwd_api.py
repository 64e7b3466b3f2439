"""Torch side of the sm100 backward: spec bwd 1 (Delta, L2) in torch, the kernel launch
(dK/dV and dQ kernels, bwd.py), the GQA group sums and the final rounding.

Written against the CuTe DSL runtime (from_dlpack, compiled-function call) but never run
here: this machine has no GPU. ``bwd_launch_args`` also takes CPU tensors, for compile-only
checks (tests/test_fa4_sm100_compile.py).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from impls.attention.fa4 import spec
from impls.attention.fa4.sm100.launch import dyn, ready

_CACHE: dict[str, Any] = {}


def bwd_launch_args(name: str, params: dict, q: torch.Tensor, k: torch.Tensor,
                    v: torch.Tensor, d_out: torch.Tensor, l2: torch.Tensor,
                    delta: torch.Tensor, dq: torch.Tensor, dk: torch.Tensor, dv: torch.Tensor,
                    scale: float) -> tuple[Any, ...]:
    """Fa4Sm100Backward.__call__'s arguments as CuTe DSL runtime values (CPU tensors too; the
    stream is then a null CUstream). dq (B, Hq, Sq, D), dk / dv (B, Hq, Sk, D): fp32."""
    import cuda.bindings.driver as cuda
    import cutlass

    from impls.attention.fa4.sm100.fwd import exp_scale_for  # imports cutlass: keep lazy

    dev = q.device
    aux = [params[key].to(dev).contiguous() if params[key] is not None else None
           for key in ("alibi", "doc_q", "doc_kv")]
    q, k, v, d_out = (ready(t.detach()) for t in (q, k, v, d_out))
    stream = (cuda.CUstream(torch.cuda.current_stream(dev).cuda_stream) if dev.type == "cuda"
              else cuda.CUstream(0))
    mod = name.rsplit("-", 1)[1]
    return (dyn(q), dyn(k), dyn(v), dyn(d_out), dyn(l2.contiguous()),
            dyn(delta.contiguous()), dyn(dq), dyn(dk), dyn(dv), *map(dyn, aux),
            cutlass.Float32(scale), cutlass.Float32(exp_scale_for(mod, scale)),
            cutlass.Float32(params["softcap"]), cutlass.Int32(params["window"]), stream)


def bwd_variant(name: str, dv: int) -> str:
    """The backward variant of a forward variant name: dtype, D, mask and score_mod (the
    forward's schedule suffix, if any, does not apply); NotImplementedError where the backward
    has no kernel (Dv != D, D = 192, D = 96 outside the covering pairs: not in BWD_VARIANTS)."""
    from impls.attention.fa4.sm100.variants import BWD_VARIANTS, parse

    dt, d, mask, mod = parse(name)
    base = f"{dt}-d{d}-{mask}-{mod}"
    if dv != d or base not in BWD_VARIANTS:
        raise NotImplementedError(f"fa4_sm100 has no backward for {name} with Dv = {dv}")
    return base


def backward(name: str, params: dict, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
             out: torch.Tensor, lse: torch.Tensor, d_out: torch.Tensor,
             scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv in q's dtype. Spec bwd 1 here: Delta = rowsum(fp32(dO) * fp32(O)),
    L2 = lse * log2(e) (+inf where lse = -inf, fully masked rows); bwd 2-5 in the kernels;
    dK / dV come per query head in fp32 and each GQA group is summed in fp32, then rounded
    once to the dtype."""
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    name = bwd_variant(name, v.shape[-1])
    launch = min(b, hq, sq, sk) > 0
    new = torch.empty if launch else torch.zeros  # the kernels write every row (0 if dead)
    dq = new((b, hq, sq, d), dtype=torch.float32, device=q.device)
    dk = new((b, hq, sk, d), dtype=torch.float32, device=q.device)
    dv = new((b, hq, sk, d), dtype=torch.float32, device=q.device)
    if launch:
        delta = (d_out.float() * out.float()).sum(-1)
        l2 = torch.where(lse == -math.inf, math.inf, lse * spec.LOG2E)
        args = bwd_launch_args(name, params, q, k, v, d_out, l2, delta, dq, dk, dv, scale)
        if name not in _CACHE:
            import cutlass.cute as cute

            from impls.attention.fa4.sm100.variants import make_kernel

            _CACHE[name] = cute.compile(make_kernel(name, "bwd"), *args,
                                        options="--gpu-arch sm_100a")
        _CACHE[name](*args)
    g = hq // hkv
    dk = dk.view(b, hkv, g, sk, d).sum(2)
    dv = dv.view(b, hkv, g, sk, d).sum(2)
    return dq.to(q.dtype), dk.to(q.dtype), dv.to(q.dtype)
