"""The recurrent oracle against hand-computed single steps, an mpmath scalar re-implementation
at 40 digits, and torch's own nn.RNN / LSTM / GRU in float64 on CPU."""

from __future__ import annotations

import itertools
import math
import warnings

import mpmath
import numpy as np
import pytest
import torch

from oracles import recurrent

LOG2, LOG3 = math.log(2.0), math.log(3.0)


def _a(*v):
    return np.array(v, dtype=np.float64)


def _col(*v):
    return np.array(v, dtype=np.float64).reshape(-1, 1)


# --- hand-computed single steps (1 input, 1 hidden unit, batch 1) --------------------------

RNN_PARAMS = {"weight_ih_l0": _col(0.5), "weight_hh_l0": _col(-0.25),
              "bias_ih_l0": _a(0.1), "bias_hh_l0": _a(0.2)}


def test_rnn_tanh_hand_step():
    # 0.5*2 + 0.1 - 0.25*0.4 + 0.2 = 1.2; tanh(1.2) = 0.8336546070121552
    out, h = recurrent.rnn("RNN", np.full((1, 1, 1), 2.0), RNN_PARAMS,
                           h0=np.full((1, 1, 1), 0.4))
    assert out.shape == (1, 1, 1) and h.shape == (1, 1, 1)
    assert out[0, 0, 0] == pytest.approx(0.8336546070121552, abs=1e-15)
    assert h[0, 0, 0] == out[0, 0, 0]


def test_rnn_relu_hand_steps():
    # step 1: 1.2 as above -> 1.2; step 2: 0.5*(-3) + 0.1 - 0.25*1.2 + 0.2 = -1.5 -> 0
    x = np.array([2.0, -3.0]).reshape(2, 1, 1)
    out, h = recurrent.rnn("RNN", x, RNN_PARAMS, nonlinearity="relu",
                           h0=np.full((1, 1, 1), 0.4))
    np.testing.assert_allclose(out.ravel(), [1.2, 0.0], rtol=0, atol=1e-15)
    assert h[0, 0, 0] == 0.0


def test_lstm_hand_step():
    # x = 1, h0 = 1, c0 = 0.5; gate pre-activations i = 0, f = log 3, g = log 2, o = log 3:
    # i = 1/2, f = 3/4, g = tanh(log 2) = 3/5, o = 3/4; c = 0.75*0.5 + 0.5*0.6 = 0.675,
    # h = 0.75 * tanh(0.675) = 0.44119444229857907
    params = {"weight_ih_l0": _col(0.5, 1.0, 0.0, 0.0),
              "weight_hh_l0": _col(-1.0, 0.0, 0.0, 0.0),
              "bias_ih_l0": _a(0.5, 0.0, LOG2, 0.0),
              "bias_hh_l0": _a(0.0, LOG3 - 1.0, 0.0, LOG3)}
    out, h, c = recurrent.rnn("LSTM", np.ones((1, 1, 1)), params,
                              h0=np.ones((1, 1, 1)), c0=np.full((1, 1, 1), 0.5))
    assert c[0, 0, 0] == pytest.approx(0.675, abs=1e-15)
    assert h[0, 0, 0] == pytest.approx(0.44119444229857907, abs=1e-15)
    assert out[0, 0, 0] == h[0, 0, 0]


def test_gru_hand_step():
    # x = 1, h0 = 0.5; r = sig(0.4 - 0.8*0.5) = 1/2, z = sig(log 3 + 2*0.5 - 1) = 3/4,
    # n = tanh(0.2 + 0.1 + r*(0.4*0.5 + 0.6)) = tanh(0.7) (b_hn inside r's product),
    # h = 0.25*tanh(0.7) + 0.75*0.5 = 0.5260919442792908
    params = {"weight_ih_l0": _col(0.4, 0.0, 0.2), "weight_hh_l0": _col(-0.8, 2.0, 0.4),
              "bias_ih_l0": _a(0.0, LOG3, 0.1), "bias_hh_l0": _a(0.0, -1.0, 0.6)}
    out, h = recurrent.rnn("GRU", np.ones((1, 1, 1)), params, h0=np.full((1, 1, 1), 0.5))
    assert h[0, 0, 0] == pytest.approx(0.5260919442792908, abs=1e-15)
    assert out[0, 0, 0] == h[0, 0, 0]


# --- mpmath scalar re-implementation (2 steps, 2 hidden units, 3 inputs) -------------------

def _mp_affine(w, b, v):
    return [sum((mpmath.mpf(float(w[r, j])) * v[j] for j in range(len(v))), mpmath.mpf(0))
            + mpmath.mpf(float(b[r])) for r in range(w.shape[0])]


def _mp_sig(z):
    return 1 / (1 + mpmath.exp(-z))


def _mp_run(mode, x, p, h, c):
    hd = len(h)
    outs = []
    for t in range(x.shape[0]):
        xt = [mpmath.mpf(float(v)) for v in x[t, 0]]
        gx = _mp_affine(p["weight_ih_l0"], p["bias_ih_l0"], xt)
        gh = _mp_affine(p["weight_hh_l0"], p["bias_hh_l0"], h)
        if mode == "LSTM":
            pre = [gx[r] + gh[r] for r in range(4 * hd)]
            i, f, g, o = (pre[k * hd:(k + 1) * hd] for k in range(4))
            c = [_mp_sig(f[u]) * c[u] + _mp_sig(i[u]) * mpmath.tanh(g[u]) for u in range(hd)]
            h = [_mp_sig(o[u]) * mpmath.tanh(c[u]) for u in range(hd)]
        else:
            r = [_mp_sig(gx[u] + gh[u]) for u in range(hd)]
            z = [_mp_sig(gx[hd + u] + gh[hd + u]) for u in range(hd)]
            n = [mpmath.tanh(gx[2 * hd + u] + r[u] * gh[2 * hd + u]) for u in range(hd)]
            h = [(1 - z[u]) * n[u] + z[u] * h[u] for u in range(hd)]
        outs.append(list(h))
    return outs, h, c


@pytest.mark.parametrize("mode", ["LSTM", "GRU"])
def test_mpmath_two_steps(mode):
    rng = np.random.default_rng(7)
    g = recurrent.GATES[mode]
    p = {"weight_ih_l0": rng.uniform(-1, 1, (2 * g, 3)),
         "weight_hh_l0": rng.uniform(-1, 1, (2 * g, 2)),
         "bias_ih_l0": rng.uniform(-1, 1, 2 * g), "bias_hh_l0": rng.uniform(-1, 1, 2 * g)}
    x, h0, c0 = rng.uniform(-2, 2, (2, 1, 3)), rng.uniform(-1, 1, (1, 1, 2)), None
    kw = {"h0": h0}
    if mode == "LSTM":
        c0 = rng.uniform(-1, 1, (1, 1, 2))
        kw["c0"] = c0
    got = recurrent.rnn(mode, x, p, **kw)
    with mpmath.workdps(40):
        outs, h, c = _mp_run(mode, x, p, [mpmath.mpf(float(v)) for v in h0[0, 0]],
                             None if c0 is None else [mpmath.mpf(float(v)) for v in c0[0, 0]])
        want_out = np.array([[float(v) for v in o] for o in outs]).reshape(2, 1, 2)
        want = [want_out, np.array([float(v) for v in h]).reshape(1, 1, 2)]
        if c is not None:
            want.append(np.array([float(v) for v in c]).reshape(1, 1, 2))
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-14, atol=0)


# --- agreement with torch's modules in float64 ---------------------------------------------

def _torch_case(mode, *, seed=0, n_in=3, hidden=4, num_layers=1, bidirectional=False,
                batch_first=False, init=False, proj_size=0, bias=True, nonlinearity="tanh",
                seq=5, batch=2, x_scale=1.0, w_scale=1.0):
    torch.manual_seed(seed)
    kw = {"nonlinearity": nonlinearity} if mode == "RNN" else {}
    if proj_size:
        kw["proj_size"] = proj_size
    mod = getattr(torch.nn, mode)(n_in, hidden, num_layers=num_layers, bias=bias,
                                  batch_first=batch_first, bidirectional=bidirectional,
                                  **kw).double().eval()
    with torch.no_grad():
        for prm in mod.parameters():
            prm.mul_(w_scale)
    params = {k: v.detach().numpy().copy() for k, v in mod.state_dict().items()}
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(batch, seq, n_in) if batch_first else (seq, batch, n_in)) * x_scale
    d = 2 if bidirectional else 1
    h0 = rng.normal(size=(d * num_layers, batch, proj_size or hidden)) if init else None
    c0 = rng.normal(size=(d * num_layers, batch, hidden)) if init and mode == "LSTM" else None
    with torch.no_grad():
        tx = torch.from_numpy(x)
        if not init:
            want = mod(tx)
        elif mode == "LSTM":
            want = mod(tx, (torch.from_numpy(h0), torch.from_numpy(c0)))
        else:
            want = mod(tx, torch.from_numpy(h0))
    out, state = want
    want = (out, *state) if mode == "LSTM" else (out, state)
    got = recurrent.rnn(mode, x, params, num_layers=num_layers, bidirectional=bidirectional,
                        batch_first=batch_first, nonlinearity=nonlinearity, h0=h0, c0=c0,
                        proj_size=proj_size)
    assert len(got) == len(want)
    for a, b in zip(got, want, strict=True):
        assert a.dtype == np.float64 and a.shape == tuple(b.shape)
        np.testing.assert_allclose(a, b.numpy(), rtol=0, atol=1e-12)


GRID = list(itertools.product([1, 2], [False, True], [False, True], [False, True]))


@pytest.mark.parametrize("nonlinearity", ["tanh", "relu"])
@pytest.mark.parametrize(("layers", "bidir", "bf", "init"), GRID)
def test_rnn_vs_torch(nonlinearity, layers, bidir, bf, init):
    _torch_case("RNN", num_layers=layers, bidirectional=bidir, batch_first=bf, init=init,
                nonlinearity=nonlinearity)


@pytest.mark.parametrize("proj", [0, 2])
@pytest.mark.parametrize(("layers", "bidir", "bf", "init"), GRID)
def test_lstm_vs_torch(proj, layers, bidir, bf, init):
    _torch_case("LSTM", num_layers=layers, bidirectional=bidir, batch_first=bf, init=init,
                proj_size=proj)


@pytest.mark.parametrize(("layers", "bidir", "bf", "init"), GRID)
def test_gru_vs_torch(layers, bidir, bf, init):
    _torch_case("GRU", num_layers=layers, bidirectional=bidir, batch_first=bf, init=init)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_no_bias_vs_torch(mode):
    _torch_case(mode, bias=False, num_layers=2, bidirectional=True, init=True,
                proj_size=2 if mode == "LSTM" else 0)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_saturated_gates_no_warnings(mode):
    with warnings.catch_warnings(), np.errstate(over="raise", invalid="raise", divide="raise"):
        warnings.simplefilter("error")
        _torch_case(mode, seed=3, x_scale=300.0, w_scale=4.0, bidirectional=True)


def test_unbatched_hand_steps():
    # unbatched x (S=2, H_in=1), h0 (1, 1), batch_first ignored: the relu steps of
    # test_rnn_relu_hand_steps, outputs without a batch dim
    x = np.array([[2.0], [-3.0]])
    out, h = recurrent.rnn("RNN", x, RNN_PARAMS, nonlinearity="relu", batch_first=True,
                           h0=np.full((1, 1), 0.4))
    assert out.shape == (2, 1) and h.shape == (1, 1)
    np.testing.assert_allclose(out.ravel(), [1.2, 0.0], rtol=0, atol=1e-15)
    # the LSTM hand step of test_lstm_hand_step, unbatched: c = 0.675, h = 0.75 tanh(0.675)
    params = {"weight_ih_l0": _col(0.5, 1.0, 0.0, 0.0),
              "weight_hh_l0": _col(-1.0, 0.0, 0.0, 0.0),
              "bias_ih_l0": _a(0.5, 0.0, LOG2, 0.0),
              "bias_hh_l0": _a(0.0, LOG3 - 1.0, 0.0, LOG3)}
    out, h, c = recurrent.rnn("LSTM", np.ones((1, 1)), params, h0=np.ones((1, 1)),
                              c0=np.full((1, 1), 0.5))
    assert out.shape == (1, 1) and h.shape == (1, 1) and c.shape == (1, 1)
    assert c[0, 0] == pytest.approx(0.675, abs=1e-15)
    assert h[0, 0] == pytest.approx(0.44119444229857907, abs=1e-15)


@pytest.mark.parametrize("mode", ["RNN", "LSTM", "GRU"])
def test_unbatched_no_bias_vs_torch(mode):
    """Unbatched input through a 2-layer bidirectional module without biases, vs torch in
    float64 (torch's unbatched path)."""
    torch.manual_seed(0)
    m = getattr(torch.nn, mode)(3, 4, num_layers=2, bidirectional=True, bias=False).double()
    x, h0 = torch.randn(5, 3, dtype=torch.float64), torch.randn(4, 4, dtype=torch.float64)
    states = (h0, torch.randn(4, 4, dtype=torch.float64)) if mode == "LSTM" else h0
    with torch.no_grad():
        out, hn = m(x, states)
    p = {k: v.numpy() for k, v in m.state_dict().items()}
    got = recurrent.rnn(mode, x.numpy(), p, num_layers=2, bidirectional=True,
                        h0=h0.numpy(), c0=states[1].numpy() if mode == "LSTM" else None)
    want = [out, *(hn if mode == "LSTM" else (hn,))]
    assert [g.shape for g in got] == [tuple(w.shape) for w in want]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w.numpy(), rtol=0, atol=1e-12)


def test_single_step_single_batch_vs_torch():
    _torch_case("LSTM", seq=1, batch=1, n_in=1, hidden=1)


# --- error paths ---------------------------------------------------------------------------

def test_errors():
    x = np.zeros((2, 1, 1))
    with pytest.raises(ValueError, match="mode"):
        recurrent.rnn("LSTMX", x, RNN_PARAMS)
    bad = dict(RNN_PARAMS, weight_hh_l0=np.zeros((1, 2)))
    with pytest.raises(ValueError, match="weight_hh_l0"):
        recurrent.rnn("RNN", x, bad)
    with pytest.raises(ValueError, match="weight_ih_l0"):
        recurrent.rnn("LSTM", x, RNN_PARAMS)  # 1 row is not 4*hidden
    with pytest.raises(ValueError, match="x must be 2-d"):
        recurrent.rnn("RNN", np.zeros((2,)), RNN_PARAMS)
    with pytest.raises(ValueError, match="h0 must be 2-d"):
        recurrent.rnn("RNN", np.zeros((2, 1)), RNN_PARAMS, h0=np.zeros((1, 1, 1)))
    with pytest.raises(ValueError, match="h0"):
        recurrent.rnn("RNN", x, RNN_PARAMS, h0=np.zeros((2, 1, 1)))
    with pytest.raises(ValueError, match="missing"):
        recurrent.rnn("RNN", x, RNN_PARAMS, bidirectional=True)
    with pytest.raises(ValueError, match="unexpected"):
        recurrent.rnn("RNN", x, dict(RNN_PARAMS, weight_hr_l0=np.zeros((1, 1))))
    with pytest.raises(ValueError, match="nonlinearity"):
        recurrent.rnn("RNN", x, RNN_PARAMS, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="proj_size"):
        recurrent.rnn("GRU", x, RNN_PARAMS, proj_size=1)
    with pytest.raises(ValueError, match=">= 1"):
        recurrent.rnn("RNN", np.zeros((0, 1, 1)), RNN_PARAMS)
