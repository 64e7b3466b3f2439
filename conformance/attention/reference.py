"""The two references of the FlashAttention tolerance rule for one case:

- the oracle: float64 on the CPU (``oracles.attention``), with the case's score_mod and
  mask_mod evaluated on float64 CPU index grids (the score_mod differentiated by autograd);
- the baseline: a plain attention in the input precision on the device (matmul, mask,
  softmax, matmul), whose error against the oracle calibrates the tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from conformance.attention.cases import AttnCase, index_grid
from conformance.tensors import exact_numpy
from oracles import attention as oracle


@dataclass
class Reference:
    out: np.ndarray
    lse: np.ndarray
    dq: np.ndarray | None = None
    dk: np.ndarray | None = None
    dv: np.ndarray | None = None
    terms: dict[str, float] = field(default_factory=dict)  # magnitudes for atol


def _mods_on_scores(case: AttnCase, s: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """f(s) and f'(s) for the case's score_mod f, evaluated by torch in float64 on the CPU.
    For extended-precision scores the part of s below float64 is carried to first order:
    f(s) = f(s64) + f'(s64) (s - s64)."""
    fn = case.score_mod_fn("cpu")
    if fn is None:
        return s, None
    s64 = s.astype(np.float64)
    score = torch.from_numpy(s64).requires_grad_(True)
    b, h, q, kv = index_grid(case.batch, case.hq, case.sq, case.sk)
    modded = fn(score, b, h, q, kv)
    (grad,) = torch.autograd.grad(modded.sum(), score)
    f, df = modded.detach().numpy().astype(s.dtype), grad.numpy().astype(s.dtype)
    return f + df * (s - s64.astype(s.dtype)), df


def work_precision(dtype: torch.dtype) -> type:
    """float64, or extended precision for float64 inputs (where the platform has it)."""
    return np.longdouble if dtype == torch.float64 else np.float64


def oracle_reference(case: AttnCase, q, k, v, d_out=None) -> Reference:
    """The oracle from the exact input values (and dO for the backward pass)."""
    work = work_precision(case.dtype)
    q64, k64, v64 = exact_numpy(q), exact_numpy(k), exact_numpy(v)
    s = oracle.raw_scores(q64, k64, case.scale, work)
    modded, deriv = _mods_on_scores(case, s)
    fwd = oracle.forward(q64, k64, v64, scale=case.scale, modified_scores=modded,
                         mask=case.dense_mask, work=work, terms=True)
    # Probabilities computed from scores of magnitude |s'| carry a relative error of about
    # eps * |s'| (exp's condition number), whatever the algorithm; hence the (1 + max|s'|).
    amplify = 1.0 + fwd.score_max
    ref = Reference(fwd.out, fwd.lse,
                    terms={"out": amplify * fwd.out_terms, "lse": fwd.lse_terms})
    if d_out is not None:
        g = oracle.backward(q64, k64, v64, exact_numpy(d_out), fwd, scale=case.scale,
                            score_derivative=deriv, work=work, terms=True)
        ref.dq, ref.dk, ref.dv = g.dq, g.dk, g.dv
        ref.terms.update({k: amplify * t for k, t in g.terms.items()})
    return ref


def baseline(case: AttnCase, q, k, v, d_out=None) -> Reference:
    """Plain attention in the input dtype on the device (autograd for the gradients)."""
    group = case.hq // case.hkv
    grads = d_out is not None
    qb, kb, vb = (t.detach().clone().requires_grad_(grads) for t in (q, k, v))
    scale = case.scale if case.scale is not None else 1.0 / np.sqrt(case.d)
    ke = kb.repeat_interleave(group, dim=1)
    ve = vb.repeat_interleave(group, dim=1)
    s = torch.matmul(qb, ke.transpose(-1, -2)) * scale
    fn = case.score_mod_fn(q.device)
    if fn is not None:
        b, h, qi, kvi = (t.to(q.device) for t in index_grid(case.batch, case.hq, case.sq,
                                                            case.sk))
        s = fn(s, b, h, qi, kvi).to(q.dtype)
    if case.dense_mask is not None:
        keep = torch.from_numpy(case.dense_mask).to(q.device)
        s = s.masked_fill(~keep, float("-inf"))
    empty = torch.isneginf(s).all(dim=-1, keepdim=True)
    s_safe = s.masked_fill(empty, 0.0)
    p = torch.softmax(s_safe, dim=-1).masked_fill(empty, 0.0)
    out = torch.matmul(p, ve)
    lse = torch.logsumexp(s.float(), dim=-1)
    ref = Reference(exact_numpy(out), exact_numpy(lse))
    if grads:
        dq, dk, dv = torch.autograd.grad(out, (qb, kb, vb), d_out)
        ref.dq, ref.dk, ref.dv = exact_numpy(dq), exact_numpy(dk), exact_numpy(dv)
    return ref
