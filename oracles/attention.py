"""Scaled dot-product attention with FlexAttention semantics, forward and backward, in
float64 numpy. Torch-free: score and mask modifications come in as numpy arrays.

Shapes: q (B, Hq, Sq, D), k (B, Hkv, Sk, D), v (B, Hkv, Sk, Dv), Hq a multiple of Hkv; query
head h reads key/value head h // (Hq // Hkv) (GQA/MQA).

Semantics (as FlexAttention's):
- scores s = scale * q k^T (scale defaults to 1/sqrt(D)), then the score modification
  s' = f(s) elementwise, then the mask: masked scores are -inf.
- out = softmax(s') v, lse = log(sum(exp(s'))) in natural-log units.
- A fully masked row (every key masked) gives out = 0 and lse = -inf, and no gradient.
  (SDPA's math backend also returns 0 for such rows; backends that return NaN there
  differ, and declare so.)

Precision: every function computes in ``work`` precision, float64 by default. For float64
inputs a float64 oracle is no more precise than the implementation under test, so callers
pass ``work=np.longdouble`` (80-bit extended on x86-64 Linux: 11 more mantissa bits).

Backward, with P the probabilities and dO the output gradient:
    dV = P^T dO,  dP = dO V^T,  dS' = P * (dP - rowsum(dO * O)),  dS = dS' * f'(s),
    dQ = scale * dS K,  dK = scale * dS^T Q,
and GQA sums dK, dV over the query heads that share a key/value head.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Forward:
    out: np.ndarray  # (B, Hq, Sq, Dv)
    lse: np.ndarray  # (B, Hq, Sq), natural log, -inf on fully masked rows
    probs: np.ndarray  # (B, Hq, Sq, Sk)
    score_max: float  # max |s'| over unmasked scores: exp's condition number in softmax
    out_terms: float | None = None  # max of P |V|: the magnitude of what an output sums

    @property
    def lse_terms(self) -> float:
        """The magnitude of what lse sums: max |s'| plus log(Sk)."""
        return self.score_max + float(np.log(max(self.probs.shape[-1], 1)))


@dataclass(frozen=True)
class Grads:
    dq: np.ndarray
    dk: np.ndarray
    dv: np.ndarray
    terms: dict[str, float] | None = None  # per gradient: the magnitude of what it sums


def _check_shapes(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> int:
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError("q, k, v must be (B, H, S, D)")
    b, hq, _, d = q.shape
    if k.shape[0] != b or v.shape[0] != b or k.shape[1] != v.shape[1]:
        raise ValueError(f"batch/head mismatch: q {q.shape}, k {k.shape}, v {v.shape}")
    if k.shape[3] != d or k.shape[2] != v.shape[2]:
        raise ValueError(f"q/k head dim or k/v length mismatch: {q.shape}, {k.shape}, {v.shape}")
    hkv = k.shape[1]
    if hkv == 0 or hq % hkv:
        raise ValueError(f"Hq={hq} is not a multiple of Hkv={hkv}")
    return hq // hkv


def expand_kv(x: np.ndarray, group: int) -> np.ndarray:
    """(B, Hkv, S, D) -> (B, Hkv * group, S, D): query head h uses kv head h // group."""
    return np.repeat(x, group, axis=1)


def reduce_kv(x: np.ndarray, group: int) -> np.ndarray:
    """The adjoint of expand_kv: sum the ``group`` query heads of each kv head."""
    b, h, s, d = x.shape
    return x.reshape(b, h // group, group, s, d).sum(axis=2)


def raw_scores(q: np.ndarray, k: np.ndarray, scale: float | None = None,
               work: type = np.float64) -> np.ndarray:
    """scale * q k^T, (B, Hq, Sq, Sk), in ``work`` precision."""
    q = np.asarray(q, work)
    k = np.asarray(k, work)
    group = _check_shapes(q, k, k)
    scale = 1 / np.sqrt(work(q.shape[-1])) if scale is None else work(scale)
    return scale * np.matmul(q, np.swapaxes(expand_kv(k, group), -1, -2))


def forward(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, *, scale: float | None = None,
    modified_scores: np.ndarray | None = None, mask: np.ndarray | None = None,
    work: type = np.float64, terms: bool = False,
) -> Forward:
    """Attention forward. ``modified_scores`` is f(raw_scores) if a score modification
    applies; ``mask`` is a boolean array broadcastable to (B, Hq, Sq, Sk), True = attend.
    ``terms`` also returns the magnitude of the summed terms (for error bounds)."""
    q, k, v = (np.asarray(t, work) for t in (q, k, v))
    group = _check_shapes(q, k, v)
    s = (raw_scores(q, k, scale, work) if modified_scores is None
         else np.array(modified_scores, work))  # a private copy: modified in place below
    if mask is not None:
        np.copyto(s, -np.inf, where=~np.broadcast_to(mask, s.shape))
    row_max = s.max(axis=-1, keepdims=True, initial=-np.inf)
    empty = ~np.isfinite(row_max)  # fully masked row (or no keys at all)
    row_min = s.min(axis=-1, keepdims=True, initial=np.inf, where=np.isfinite(s))
    finite_max = np.where(empty, 0.0, np.maximum(np.abs(row_max), np.abs(row_min)))
    score_max = float(finite_max.max(initial=0.0))
    s -= np.where(empty, 0.0, row_max)
    probs = np.exp(s, out=s)  # exp(-inf) = 0 for masked entries and empty rows
    total = probs.sum(axis=-1, keepdims=True)
    probs /= np.where(empty, 1.0, total)
    with np.errstate(divide="ignore"):
        lse = np.where(empty, -np.inf, row_max + np.log(np.where(empty, 1.0, total)))[..., 0]
    ve = expand_kv(v, group)
    out = np.matmul(probs, ve)
    out_terms = float(np.matmul(probs, np.abs(ve)).max(initial=0.0)) if terms else None
    return Forward(out, lse, probs, score_max, out_terms)


def backward(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, d_out: np.ndarray, fwd: Forward, *,
    scale: float | None = None, score_derivative: np.ndarray | None = None,
    work: type = np.float64, terms: bool = False,
) -> Grads:
    """Gradients of sum(out * d_out) with respect to q, k, v. ``score_derivative`` is
    f'(raw scores) for a score modification f (1 where none applies). ``terms`` also
    returns the magnitude of the summed terms of each gradient (for error bounds)."""
    q, k, v, d_out = (np.asarray(t, work) for t in (q, k, v, d_out))
    group = _check_shapes(q, k, v)
    scale = 1 / np.sqrt(work(q.shape[-1])) if scale is None else work(scale)
    p = fwd.probs
    ve, ke = expand_kv(v, group), expand_kv(k, group)
    dv = reduce_kv(np.matmul(np.swapaxes(p, -1, -2), d_out), group)
    ds = np.matmul(d_out, np.swapaxes(ve, -1, -2))  # dP, then dS in place
    ds -= (d_out * fwd.out).sum(axis=-1, keepdims=True)
    ds *= p
    deriv = None
    if score_derivative is not None:
        deriv = np.where(p > 0, score_derivative, 0.0)  # f' only where probability flows
        ds *= deriv
    dq = scale * np.matmul(ds, ke)
    dk = reduce_kv(scale * np.matmul(np.swapaxes(ds, -1, -2), q), group)
    if not terms:
        return Grads(dq, dk, dv)
    # The same sums with every term replaced by its magnitude (as |A||B| for a product):
    # rounding errors of a correct kernel scale with these, even where a gradient cancels
    # to zero (one key, or a softmax row whose gradient sums to nothing).
    ds_terms = np.matmul(np.abs(d_out), np.swapaxes(np.abs(ve), -1, -2))
    ds_terms += (np.abs(d_out) * np.abs(fwd.out)).sum(axis=-1, keepdims=True)
    ds_terms *= p
    if deriv is not None:
        ds_terms *= np.abs(deriv)
    return Grads(dq, dk, dv, {
        "dq": float(abs(scale) * np.matmul(ds_terms, np.abs(ke)).max(initial=0.0)),
        "dk": float(abs(scale) * np.matmul(np.swapaxes(ds_terms, -1, -2), np.abs(q))
                    .max(initial=0.0)),
        "dv": float(np.matmul(np.swapaxes(p, -1, -2), np.abs(d_out)).max(initial=0.0)),
    })
