"""How far rounding in the scores themselves can move attention's results: a first-order
forward-error bound, in float64 numpy (torch-free).

A kernel computes each raw score s = scale * sum_d q_d k_d as a D-term dot product in its
accumulation precision (unit roundoff u). Whatever the summation order (sequential, pairwise,
tiled, FMA), the rounded score obeys

    |fl(s) - s| <= gamma_D * |scale| * sum_d |q_d k_d|,   gamma_D = D u / (1 - D u)

(Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 3.5 and sec. 3.1):
the bound scales with the magnitude of the terms, not with |s|, so a score that cancels
(or a single key) is still uncertain at the terms' scale. This module carries such a
perturbation, delta_ij on the modified score s'_ij = f(s_ij) (delta = |f'(s)| times the bound
above), through softmax, out, lse and the three gradients, to first order, with every
term taken in magnitude (as |A||B| in a GEMM bound):

    dP_ij = P_ij (ds'_ij - m_i),            m_i = sum_k P_ik ds'_ik
    |d out_i| <= sum_j P_ij delta_ij |v_j - out_i| <= (P o delta) |V| + |out_i| M_i
    |d lse_i| <= M_i = sum_j P_ij delta_ij
    dV = P^T dO;  D_i = rowsum(dO o out);  dS' = P o (dO V^T - D);  dS = dS' o f'(s)
    dQ = scale dS K;  dK = scale dS^T Q

with |dP_ij| <= P_ij (delta_ij + M_i) (which also covers a backward pass that recomputes
P from a stored lse: its own score error and the forward's lse error), the change of
f'(s) itself through f''(s), and (``deriv_error``) an error in f'(s) as a kernel evaluates
it. delta may also hold the score modification's own evaluation error (softcap's tanh:
conformance/areas/attention/reference.py). The results are the maximum bound per tensor,
in the units of that tensor, for an absolute tolerance.
"""

from __future__ import annotations

import numpy as np

from oracles.attention import expand_kv, raw_scores, reduce_kv


def gamma(n: int, unit_roundoff: float) -> float:
    """gamma_n = n u / (1 - n u): the relative error bound of an n-term dot product."""
    nu = n * unit_roundoff
    if nu >= 1:
        raise ValueError(f"gamma_{n} undefined for u = {unit_roundoff:g} (n u >= 1)")
    return nu / (1 - nu)


def raw_score_error(q: np.ndarray, k: np.ndarray, scale: float | None, unit_roundoff: float,
                    work: type = np.float64) -> np.ndarray:
    """gamma_D |scale| |q| |k|^T, (B, Hq, Sq, Sk): the bound on each raw score's rounding
    for a dot product accumulated with ``unit_roundoff`` (GQA expanded as in the oracle)."""
    mag = None if scale is None else abs(scale)
    return gamma(q.shape[-1], unit_roundoff) * raw_scores(np.abs(q), np.abs(k), mag, work)


def _max(x: np.ndarray) -> float:
    return float(x.max(initial=0.0))


def forward_bounds(probs: np.ndarray, out: np.ndarray, v: np.ndarray,
                   delta: np.ndarray) -> dict[str, float]:
    """Bounds on |d out| and |d lse| for modified-score errors |ds'| <= ``delta``."""
    group = probs.shape[1] // v.shape[1]
    ve = np.abs(expand_kv(v, group))
    p_delta = probs * delta
    m = p_delta.sum(axis=-1, keepdims=True)
    e_out = np.matmul(p_delta, ve) + np.abs(out) * m
    return {"out": _max(e_out), "lse": _max(m)}


def backward_bounds(probs: np.ndarray, out: np.ndarray, q: np.ndarray, k: np.ndarray,
                    v: np.ndarray, d_out: np.ndarray, delta: np.ndarray, *,
                    scale: float | None, deriv: np.ndarray | None = None,
                    deriv2: np.ndarray | None = None,
                    raw_delta: np.ndarray | None = None,
                    deriv_error: np.ndarray | None = None) -> dict[str, float]:
    """Bounds on |d dQ|, |d dK|, |d dV| for modified-score errors |ds'| <= ``delta``;
    ``deriv``/``deriv2`` are f'(s) and f''(s) of the score modification, ``raw_delta``
    the raw-score bound (for the change of f'(s)), ``deriv_error`` a bound on the error of
    f'(s) as evaluated (a kernel computing it from an inexact f(s))."""
    group = probs.shape[1] // v.shape[1]
    ke, ve = expand_kv(k, group), expand_kv(v, group)
    mag = 1 / np.sqrt(q.shape[-1]) if scale is None else abs(scale)
    p_delta = probs * delta
    m = p_delta.sum(axis=-1, keepdims=True)
    e_p = probs * (delta + m)
    e_out = np.matmul(p_delta, np.abs(ve)) + np.abs(out) * m
    abs_do = np.abs(d_out)
    e_dv = reduce_kv(np.matmul(np.swapaxes(e_p, -1, -2), abs_do), group)
    dp_minus = np.matmul(d_out, np.swapaxes(ve, -1, -2)) - (d_out * out).sum(-1, keepdims=True)
    e_rowsum = (abs_do * e_out).sum(axis=-1, keepdims=True)
    e_ds = e_p * np.abs(dp_minus) + probs * e_rowsum
    if deriv is not None:
        e_ds *= np.abs(deriv)
        if deriv2 is not None and raw_delta is not None:
            e_ds += np.abs(probs * dp_minus) * np.abs(deriv2) * raw_delta
        if deriv_error is not None:
            e_ds += np.abs(probs * dp_minus) * deriv_error
    e_dq = mag * np.matmul(e_ds, np.abs(ke))
    e_dk = reduce_kv(mag * np.matmul(np.swapaxes(e_ds, -1, -2), np.abs(q)), group)
    return {"dq": _max(e_dq), "dk": _max(e_dk), "dv": _max(e_dv)}
