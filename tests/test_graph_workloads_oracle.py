"""Self-tests of oracles/graph_workloads: torch in float64 on the CPU as the reference, central
finite differences and the analytic first Adam step, then the float32 / rounding baseline
(``work`` and ``rnd``) and bad input."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from oracles import graph_workloads as ow

pytestmark = pytest.mark.harness_only

F64 = torch.float64
TOL = 1e-12
Outputs = list[np.ndarray]


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.tensor(a, dtype=F64)


def _n(t: torch.Tensor) -> np.ndarray:
    return t.detach().numpy()


def _close(got: np.ndarray, want: np.ndarray, tol: float = TOL) -> None:
    """float64 result of ``want``'s shape within ``tol`` relative to max(1, max|want|)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == np.float64 and got.shape == want.shape
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    err = float(np.max(np.abs(got - want), initial=0.0))
    assert err <= tol * scale, f"max error {err:.3g} > {tol:g} x {scale:.3g}"


def _w(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Weights scaled by 1/sqrt(fan_in) so that activations stay O(1)."""
    return rng.standard_normal(shape) / np.sqrt(shape[-1])


# --- the forward workloads against torch in float64 -----------------------------------------

@pytest.mark.parametrize(("seed", "x_shape", "out"),
                         [(0, (3, 4), 5), (1, (2, 3, 4), 6), (2, (1, 7), 1)])
def test_linear_matches_torch(seed: int, x_shape: tuple[int, ...], out: int) -> None:
    """x w^T + b, for 2-D and batched x."""
    rng = np.random.default_rng(seed)
    x, w, b = rng.standard_normal(x_shape), _w(rng, out, x_shape[-1]), rng.standard_normal(out)
    _close(ow.linear(x, w, b), _n(F.linear(_t(x), _t(w), _t(b))))


@pytest.mark.parametrize(("seed", "n", "i", "h", "o"), [(0, 4, 3, 5, 2), (1, 7, 6, 8, 3)])
def test_mlp_matches_torch(seed: int, n: int, i: int, h: int, o: int) -> None:
    """relu between two linears."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, i))
    w1, b1, w2, b2 = _w(rng, h, i), rng.standard_normal(h), _w(rng, o, h), rng.standard_normal(o)
    want = F.linear(F.relu(F.linear(_t(x), _t(w1), _t(b1))), _t(w2), _t(b2))
    _close(ow.mlp(x, w1, b1, w2, b2), _n(want))


def _torch_attention(x: np.ndarray, w_qkv: np.ndarray, w_out: np.ndarray,
                     heads: int) -> np.ndarray:
    bsz, seq, emb = x.shape
    qkv = F.linear(_t(x), _t(w_qkv))
    q, k, v = (a.reshape(bsz, seq, heads, emb // heads).transpose(1, 2)
               for a in qkv.chunk(3, dim=-1))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return _n(F.linear(o.transpose(1, 2).reshape(bsz, seq, emb), _t(w_out)))


@pytest.mark.parametrize(("seed", "bsz", "seq", "emb", "heads"),
                         [(0, 2, 5, 8, 2), (1, 1, 7, 12, 2), (2, 3, 4, 6, 2), (3, 2, 6, 8, 4),
                          (4, 1, 3, 4, 1), (5, 2, 1, 4, 2)])
def test_attention_block_matches_torch(seed: int, bsz: int, seq: int, emb: int,
                                       heads: int) -> None:
    """Causal multi-head SDPA between the qkv and out projections."""
    rng = np.random.default_rng(seed)
    x, w_qkv, w_out = rng.standard_normal((bsz, seq, emb)), _w(rng, 3 * emb, emb), _w(rng, emb, emb)
    _close(ow.attention_block(x, w_qkv, w_out, heads), _torch_attention(x, w_qkv, w_out, heads))


def test_attention_block_is_causal() -> None:
    """Changing the last position leaves every earlier output bit-identical."""
    rng = np.random.default_rng(6)
    x, w_qkv, w_out = rng.standard_normal((2, 5, 8)), _w(rng, 24, 8), _w(rng, 8, 8)
    x2 = x.copy()
    x2[:, -1] += 1.0
    a, b = ow.attention_block(x, w_qkv, w_out, 2), ow.attention_block(x2, w_qkv, w_out, 2)
    np.testing.assert_array_equal(a[:, :-1], b[:, :-1])
    assert np.max(np.abs(a[:, -1] - b[:, -1])) > 1e-3


@pytest.mark.parametrize(("seed", "decay"), [(0, 0.9), (1, 0.5), (2, 0.0), (3, 1.0)])
def test_state_update_matches_torch(seed: int, decay: float) -> None:
    """decay * state + (1 - decay) * tanh(x w^T)."""
    rng = np.random.default_rng(seed)
    state, x, w = rng.standard_normal((4, 6)), rng.standard_normal((4, 5)), _w(rng, 6, 5)
    want = decay * _t(state) + (1 - decay) * torch.tanh(F.linear(_t(x), _t(w)))
    _close(ow.state_update(state, x, w, decay), _n(want))


# --- the training step: loss and gradients ---------------------------------------------------

def _mlp_problem(seed: int, n: int = 6, i: int = 5, h: int = 7, o: int = 3
                 ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    params = [_w(rng, h, i), rng.standard_normal(h), _w(rng, o, h), rng.standard_normal(o)]
    return rng.standard_normal((n, i)), rng.standard_normal((n, o)), params


@pytest.mark.parametrize(("seed", "dims"), [(0, (6, 5, 7, 3)), (1, (1, 2, 3, 1)),
                                            (2, (16, 32, 32, 8))])
def test_tanh_mlp_loss_grads_match_autograd(seed: int, dims: tuple[int, int, int, int]) -> None:
    """Linear-Tanh-Linear with mean squared error, against torch autograd."""
    x, y, params = _mlp_problem(seed, *dims)
    _, i, h, o = dims
    model = torch.nn.Sequential(torch.nn.Linear(i, h), torch.nn.Tanh(),
                                torch.nn.Linear(h, o)).to(F64)
    with torch.no_grad():
        for p, v in zip(model.parameters(), params, strict=True):
            p.copy_(_t(v))
    loss_t = F.mse_loss(model(_t(x)), _t(y))
    loss_t.backward()
    loss, grads = ow.tanh_mlp_loss_grads(x, y, params)
    assert isinstance(loss, float)
    assert loss == pytest.approx(loss_t.item(), rel=TOL, abs=TOL)
    for g, p in zip(grads, model.parameters(), strict=True):
        _close(g, _n(p.grad))


def test_tanh_mlp_grads_match_central_differences() -> None:
    """(L(p + h e) - L(p - h e)) / 2h on three coordinates of every parameter, in numpy."""
    x, y, params = _mlp_problem(7)
    _, grads = ow.tanh_mlp_loss_grads(x, y, params)
    rng, step = np.random.default_rng(8), 1e-5
    for k, p in enumerate(params):
        for flat in rng.choice(p.size, size=min(3, p.size), replace=False):
            idx = np.unravel_index(flat, p.shape)
            plus, minus = [q.copy() for q in params], [q.copy() for q in params]
            plus[k][idx] += step
            minus[k][idx] -= step
            fd = (ow.tanh_mlp_loss_grads(x, y, plus)[0]
                  - ow.tanh_mlp_loss_grads(x, y, minus)[0]) / (2 * step)
            assert grads[k][idx] == pytest.approx(fd, rel=1e-7, abs=1e-8), (k, idx)


# --- Adam --------------------------------------------------------------------------------

ADAM_SHAPES = ((4, 3), (3,), (2, 4))


@pytest.mark.parametrize(("seed", "lr"), [(0, 1e-3), (1, 0.1)])
def test_adam_matches_torch_three_steps(seed: int, lr: float) -> None:
    """Params, exp_avg, exp_avg_sq and step after each of 3 steps of torch.optim.Adam."""
    rng = np.random.default_rng(seed)
    params = [rng.standard_normal(s) for s in ADAM_SHAPES]
    m, v = [np.zeros(s) for s in ADAM_SHAPES], [np.zeros(s) for s in ADAM_SHAPES]
    tparams = [_t(p).requires_grad_() for p in params]
    opt = torch.optim.Adam(tparams, lr=lr, foreach=False)
    step = 0.0
    for n in range(1, 4):
        grads = [rng.standard_normal(s) * 10.0 ** -n for s in ADAM_SHAPES]
        params, m, v, step = ow.adam_step(params, grads, m, v, step, lr)
        for tp, g in zip(tparams, grads, strict=True):
            tp.grad = _t(g)
        opt.step()
        assert step == float(n)
        for tp, p, mi, vi in zip(tparams, params, m, v, strict=True):
            st = opt.state[tp]
            assert float(st["step"]) == step
            _close(p, _n(tp))
            _close(mi, _n(st["exp_avg"]))
            _close(vi, _n(st["exp_avg_sq"]), tol=1e-14)


def test_adam_first_step_analytic() -> None:
    """From m = v = 0, step 0: m = (1-b1) g, v = (1-b2) g^2 and, the bias corrections at t = 1
    cancelling those factors (m / (1-b1) = g, sqrt(v) / sqrt(1-b2) = |g|), the update is
    -lr g / (|g| + eps): eps added after the bias correction, as torch does."""
    b1, b2 = ow.BETAS
    lr, eps = 1e-3, ow.EPS
    g = np.array([1.0, -2.5, 1e-8, -3e-9, 0.0, 4e-7, -1e3])
    p = np.linspace(-1.0, 1.0, g.size)
    (p1,), (m1,), (v1,), t = ow.adam_step([p], [g], [np.zeros_like(g)], [np.zeros_like(g)],
                                          0.0, lr)
    assert t == 1.0
    np.testing.assert_allclose(m1, (1 - b1) * g, rtol=TOL, atol=0)
    np.testing.assert_allclose(v1, (1 - b2) * g * g, rtol=TOL, atol=0)
    expected = -lr * g / (np.abs(g) + eps)
    np.testing.assert_allclose(p1 - p, expected, rtol=0, atol=TOL)
    # at |g| = eps the update is half of lr; eps before the bias correction (the
    # eps * sqrt(1 - b2) form) would give ~0.97 lr there, which this rules out
    assert p1[2] - p[2] == pytest.approx(-lr / 2, abs=TOL)
    eps_hat = -lr * g / (np.abs(g) + eps * np.sqrt(1 - b2))
    assert abs(eps_hat[2] - expected[2]) > 0.4 * lr


# --- the baseline: work=float32 and rnd -----------------------------------------------------

def _cases() -> dict[str, Callable[[type, ow.Round], Outputs]]:
    """Every workload on generic random inputs, as (work, rnd) -> list of float64 outputs."""
    rng = np.random.default_rng(11)
    x2, x3 = rng.standard_normal((6, 8)), rng.standard_normal((2, 5, 8))
    w, b = _w(rng, 8, 8), rng.standard_normal(8)
    w_qkv, state = _w(rng, 24, 8), rng.standard_normal((6, 8))
    xm, ym, pm = _mlp_problem(12)
    pa = [rng.standard_normal(s) for s in ADAM_SHAPES]
    ga = [rng.standard_normal(s) for s in ADAM_SHAPES]
    ma = [rng.standard_normal(s) * 0.1 for s in ADAM_SHAPES]
    va = [rng.random(s) * 0.01 for s in ADAM_SHAPES]

    def tanh_mlp(work: type, rnd: ow.Round) -> Outputs:
        loss, grads = ow.tanh_mlp_loss_grads(xm, ym, pm, work, rnd)
        return [np.asarray(loss), *grads]

    def adam(work: type, rnd: ow.Round) -> Outputs:
        p, m, v, _ = ow.adam_step(pa, ga, ma, va, 4.0, 1e-3, work, rnd)
        return [*p, *m, *v]

    return {
        "linear": lambda work, rnd: [ow.linear(x2, w, b, work, rnd)],
        "mlp": lambda work, rnd: [ow.mlp(x2, w, b, w, b, work, rnd)],
        "attention_block": lambda work, rnd: [ow.attention_block(x3, w_qkv, w, 2, work, rnd)],
        "state_update": lambda work, rnd: [ow.state_update(state, x2, w, 0.9, work, rnd)],
        "tanh_mlp_loss_grads": tanh_mlp,
        "adam_step": adam,
    }


CASES = _cases()


def _same(a: np.ndarray) -> np.ndarray:
    return a


def _f16(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).astype(np.float16).astype(np.float64)


def _representable(a: np.ndarray, dtype: type) -> bool:
    return bool(np.array_equal(a.astype(dtype).astype(np.float64), a))


@pytest.mark.parametrize("name", CASES)
def test_float32_work_is_float32_arithmetic(name: str) -> None:
    """float64 arrays holding float32 values, close to the oracle but not equal to it."""
    ref, base = CASES[name](np.float64, _same), CASES[name](np.float32, _same)
    assert len(ref) == len(base)
    for r, b in zip(ref, base, strict=True):
        assert b.dtype == np.float64 and b.shape == r.shape
        assert _representable(b, np.float32)
        err = float(np.max(np.abs(b - r)))
        assert 0.0 < err <= 1e-5 * max(1.0, float(np.max(np.abs(r))))


def _seq_mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    out = np.zeros((a.shape[0], b.shape[1]), dtype=np.float32)
    for i in range(a.shape[1]):
        out = out + a[:, i:i + 1] * b[i:i + 1, :]
    return out


def _seq_sum0(a: np.ndarray) -> np.ndarray:
    acc = np.zeros(a.shape[1:], dtype=np.float32)
    for row in a:
        acc = acc + row
    return acc


def test_float32_tanh_mlp_is_plain_float32_arithmetic() -> None:
    """Bit for bit the same numpy step written out in float32 with sequential sums
    (tanh included)."""
    x64, y64, params = _mlp_problem(13)
    loss, grads = ow.tanh_mlp_loss_grads(x64, y64, params, np.float32)
    x, y, w1, b1, w2, b2 = (a.astype(np.float32) for a in (x64, y64, *params))
    h = np.tanh(_seq_mm(x, w1.T) + b1)
    diff = (_seq_mm(h, w2.T) + b2) - y
    dout = np.float32(2.0 / diff.size) * diff
    dz = _seq_mm(dout, w2) * (np.float32(1) - h * h)
    want = [_seq_mm(dz.T, x), _seq_sum0(dz), _seq_mm(dout.T, h), _seq_sum0(dout)]
    assert loss == float(_seq_sum0((diff * diff).ravel()[:, None])[0] / np.float32(diff.size))
    for g, wnt in zip(grads, want, strict=True):
        np.testing.assert_array_equal(g, wnt.astype(np.float64))


def test_matmul_orders() -> None:
    """float64: BLAS (==); float32: sequential accumulation, a triple loop bit for bit,
    batched over leading dims."""
    rng = np.random.default_rng(3)
    a, b = rng.uniform(-1, 1, (2, 5, 7)), rng.uniform(-1, 1, (2, 7, 3))
    np.testing.assert_array_equal(ow.matmul(a, b), a @ b)
    got = ow.matmul(a, b, np.float32)
    for n in range(2):
        want = np.zeros((5, 3), dtype=np.float32)
        for i in range(5):
            for j in range(3):
                acc = np.float32(0)
                for k in range(7):
                    acc = np.float32(acc + np.float32(a[n, i, k]) * np.float32(b[n, k, j]))
                want[i, j] = acc
        np.testing.assert_array_equal(got[n], want)


def test_float32_adam_matches_torch_float32() -> None:
    """Three float32 baseline steps agree with torch.optim.Adam in float32 to float32 rounding
    (1 - b2 taken in float32 would put exp_avg_sq 1.3e-5 off)."""
    rng = np.random.default_rng(14)
    params = [rng.standard_normal(s).astype(np.float32).astype(np.float64) for s in ADAM_SHAPES]
    m, v = [np.zeros(s) for s in ADAM_SHAPES], [np.zeros(s) for s in ADAM_SHAPES]
    tparams = [torch.tensor(p, dtype=torch.float32).requires_grad_() for p in params]
    opt = torch.optim.Adam(tparams, lr=1e-3, foreach=False)
    step = 0.0
    for _ in range(3):
        grads = [rng.standard_normal(s) for s in ADAM_SHAPES]
        params, m, v, step = ow.adam_step(params, grads, m, v, step, 1e-3, np.float32)
        for tp, g in zip(tparams, grads, strict=True):
            tp.grad = torch.tensor(g, dtype=torch.float32)
        opt.step()
        for tp, p, mi, vi in zip(tparams, params, m, v, strict=True):
            st = opt.state[tp]
            for got, want in ((p, tp), (mi, st["exp_avg"]), (vi, st["exp_avg_sq"])):
                want = want.detach().double().numpy()
                assert np.max(np.abs(got - want)) <= 1e-6 * np.max(np.abs(want))


@pytest.mark.parametrize("work", [np.float64, np.float32])
@pytest.mark.parametrize("name", CASES)
def test_rnd_is_applied_last(name: str, work: type) -> None:
    """With rnd rounding to float16 every output is a float16 value."""
    for out in CASES[name](work, _f16):
        assert out.dtype == np.float64
        assert _representable(out, np.float16)


STORES = {"linear": 1, "mlp": 2, "attention_block": 5, "state_update": 4,
          "tanh_mlp_loss_grads": 11, "adam_step": 4 * len(ADAM_SHAPES)}


@pytest.mark.parametrize("name", CASES)
def test_rnd_sees_every_store(name: str) -> None:
    """rnd is called once per stored intermediate (and output), always on float64 arrays."""
    seen: list[np.dtype] = []

    def count(a: np.ndarray) -> np.ndarray:
        seen.append(np.asarray(a).dtype)
        return a

    CASES[name](np.float32, count)
    assert len(seen) == STORES[name]
    assert set(seen) == {np.dtype(np.float64)}


def test_mlp_rounds_the_hidden_layer_once() -> None:
    """mlp with rnd is linear, relu, linear with rnd on each linear's result."""
    rng = np.random.default_rng(15)
    x, w1, b1 = rng.standard_normal((4, 6)), _w(rng, 5, 6), rng.standard_normal(5)
    w2, b2 = _w(rng, 3, 5), rng.standard_normal(3)
    h = np.maximum(ow.linear(x, w1, b1, np.float32, _f16), 0.0)
    np.testing.assert_array_equal(ow.mlp(x, w1, b1, w2, b2, np.float32, _f16),
                                  ow.linear(h, w2, b2, np.float32, _f16))


# --- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize(("emb", "heads"), [(6, 4), (8, 3), (8, 16), (8, -2)])
def test_attention_block_rejects_heads_not_dividing_emb(emb: int, heads: int) -> None:
    """heads * (emb // heads) != emb: the split into heads cannot reshape, ValueError."""
    rng = np.random.default_rng(16)
    x, w_qkv, w_out = rng.standard_normal((1, 3, emb)), _w(rng, 3 * emb, emb), _w(rng, emb, emb)
    with pytest.raises(ValueError):
        ow.attention_block(x, w_qkv, w_out, heads)
