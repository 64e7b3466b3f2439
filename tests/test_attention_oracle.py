"""The attention oracle against independent references: a naive pure-Python loop, mpmath at
50 digits, central finite differences, torch.autograd on plain float64 ops (no attention
kernels), and closed-form special cases."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

from oracles import attention as att

CAP = 2.0  # softcap f(s) = CAP * tanh(s / CAP), f'(s) = 1 - tanh(s / CAP)^2


def _scores(q, k, scale, dtype=np.float64):
    """scale * q k^T with GQA, written independently of the oracle."""
    q, k = np.asarray(q, dtype), np.asarray(k, dtype)
    ke = np.repeat(k, q.shape[1] // k.shape[1], axis=1)
    return dtype(scale) * np.einsum("bhid,bhjd->bhij", q, ke)


def _naive(q, k, v, scale, scores=None, mask=None):
    b_, hq, sq, d = q.shape
    hkv, sk, dv = k.shape[1], k.shape[2], v.shape[3]
    group = hq // hkv
    mask = np.ones((b_, hq, sq, sk), bool) if mask is None else np.broadcast_to(
        mask, (b_, hq, sq, sk))
    out, lse = np.zeros((b_, hq, sq, dv)), np.zeros((b_, hq, sq))
    for b in range(b_):
        for h in range(hq):
            kh = h // group
            for i in range(sq):
                row = {}
                for j in range(sk):
                    if not mask[b, h, i, j]:
                        continue
                    row[j] = (float(scores[b, h, i, j]) if scores is not None else
                              scale * math.fsum(float(q[b, h, i, c]) * float(k[b, kh, j, c])
                                                for c in range(d)))
                if not row:
                    lse[b, h, i] = -math.inf
                    continue
                m = max(row.values())
                w = {j: math.exp(s - m) for j, s in row.items()}
                tot = math.fsum(w.values())
                lse[b, h, i] = m + math.log(tot)
                for c in range(dv):
                    out[b, h, i, c] = math.fsum(w[j] / tot * float(v[b, kh, j, c]) for j in w)
    return out, lse


# (B, Hq, Hkv, Sq, Sk, D, Dv, scale, masked, softcap)
CASES = [
    (1, 1, 1, 3, 3, 4, 4, None, False, False),
    (2, 4, 2, 3, 5, 4, 6, None, False, False),
    (1, 4, 1, 5, 3, 8, 2, 0.3, False, False),
    (2, 4, 2, 4, 6, 3, 5, 1.7, True, False),
    (1, 2, 1, 4, 5, 4, 3, None, True, True),
    (1, 4, 2, 3, 7, 5, 4, 0.9, False, True),
]


@pytest.mark.parametrize("n", range(len(CASES)), ids=[f"case{i}" for i in range(len(CASES))])
def test_forward_matches_naive_loop(n):
    b, hq, hkv, sq, sk, d, dv, scale, masked, softcap = CASES[n]
    rng = np.random.default_rng(100 + n)
    q, k, v = (rng.standard_normal(s) for s in ((b, hq, sq, d), (b, hkv, sk, d), (b, hkv, sk, dv)))
    q *= 2.0  # spread the scores so the softmax is not flat
    sc = 1 / math.sqrt(d) if scale is None else scale
    mask = None
    if masked:
        mask = rng.random((b, hq, sq, sk)) < 0.6
        mask[0, -1, 1, :] = False  # one fully masked row
    mod = CAP * np.tanh(_scores(q, k, sc) / CAP) if softcap else None
    got = att.forward(q, k, v, scale=scale, modified_scores=mod, mask=mask)
    out, lse = _naive(q, k, v, sc, mod, mask)
    np.testing.assert_allclose(got.out, out, rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(np.isinf(got.lse), np.isinf(lse))
    np.testing.assert_allclose(got.lse, lse, rtol=1e-12, atol=1e-14)
    assert got.out.shape == (b, hq, sq, dv) and got.probs.shape == (b, hq, sq, sk)
    if masked:
        assert np.all(got.out[0, -1, 1] == 0) and got.lse[0, -1, 1] == -np.inf
        assert np.all(got.probs[0, -1, 1] == 0)
        assert np.all(got.probs[~mask] == 0)
    np.testing.assert_allclose(got.probs.sum(-1), np.isfinite(lse).astype(float), atol=1e-14)


def test_forward_matches_mpmath_50_digits():
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal(s) for s in ((1, 1, 3, 2), (1, 1, 4, 2), (1, 1, 4, 2)))
    got = att.forward(q, k, v)
    with mpmath.workdps(50):
        scale = 1 / mpmath.sqrt(2)
        for i in range(3):
            s = [scale * mpmath.fsum(mpmath.mpf(q[0, 0, i, c]) * mpmath.mpf(k[0, 0, j, c])
                                     for c in range(2)) for j in range(4)]
            w = [mpmath.exp(x) for x in s]
            tot = mpmath.fsum(w)
            assert float(got.lse[0, 0, i]) == pytest.approx(float(mpmath.log(tot)), rel=1e-14,
                                                            abs=1e-15)
            for c in range(2):
                ref = mpmath.fsum(wj * mpmath.mpf(v[0, 0, j, c]) for j, wj in enumerate(w)) / tot
                assert got.out[0, 0, i, c] == pytest.approx(float(ref), rel=1e-14, abs=1e-15)


def _loss(q, k, v, d_out, scale, mask, softcap):
    """sum(out * d_out) in longdouble, the score mod recomputed from q and k."""
    ld = np.longdouble
    mod = CAP * np.tanh(_scores(q, k, scale, ld) / CAP) if softcap else None
    out = att.forward(q, k, v, scale=scale, modified_scores=mod, mask=mask, work=ld).out
    return (out * np.asarray(d_out, ld)).sum()


def _fd_grad(x, f, h=1e-5):
    g = np.zeros(x.shape)
    for idx in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[idx] += h
        xm[idx] -= h
        g[idx] = float((f(xp) - f(xm)) / (2 * h))
    return g


@pytest.mark.parametrize("softcap", [False, True], ids=["plain", "softcap"])
def test_backward_matches_finite_differences(softcap):
    rng = np.random.default_rng(11 + softcap)
    b, hq, hkv, sq, sk, d, dv, scale = 1, 4, 2, 3, 4, 3, 2, 0.8
    q, k, v = (rng.standard_normal(s) for s in ((b, hq, sq, d), (b, hkv, sk, d), (b, hkv, sk, dv)))
    d_out = rng.standard_normal((b, hq, sq, dv))
    mask = rng.random((b, hq, sq, sk)) < 0.7
    mask[..., 0] = True
    mask[0, 2, 1, :] = False  # a fully masked row
    mod = CAP * np.tanh(_scores(q, k, scale) / CAP) if softcap else None
    deriv = 1 - np.tanh(_scores(q, k, scale) / CAP) ** 2 if softcap else None
    fwd = att.forward(q, k, v, scale=scale, modified_scores=mod, mask=mask)
    g = att.backward(q, k, v, d_out, fwd, scale=scale, score_derivative=deriv)
    fd_q = _fd_grad(q, lambda x: _loss(x, k, v, d_out, scale, mask, softcap))
    fd_k = _fd_grad(k, lambda x: _loss(q, x, v, d_out, scale, mask, softcap))
    fd_v = _fd_grad(v, lambda x: _loss(q, k, x, d_out, scale, mask, softcap))
    for got, ref in ((g.dq, fd_q), (g.dk, fd_k), (g.dv, fd_v)):
        assert np.all(np.isfinite(got)) and got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-7, atol=1e-8)
    assert np.all(g.dq[0, 2, 1] == 0)
    # The fully masked row alone contributes nothing to any gradient.
    d_row = np.zeros_like(d_out)
    d_row[0, 2, 1] = rng.standard_normal(dv)
    g0 = att.backward(q, k, v, d_row, fwd, scale=scale, score_derivative=deriv)
    for t in (g0.dq, g0.dk, g0.dv):
        assert np.all(np.isfinite(t)) and np.all(t == 0)


@pytest.mark.parametrize("hkv", [1, 2, 4])
def test_backward_matches_torch_autograd(hkv):
    rng = np.random.default_rng(20 + hkv)
    b, hq, sq, sk, d, dv, scale = 2, 4, 5, 6, 4, 3, 0.6
    q, k, v = (rng.standard_normal(s) for s in ((b, hq, sq, d), (b, hkv, sk, d), (b, hkv, sk, dv)))
    d_out = rng.standard_normal((b, hq, sq, dv))
    mask = rng.random((b, hq, sq, sk)) < 0.7
    mask[..., -1] = True  # torch's softmax gives NaN on fully masked rows
    tq, tk, tv = (torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in (q, k, v))
    ke, ve = (t.repeat_interleave(hq // hkv, dim=1) for t in (tk, tv))
    s = (scale * tq @ ke.transpose(-1, -2)).masked_fill(~torch.from_numpy(mask), -math.inf)
    out = torch.softmax(s, dim=-1) @ ve
    (out * torch.from_numpy(d_out)).sum().backward()
    fwd = att.forward(q, k, v, scale=scale, mask=mask)
    np.testing.assert_allclose(fwd.out, out.detach().numpy(), rtol=1e-12, atol=1e-13)
    g = att.backward(q, k, v, d_out, fwd, scale=scale)
    for got, ref in ((g.dq, tq.grad), (g.dk, tk.grad), (g.dv, tv.grad)):
        np.testing.assert_allclose(got, ref.numpy(), rtol=1e-12, atol=1e-13)


def test_zero_queries_give_uniform_attention():
    rng = np.random.default_rng(3)
    q = np.zeros((2, 4, 3, 5))
    k, v = rng.standard_normal((2, 2, 7, 5)), rng.standard_normal((2, 2, 7, 3))
    fwd = att.forward(q, k, v)
    np.testing.assert_allclose(fwd.lse, np.full((2, 4, 3), math.log(7)), rtol=1e-15)
    mean = np.repeat(v.mean(axis=2, keepdims=True), 2, axis=1)  # heads 0,1 -> kv 0; 2,3 -> kv 1
    np.testing.assert_allclose(fwd.out, np.broadcast_to(mean, fwd.out.shape), rtol=1e-14,
                               atol=1e-15)


def test_single_key_returns_its_value_and_no_query_key_gradient():
    rng = np.random.default_rng(4)
    q, k, v = rng.standard_normal((1, 4, 3, 5)), rng.standard_normal((1, 2, 1, 5)), \
        rng.standard_normal((1, 2, 1, 3))
    d_out = rng.standard_normal((1, 4, 3, 3))
    fwd = att.forward(q, k, v)
    np.testing.assert_array_equal(fwd.out, np.broadcast_to(np.repeat(v, 2, axis=1), fwd.out.shape))
    np.testing.assert_allclose(fwd.lse, _scores(q, k, 1 / math.sqrt(5))[..., 0], atol=1e-15)
    g = att.backward(q, k, v, d_out, fwd)
    np.testing.assert_allclose(g.dq, 0, atol=1e-14)
    np.testing.assert_allclose(g.dk, 0, atol=1e-14)
    np.testing.assert_allclose(g.dv, d_out.sum(axis=2, keepdims=True).reshape(1, 2, 2, 1, 3)
                               .sum(axis=2), rtol=1e-14)


def test_fully_masked_everything_gives_zero_output_and_grads():
    rng = np.random.default_rng(5)
    q, k, v = rng.standard_normal((1, 2, 3, 4)), rng.standard_normal((1, 1, 5, 4)), \
        rng.standard_normal((1, 1, 5, 2))
    mask = np.zeros((3, 5), bool)  # broadcast over batch and heads
    fwd = att.forward(q, k, v, mask=mask)
    assert np.all(fwd.out == 0) and np.all(fwd.lse == -np.inf) and np.all(fwd.probs == 0)
    g = att.backward(q, k, v, rng.standard_normal((1, 2, 3, 2)), fwd)
    for t in (g.dq, g.dk, g.dv):
        assert np.all(np.isfinite(t)) and np.all(t == 0)


def test_longdouble_work_agrees_with_float64():
    rng = np.random.default_rng(6)
    q, k, v = rng.standard_normal((2, 4, 5, 3)), rng.standard_normal((2, 2, 6, 3)), \
        rng.standard_normal((2, 2, 6, 4))
    d_out = rng.standard_normal((2, 4, 5, 4))
    mask = rng.random((2, 4, 5, 6)) < 0.7
    mask[1, 3, 0, :] = False
    f64 = att.forward(q, k, v, mask=mask)
    fld = att.forward(q, k, v, mask=mask, work=np.longdouble)
    g64 = att.backward(q, k, v, d_out, f64)
    gld = att.backward(q, k, v, d_out, fld, work=np.longdouble)
    assert att.raw_scores(q, k, work=np.longdouble).dtype == np.longdouble
    for a, b in ((f64.out, fld.out), (f64.lse, fld.lse), (f64.probs, fld.probs),
                 (g64.dq, gld.dq), (g64.dk, gld.dk), (g64.dv, gld.dv)):
        assert a.dtype == np.float64 and b.dtype == np.longdouble
        np.testing.assert_allclose(a, b.astype(np.float64), rtol=1e-14, atol=1e-14)


def test_heads_not_a_multiple_raise():
    q, k, v = np.zeros((1, 3, 2, 4)), np.zeros((1, 2, 2, 4)), np.zeros((1, 2, 2, 4))
    with pytest.raises(ValueError, match="multiple"):
        att.raw_scores(q, k)
    with pytest.raises(ValueError, match="multiple"):
        att.forward(q, k, v)
    fwd = att.forward(np.zeros((1, 2, 2, 4)), k, v)
    with pytest.raises(ValueError, match="multiple"):
        att.backward(q, k, v, np.zeros((1, 3, 2, 4)), fwd)
    with pytest.raises(ValueError):
        att.forward(np.zeros((1, 2, 2, 4)), np.zeros((1, 2, 2, 3)), v)  # head dim mismatch
