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

from conformance.areas.attention.cases import AttnCase, index_grid
from conformance.harness import memo
from conformance.harness.tensors import exact_numpy
from oracles import attention as oracle
from oracles import attention_bounds as bounds


@dataclass
class Reference:
    out: np.ndarray
    lse: np.ndarray
    dq: np.ndarray | None = None
    dk: np.ndarray | None = None
    dv: np.ndarray | None = None
    terms: dict[str, float] = field(default_factory=dict)  # magnitudes for atol
    score_error: dict[str, float] = field(default_factory=dict)  # score rounding, propagated


# The unit roundoff of a score's dot product: float32 accumulation for 16-bit and float32
# inputs (as every FlashAttention kernel, SDPA and FlexAttention backend does), float64 for
# float64. A kernel that accumulates scores in a lower precision is outside the bound.
ACCUMULATION_UNIT_ROUNDOFF = {torch.float16: 2.0**-24, torch.bfloat16: 2.0**-24,
                              torch.float32: 2.0**-24, torch.float64: 2.0**-53}


# SOFTCAP_EVAL: softcap's value cap * tanh(z / cap) may carry a relative error of the input
# dtype's unit roundoff u, as the plain baseline's own evaluation in that dtype does. Kernels
# evaluate tanh with a hardware approximation (tanh.approx.f32, relative error up to
# 2^-10.987; FA3, FA4 and our sm90 kernels), whose errors can share a sign over a row where
# the baseline's roundings average out, so r * baseline error alone does not cover them
# (tests/test_fa4_kernel_gaps.py: a correct sm90 kernel exceeded the float16 lse bound 2.7x
# at cap 2). The error u |x| on each modified score is carried like the scores' rounding,
# and the derivative a kernel computes from x, 1 - (x / cap)^2, moves by 2 u (x / cap)^2.
INPUT_UNIT_ROUNDOFF = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8,
                       torch.float32: 2.0**-24, torch.float64: 2.0**-53}


def _mods_on_scores(case: AttnCase, s: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """f(s), f'(s) and f''(s) for the case's score_mod f, evaluated by torch in float64 on
    the CPU. For extended-precision scores the part of s below float64 is carried to first
    order: f(s) = f(s64) + f'(s64) (s - s64)."""
    fn = case.score_mod_fn("cpu")
    if fn is None:
        return s, None, None
    s64 = s.astype(np.float64)
    score = torch.from_numpy(s64).requires_grad_(True)
    b, h, q, kv = index_grid(case.batch, case.hq, case.sq, case.sk)
    modded = fn(score, b, h, q, kv)
    (grad,) = torch.autograd.grad(modded.sum(), score, create_graph=True)
    if grad.requires_grad:
        (grad2,) = torch.autograd.grad(grad.sum(), score, allow_unused=True)
    else:
        grad2 = None  # f' does not depend on s: an additive (or constant-slope) mod
    f, df = modded.detach().numpy().astype(s.dtype), grad.detach().numpy().astype(s.dtype)
    d2f = None if grad2 is None else grad2.numpy().astype(s.dtype)
    return f + df * (s - s64.astype(s.dtype)), df, d2f


def work_precision(dtype: torch.dtype) -> type:
    """float64, or extended precision for float64 inputs (where the platform has it)."""
    return np.longdouble if dtype == torch.float64 else np.float64


def oracle_reference(case: AttnCase, q, k, v, d_out=None) -> Reference:
    """The oracle from the exact input values (and dO for the backward pass)."""
    work = work_precision(case.dtype)
    q64, k64, v64 = exact_numpy(q), exact_numpy(k), exact_numpy(v)
    s = oracle.raw_scores(q64, k64, case.scale, work)
    modded, deriv, deriv2 = _mods_on_scores(case, s)
    fwd = oracle.forward(q64, k64, v64, scale=case.scale, modified_scores=modded,
                         mask=case.dense_mask, work=work, terms=True)
    # Probabilities computed from scores of magnitude |s'| carry a relative error of about
    # eps * |s'| (exp's condition number), whatever the algorithm; hence the (1 + max|s'|).
    amplify = 1.0 + fwd.score_max
    # The scores' own rounding (a D-term dot product), carried through softmax and the
    # gradients: oracles/attention_bounds.py. A bound needs no extended precision: float64
    # (numpy's longdouble matmul has no BLAS and would dominate a float64 case).
    f64 = np.float64
    probs, out = np.asarray(fwd.probs, f64), np.asarray(fwd.out, f64)
    raw_delta = bounds.raw_score_error(q64, k64, case.scale,
                                       ACCUMULATION_UNIT_ROUNDOFF[case.dtype])
    d1 = None if deriv is None else np.asarray(deriv, f64)
    d2 = None if deriv2 is None else np.asarray(deriv2, f64)
    delta = raw_delta if d1 is None else np.abs(d1) * raw_delta
    deriv_error = None
    if case.score_mod == "softcap":  # the mod's own evaluation: see SOFTCAP_EVAL
        x = np.abs(np.asarray(modded, f64))
        u = INPUT_UNIT_ROUNDOFF[case.dtype]
        delta = delta + u * x
        deriv_error = 2 * u * (x / case.params["score_mod"]["cap"]) ** 2
    ref = Reference(fwd.out, fwd.lse,
                    terms={"out": amplify * fwd.out_terms, "lse": fwd.lse_terms},
                    score_error=bounds.forward_bounds(probs, out, v64, delta))
    if d_out is not None:
        do64 = exact_numpy(d_out)
        g = oracle.backward(q64, k64, v64, do64, fwd, scale=case.scale,
                            score_derivative=deriv, work=work, terms=True)
        ref.dq, ref.dk, ref.dv = g.dq, g.dk, g.dv
        ref.terms.update({k: amplify * t for k, t in g.terms.items()})
        ref.score_error.update(bounds.backward_bounds(
            probs, out, q64, k64, v64, do64, delta, scale=case.scale, deriv=d1, deriv2=d2,
            raw_delta=raw_delta, deriv_error=deriv_error))
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


def references(case: AttnCase, q, k, v, d_out=None) -> tuple[Reference, Reference]:
    """(oracle_reference, baseline) of a case, memoised for the session
    (conformance/harness/memo.py): the implementations of the area share them. The key is
    the inputs' bytes, the case's parameters (the mask's and score mod's drawn values too: a
    test may set them, as test_process_history's caps) and the device, so a hit is what the
    computation returns."""
    drawn = [part for group, values in sorted(case.params.items())
             for name, value in sorted(values.items())
             for part in (f"{group}.{name}", np.asarray(value))]
    address = memo.key("attention.references/2", sorted(case.describe().items()), *drawn,
                       str(q.device), q, k, v, d_out)
    return memo.get_or_compute(address, lambda: (oracle_reference(case, q, k, v, d_out),
                                                 baseline(case, q, k, v, d_out)))
