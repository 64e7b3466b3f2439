"""Torch-facing entry point of the sm100 forward (suite contract, see impls/attention).

``fa4_sm100(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
return_lse=False)`` with q (B, Hq, Sq, D), k/v (B, Hkv, Sk, D), D in {64, 128}, fp16/bf16.
Masks and score_mods are recognised through the catalogue's ``conformance_kind`` /
``conformance_params``; anything else raises NotImplementedError. Forward only.

Written against the CuTe DSL runtime (from_dlpack, compiled-function call) but never run
here: this machine has no GPU. The kernel itself is compile-checked (variants.py).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from impls.attention.fa4.catalogue_map import recognise

_CACHE: dict[str, Any] = {}


def _variant(q: torch.Tensor, k: torch.Tensor, score_mod: Any, block_mask: Any) -> tuple[str, dict]:
    """Map the call to (variant name, runtime parameters), or raise NotImplementedError."""
    if q.dtype not in (torch.float16, torch.bfloat16):
        raise NotImplementedError(f"fa4_sm100 supports float16/bfloat16, not {q.dtype}")
    d = q.shape[-1]
    if d not in (64, 128):
        raise NotImplementedError(f"fa4_sm100 supports head dims 64 and 128, not {d}")
    mask, mod, params = recognise(q, k, score_mod, block_mask, "fa4_sm100")
    dt = "float16" if q.dtype == torch.float16 else "bfloat16"
    return f"{dt}-d{d}-{mask}-{mod}", params


def _ready(t: torch.Tensor) -> torch.Tensor:
    """Last dim contiguous, 16-byte aligned base and strides (TMA requirements)."""
    ok = (t.stride(-1) == 1 and t.data_ptr() % 16 == 0
          and all(s * t.element_size() % 16 == 0 for s in t.stride()[:-1]))
    return t if ok else t.contiguous()


def _dyn(t: torch.Tensor | None) -> Any:
    from cutlass.cute.runtime import from_dlpack

    if t is None:
        return None
    return from_dlpack(t, assumed_align=16 if t.dim() == 4 else 4).mark_layout_dynamic(
        leading_dim=t.dim() - 1)


def fa4_sm100(q, k, v, score_mod=None, block_mask=None, scale=None, enable_gqa=False,
              return_lse=False):
    """FA4-style forward on Blackwell (sm_100a); returns out, or (out, lse) with lse natural-log
    (B, Hq, Sq) fp32."""
    if q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        raise ValueError("q, k, v must be (B, H, S, D)")
    if not (q.dtype == k.dtype == v.dtype):
        raise NotImplementedError("fa4_sm100 needs q, k, v of one dtype")
    if v.shape[-1] != q.shape[-1] or k.shape[-1] != q.shape[-1]:
        raise NotImplementedError("fa4_sm100 needs Dv == D")
    b, hq, sq, d = q.shape
    hkv, sk = k.shape[1], k.shape[2]
    if hq != hkv and not (enable_gqa and hq % hkv == 0):
        raise ValueError(f"Hq={hq}, Hkv={hkv} needs enable_gqa=True and Hq % Hkv == 0")
    name, params = _variant(q, k, score_mod, block_mask)
    scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty((b, hq, sq), dtype=torch.float32, device=q.device)
    if sq == 0 or b == 0 or hq == 0:
        return (out, lse) if return_lse else out
    if sk == 0:  # nothing to attend to: every row is fully masked (spec fwd 7)
        out.zero_()
        lse.fill_(-math.inf)
        return (out, lse) if return_lse else out

    name, args = launch_args(name, params, q, k, v, out, lse, scale)
    if name not in _CACHE:
        import cutlass.cute as cute

        from impls.attention.fa4.sm100.variants import make_kernel

        _CACHE[name] = cute.compile(make_kernel(name), *args, options="--gpu-arch sm_100a")
    _CACHE[name](*args)
    return (out, lse) if return_lse else out


def launch_args(name: str, params: dict, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                out: torch.Tensor, lse: torch.Tensor, scale: float) -> tuple[str, tuple]:
    """The kernel's arguments (Fa4Sm100Forward.__call__ order) as CuTe DSL runtime values.
    Works for CPU tensors too (compile-only checks); the stream is then a null CUstream."""
    import cuda.bindings.driver as cuda
    import cutlass

    from impls.attention.fa4.sm100.fwd import exp_scale_for  # imports cutlass: keep lazy

    dev = q.device
    slopes = params["alibi"].to(dev).contiguous() if params["alibi"] is not None else None
    doc_q = params["doc_q"].to(dev).contiguous() if params["doc_q"] is not None else None
    doc_kv = params["doc_kv"].to(dev).contiguous() if params["doc_kv"] is not None else None
    q, k, v = _ready(q.detach()), _ready(k.detach()), _ready(v.detach())
    stream = (cuda.CUstream(torch.cuda.current_stream(dev).cuda_stream) if dev.type == "cuda"
              else cuda.CUstream(0))
    mod = name.rsplit("-", 1)[1]
    return name, (_dyn(q), _dyn(k), _dyn(v), _dyn(out), _dyn(lse), _dyn(slopes), _dyn(doc_q),
                  _dyn(doc_kv), cutlass.Float32(scale),
                  cutlass.Float32(exp_scale_for(mod, scale)),
                  cutlass.Float32(params["softcap"]),
                  cutlass.Int32(params["window"]), stream)


fa4_sm100.conformance_name = "fa4.sm100"
fa4_sm100.conformance_devices = ["cuda"]
fa4_sm100.conformance_requires = ["cutlass-dsl", "sm100"]
fa4_sm100.conformance_dtypes = ["float16", "bfloat16"]
fa4_sm100.conformance_features = [
    "mask.causal_br", "mask.sliding_window", "mask.document", "score_mod.general.softcap",
    "score_mod.additive.alibi", "gqa", "scale", "lse", "fully_masked_rows",
]
fa4_sm100.conformance_limits = {"head_dims": [64, 128]}
