"""An example adapter: TopK, GEMM, attention and one sampler written in numpy, plugged into
the suite under its torch contracts (docs/contracts.md).

The pattern for any array library that is not torch:

- **in**: the suite passes torch tensors (any strides, storage offsets, zero-size dims).
  ``np.from_dlpack(t.detach())`` views them without a copy; ``detach()`` because DLPack
  refuses a tensor that requires grad. numpy lives on the CPU, so every callable declares
  ``conformance_devices = ["cpu"]``.
- **out**: ``torch.from_dlpack(array)`` wraps the result without a copy. The result must
  have the contract's dtype and shape (``_to_torch`` below).
- **dtypes**: numpy has no bfloat16 (DLPack export of a bfloat16 tensor to numpy fails),
  so ``conformance_dtypes`` leaves it out and the suite reports those cases unsupported.
- **backward**: the attention backward checks call ``torch.autograd.grad`` on the output,
  which torch cannot trace through numpy. A ``torch.autograd.Function`` supplies it: its
  ``forward`` and ``backward`` both compute in numpy.

Run the suite on it (from the repository root)::

    PYTHONPATH=docs/examples pytest conformance/areas/topk --device=cpu --no-builtins \\
        --impl topk=numpy_adapter:numpy_topk

and likewise ``gemm=numpy_adapter:numpy_matmul``,
``attention=numpy_adapter:numpy_attention``,
``sampler.exponential=numpy_adapter:numpy_exponential``.
"""

from __future__ import annotations

import math
from typing import Any

import torch

try:
    import numpy as np
except ImportError as exc:  # numpy is the library being adapted: say so, plainly
    raise ImportError("docs/examples/numpy_adapter.py adapts numpy, which is not "
                      "installed (pip install numpy)") from exc

# numpy has float16/float32/float64 but no bfloat16.
FLOATS = ["float16", "float32", "float64"]
INTEGERS = ["int8", "uint8", "int32", "int64"]

# The precision each input dtype is computed in: float16 is widened to float32 (as GPU
# kernels accumulate), float32 and float64 are computed in their own precision.
WORK = {np.dtype(np.float16): np.float32, np.dtype(np.float32): np.float32,
        np.dtype(np.float64): np.float64}


def _to_numpy(t: torch.Tensor) -> np.ndarray:
    """A zero-copy numpy view of a CPU tensor (strides and offset kept)."""
    return np.from_dlpack(t.detach())


def _to_torch(a: np.ndarray | np.generic, dtype: np.dtype, device: torch.device) -> torch.Tensor:
    """A torch tensor of ``dtype`` holding ``a``. ``np.require`` makes it C-contiguous and
    writable (older numpy refuses to export a read-only array through DLPack); a 0-d
    result (numpy returns scalars for those) becomes a 0-d tensor."""
    a = np.require(np.asarray(a, dtype=dtype), requirements=["C", "W"])
    return torch.from_dlpack(a).to(device)


# --------------------------------------------------------------------------------- TopK
def numpy_topk(x: torch.Tensor, k: int, dim: int = -1, largest: bool = True,
               sorted: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """torch.topk in numpy: (values of x.dtype, int64 indices), both of x's shape with
    ``dim`` cut to k. NaN is larger than every number (numpy's sort puts NaN last, sign bit
    notwithstanding); -0.0 ties 0.0. Values are gathered from x, so they are x's bits."""
    a = _to_numpy(x)
    n = a.shape[dim] if a.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"selected index k out of range: k={k}, slice length {n}")
    if a.ndim == 0:
        # torch.topk on a 0-d tensor returns 0-d results (the value, index 0) for k = 0
        # as for k = 1
        return (_to_torch(a.copy(), a.dtype, x.device),
                _to_torch(np.int64(0), np.dtype(np.int64), x.device))
    axis = dim % a.ndim
    moved = np.moveaxis(a, axis, -1)
    order = np.argsort(moved, axis=-1, kind="stable")  # ascending, NaN last
    picked = order[..., ::-1][..., :k] if largest else order[..., :k]
    values = np.take_along_axis(moved, picked, axis=-1)
    # sorted=False permits any order; this returns the sorted one
    return (_to_torch(np.moveaxis(values, -1, axis), a.dtype, x.device),
            _to_torch(np.moveaxis(picked, -1, axis), np.dtype(np.int64), x.device))


numpy_topk.conformance_name = "example.numpy_topk"
numpy_topk.conformance_dtypes = FLOATS + INTEGERS
numpy_topk.conformance_devices = ["cpu"]


# --------------------------------------------------------------------------------- GEMM
def numpy_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """torch.matmul in numpy (np.matmul has the same rank and broadcasting rules), in the
    working precision (float32 accumulation for float16), rounded once to a's dtype."""
    x, y = _to_numpy(a), _to_numpy(b)
    work = WORK[x.dtype]
    c = np.matmul(x.astype(work, copy=False), y.astype(work, copy=False))
    return _to_torch(c, x.dtype, a.device)


numpy_matmul.conformance_name = "example.numpy_matmul"
numpy_matmul.conformance_dtypes = FLOATS
numpy_matmul.conformance_devices = ["cpu"]
numpy_matmul.conformance_features = ["2d", "batched", "broadcast"]


# ---------------------------------------------------------------------------- attention
def _expand(t: np.ndarray, group: int) -> np.ndarray:
    """(B, Hkv, S, D) -> (B, Hkv * group, S, D): query head h reads key/value head
    h // group."""
    return np.repeat(t, group, axis=1) if group > 1 else t


def _reduce(t: np.ndarray, group: int) -> np.ndarray:
    """The adjoint of ``_expand``: sum the gradients of the query heads of each group."""
    if group == 1:
        return t
    b, h, s, d = t.shape
    return t.reshape(b, h // group, group, s, d).sum(axis=2)


def _scores(q: np.ndarray, k: np.ndarray, scale: float, group: int) -> np.ndarray:
    return np.matmul(q, _expand(k, group).swapaxes(-1, -2)) * q.dtype.type(scale)


class _NumpyAttention(torch.autograd.Function):
    """Dense softmax attention; forward and backward in numpy, in the working precision.
    Outputs: out (B, Hq, Sq, Dv) in q's dtype, lse (B, Hq, Sq) natural log."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float,
                group: int) -> tuple[torch.Tensor, torch.Tensor]:
        qn, kn, vn = _to_numpy(q), _to_numpy(k), _to_numpy(v)
        work = WORK[qn.dtype]
        s = _scores(qn.astype(work, copy=False), kn.astype(work, copy=False), scale, group)
        m = s.max(axis=-1, keepdims=True)
        p = np.exp(s - m)
        row = p.sum(axis=-1, keepdims=True)
        out = np.matmul(p / row, _expand(vn.astype(work, copy=False), group))
        lse = (m + np.log(row))[..., 0]
        # lse: float32, or float64 for float64 inputs (FlexAttention's dtypes)
        lse_dtype = np.dtype(np.float64) if qn.dtype == np.float64 else np.dtype(np.float32)
        out_t = _to_torch(out, qn.dtype, q.device)
        lse_t = _to_torch(lse, lse_dtype, q.device)
        ctx.save_for_backward(q, k, v, lse_t)
        ctx.scale, ctx.group = scale, group
        return out_t, lse_t

    @staticmethod
    def backward(ctx: Any, d_out: torch.Tensor | None, d_lse: torch.Tensor | None
                 ) -> tuple[torch.Tensor | None, ...]:
        q, k, v, lse_t = ctx.saved_tensors
        scale, group = ctx.scale, ctx.group
        qn, kn, vn = _to_numpy(q), _to_numpy(k), _to_numpy(v)
        work = WORK[qn.dtype]
        qw, kw, vw = (a.astype(work, copy=False) for a in (qn, kn, vn))
        # P recomputed from the stored lse (as flash kernels do)
        p = np.exp(_scores(qw, kw, scale, group) - _to_numpy(lse_t).astype(work)[..., None])
        ds = np.zeros_like(p)
        dv = np.zeros(vw.shape, work)
        if d_out is not None:
            do = _to_numpy(d_out).astype(work)
            dp = np.matmul(do, _expand(vw, group).swapaxes(-1, -2))
            ds += p * (dp - (p * dp).sum(axis=-1, keepdims=True))
            dv = _reduce(np.matmul(p.swapaxes(-1, -2), do), group)
        if d_lse is not None:  # d lse / d s_ij = P_ij
            ds += p * _to_numpy(d_lse).astype(work)[..., None]
        dq = np.matmul(ds, _expand(kw, group)) * work(scale)
        dk = _reduce(np.matmul(ds.swapaxes(-1, -2), qw), group) * work(scale)
        return (_to_torch(dq, qn.dtype, q.device), _to_torch(dk, kn.dtype, k.device),
                _to_torch(dv, vn.dtype, v.device), None, None)


def numpy_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, score_mod: Any = None,
                    block_mask: Any = None, scale: float | None = None,
                    enable_gqa: bool = False, return_lse: bool = False) -> Any:
    """FlexAttention's contract, dense only: q (B, Hq, Sq, D), k (B, Hkv, Sk, D),
    v (B, Hkv, Sk, Dv) -> out (B, Hq, Sq, Dv), and lse (B, Hq, Sq) with return_lse."""
    if score_mod is not None or block_mask is not None:
        raise NotImplementedError("example.numpy_attention is dense: no score_mod, no mask")
    hq, hkv = q.shape[1], k.shape[1]
    if hq != hkv and (not enable_gqa or hq % hkv):
        raise ValueError(f"Hq = {hq} query heads with Hkv = {hkv} key/value heads need "
                         "enable_gqa=True and Hq divisible by Hkv")
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    out, lse = _NumpyAttention.apply(q, k, v, float(scale), hq // hkv)
    return (out, lse) if return_lse else out


numpy_attention.conformance_name = "example.numpy_attention"
numpy_attention.conformance_dtypes = FLOATS
numpy_attention.conformance_devices = ["cpu"]
numpy_attention.conformance_features = ["gqa", "dv_ne_d", "scale", "lse", "backward"]


# ------------------------------------------------------------------------------ sampler
def numpy_exponential(t: torch.Tensor, lambd: float = 1.0, *,
                      generator: torch.Generator | None = None) -> torch.Tensor:
    """Tensor.exponential_(lambd) in numpy: fills ``t`` in place (through a DLPack view,
    so a strided view's gaps stay untouched) and returns ``t`` itself.

    The stream comes from ``generator``: a numpy Generator is seeded with 63 bits drawn
    from it, so the same torch seed gives the same samples and each call advances it.
    Without a generator the seed comes from torch's global generator, as torch's own
    samplers draw from it."""
    if not lambd > 0:
        raise ValueError(f"exponential_ expects lambda > 0, got lambda = {lambd}")
    seed = int(torch.randint(0, 2**63 - 1, (), generator=generator))
    view = _to_numpy(t)  # writable; writes land in t's storage
    draws = np.random.default_rng(seed).exponential(1.0 / lambd, view.shape)
    with np.errstate(over="ignore"):  # float16 overflows to inf, as the law's rounding says
        view[...] = draws.astype(view.dtype)
    return t


numpy_exponential.conformance_name = "example.numpy_exponential"
numpy_exponential.conformance_dtypes = FLOATS
numpy_exponential.conformance_devices = ["cpu"]
