"""The score-rounding bound (oracles/attention_bounds.py) against what it claims:

- gamma_D bounds real float32 dot products in several summation orders (sequential,
  reversed, pairwise, numpy's matmul), also when they cancel;
- carried through softmax and the gradients, it bounds the change of out, lse, dQ, dK, dV
  that score errors of that size cause, for random and for worst-case (sign-aligned)
  perturbations, with a mask and with softcap (f'' != 0), computed with the oracle;
- it is not vacuous: a sign-aligned perturbation reaches a fair share of it (measured:
  lse 0.94-1.0, out 0.35-0.44, dV 0.11-0.38, dQ and dK 0.05-0.20 of the bound), while real
  float32 dot products use 0.2-0.5 % of gamma_D (the price of a bound valid for every
  summation order and every input, cancelling ones included).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from oracles import attention as att
from oracles import attention_bounds as bounds

pytestmark = pytest.mark.harness_only

U32 = 2.0**-24
CAP = 2.0


def test_gamma_is_higham_gamma_n():
    assert bounds.gamma(64, U32) == 64 * U32 / (1 - 64 * U32)
    with pytest.raises(ValueError, match="undefined"):
        bounds.gamma(300, 2.0**-8)


def _sequential(a: np.ndarray, b: np.ndarray, reverse: bool = False) -> np.float32:
    acc = np.float32(0.0)
    idx = range(len(a) - 1, -1, -1) if reverse else range(len(a))
    for i in idx:
        acc = np.float32(acc + np.float32(a[i] * b[i]))
    return acc


def _pairwise(a: np.ndarray, b: np.ndarray) -> np.float32:
    terms = list((a * b).astype(np.float32))
    while len(terms) > 1:
        terms = [np.float32(terms[i] + terms[i + 1]) if i + 1 < len(terms) else terms[i]
                 for i in range(0, len(terms), 2)]
    return terms[0]


@pytest.mark.parametrize("cancel", [False, True], ids=["random", "cancelling"])
def test_raw_bound_covers_float32_dot_products(cancel):
    rng = np.random.default_rng(1)
    d, n = 256, 40
    q = rng.standard_normal((1, 1, n, d)).astype(np.float32)
    k = rng.standard_normal((1, 1, n, d)).astype(np.float32)
    if cancel:  # remove each key's component along its query: scores ~ 0, terms ~ 1
        qq, kk = q[0, 0].astype(np.float64), k[0, 0].astype(np.float64)
        kk -= (np.sum(qq * kk, axis=1) / np.sum(qq * qq, axis=1))[:, None] * qq
        k[0, 0] = kk.astype(np.float32)
    bound = bounds.raw_score_error(q, k, 1.0, U32)
    worst = 0.0
    for i in range(n):
        a, b = q[0, 0, i], k[0, 0, i]
        exact = math.fsum(float(x) * float(y) for x, y in zip(a, b, strict=True))
        for got in (_sequential(a, b), _sequential(a, b, True), _pairwise(a, b),
                    np.float32(a @ b)):
            ratio = abs(float(got) - exact) / bound[0, 0, i, i]
            worst = max(worst, ratio)
    assert worst <= 1.0
    assert worst > 1e-3  # real rounding was measured (not exact sums)


def _problem(seed: int, masked: bool):
    rng = np.random.default_rng(seed)
    b, hq, hkv, sq, sk, d, dv = 2, 4, 2, 5, 7, 16, 6
    q, k = rng.standard_normal((b, hq, sq, d)), rng.standard_normal((b, hkv, sk, d))
    v, d_out = rng.standard_normal((b, hkv, sk, dv)), rng.standard_normal((b, hq, sq, dv))
    mask = None
    if masked:
        mask = rng.random((b, hq, sq, sk)) < 0.7
        mask[0, 0, 0] = False  # one fully masked row
    return q, k, v, d_out, mask


def _run(q, k, v, d_out, mask, scale, raw_err, softcap):
    s = att.raw_scores(q, k, scale) + raw_err
    if softcap:
        f, df = CAP * np.tanh(s / CAP), 1 - np.tanh(s / CAP) ** 2
    else:
        f, df = s, None
    fwd = att.forward(q, k, v, scale=scale, modified_scores=f, mask=mask)
    g = att.backward(q, k, v, d_out, fwd, scale=scale, score_derivative=df)
    return {"out": fwd.out, "lse": fwd.lse, "dq": g.dq, "dk": g.dk, "dv": g.dv}


def _bounds(q, k, v, d_out, mask, scale, raw_delta, softcap):
    s = att.raw_scores(q, k, scale)
    t = np.tanh(s / CAP)
    f, df, d2f = (CAP * t, 1 - t**2, -2 * t * (1 - t**2) / CAP) if softcap else (s, None, None)
    delta = raw_delta if df is None else np.abs(df) * raw_delta
    fwd = att.forward(q, k, v, scale=scale, modified_scores=f, mask=mask)
    out = bounds.forward_bounds(fwd.probs, fwd.out, v, delta)
    out.update(bounds.backward_bounds(fwd.probs, fwd.out, q, k, v, d_out, delta, scale=scale,
                                      deriv=df, deriv2=d2f, raw_delta=raw_delta))
    return out


def _change(a: np.ndarray, b: np.ndarray) -> float:
    same_inf = np.isinf(a) & (a == b)
    with np.errstate(invalid="ignore"):
        return float(np.where(same_inf, 0.0, np.abs(a - b)).max())


@pytest.mark.parametrize("softcap", [False, True], ids=["plain", "softcap"])
@pytest.mark.parametrize("masked", [False, True], ids=["dense", "masked"])
def test_propagated_bound_covers_score_errors(masked, softcap):
    q, k, v, d_out, mask = _problem(3, masked)
    scale = 0.7
    raw_delta = bounds.raw_score_error(q, k, scale, U32)
    limit = _bounds(q, k, v, d_out, mask, scale, raw_delta, softcap)
    clean = _run(q, k, v, d_out, mask, scale, 0.0, softcap)
    rng = np.random.default_rng(4)
    reached = dict.fromkeys(limit, 0.0)
    perturbations = [rng.uniform(-1, 1, raw_delta.shape) for _ in range(20)]
    perturbations += [rng.choice([-1.0, 1.0], raw_delta.shape) for _ in range(20)]
    # sign-aligned with one output column: the worst case of the output's first-order sum
    sign = np.sign(np.repeat(v, 2, axis=1)[..., 0])[:, :, None, :]
    perturbations.append(np.broadcast_to(sign, raw_delta.shape))
    for e in perturbations:
        moved = _run(q, k, v, d_out, mask, scale, e * raw_delta, softcap)
        for name, bound in limit.items():
            change = _change(moved[name], clean[name])
            assert change <= bound * (1 + 1e-6), (name, change, bound)
            reached[name] = max(reached[name], change / bound)
    # not vacuous: some perturbation uses a fair share of every bound
    assert min(reached.values()) > 0.05, reached


def test_softcap_evaluation_error_is_covered():
    """A kernel's softcap value off by up to u |x| (tanh.approx), and its derivative
    computed from that value, 1 - (x / cap)^2: the bound with delta = u |x| and
    deriv_error = 2 u (x / cap)^2 (conformance/areas/attention/reference.py) covers the
    change of every result, and some perturbation reaches a fair share of it."""
    u = 2.0**-11
    q, k, v, d_out, mask = _problem(5, True)
    scale = 0.7
    s = att.raw_scores(q, k, scale)
    x = CAP * np.tanh(s / CAP)
    df = 1 - (x / CAP) ** 2
    fwd = att.forward(q, k, v, scale=scale, modified_scores=x, mask=mask)
    limit = bounds.forward_bounds(fwd.probs, fwd.out, v, u * np.abs(x))
    limit.update(bounds.backward_bounds(
        fwd.probs, fwd.out, q, k, v, d_out, u * np.abs(x), scale=scale, deriv=df,
        deriv_error=2 * u * (x / CAP) ** 2))
    g = att.backward(q, k, v, d_out, fwd, scale=scale, score_derivative=df)
    clean = {"out": fwd.out, "lse": fwd.lse, "dq": g.dq, "dk": g.dk, "dv": g.dv}
    rng = np.random.default_rng(6)
    reached = dict.fromkeys(limit, 0.0)
    signs = [rng.choice([-1.0, 1.0], x.shape) for _ in range(20)] + [np.ones(x.shape),
                                                                      -np.ones(x.shape)]
    for e in signs:
        xt = x * (1 + e * u)
        f2 = att.forward(q, k, v, scale=scale, modified_scores=xt, mask=mask)
        g2 = att.backward(q, k, v, d_out, f2, scale=scale, score_derivative=1 - (xt / CAP) ** 2)
        moved = {"out": f2.out, "lse": f2.lse, "dq": g2.dq, "dk": g2.dk, "dv": g2.dv}
        for name, bound in limit.items():
            change = _change(moved[name], clean[name])
            assert change <= bound * (1 + 1e-3), (name, change, bound)
            reached[name] = max(reached[name], change / bound)
    assert min(reached.values()) > 0.05, reached
