"""Multi-layer, optionally bidirectional RNN / LSTM / GRU forward in float64 numpy. Torch-free.

Parameters are keyed by the state_dict names of torch.nn.RNN / LSTM / GRU: ``weight_ih_l{k}``,
``weight_hh_l{k}``, ``bias_ih_l{k}``, ``bias_hh_l{k}``, ``weight_hr_l{k}`` (LSTM with
proj_size > 0), and ``..._reverse`` for the reverse direction. Absent biases are zero.

Equations, as in the torch docs (https://pytorch.org/docs/stable/generated/torch.nn.RNN.html,
.../torch.nn.LSTM.html, .../torch.nn.GRU.html), with x_t the layer's input and h the state:

- RNN:  h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh),  act = tanh or relu.
- LSTM: the rows of W_ih, W_hh, b_ih, b_hh are the gates i, f, g, o, in that order;
        i, f, o = sigmoid(.), g = tanh(.) of x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh,
        c_t = f * c_{t-1} + i * g,  h_t = o * tanh(c_t),
        then h_t = h_t W_hr^T when proj_size > 0 (c_t keeps the hidden size).
- GRU:  rows r, z, n:  r = sigmoid(W_ir x_t + b_ir + W_hr h + b_hr),
        z = sigmoid(W_iz x_t + b_iz + W_hz h + b_hz),
        n = tanh(W_in x_t + b_in + r * (W_hn h + b_hn)),  h_t = (1 - z) * n + z * h.

Layer l > 0 reads the concatenation [forward, reverse] of layer l-1's outputs. The reverse
direction runs t = S-1 .. 0; its output at t is its state after consuming x_t. State index
is layer * D + direction. Dropout is not modelled (eval mode). Sigmoid is scipy's expit,
which neither overflows nor warns for large |z|.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy.special import expit

GATES = {"RNN": 1, "LSTM": 4, "GRU": 3}


def _param(params: Mapping[str, np.ndarray], key: str, shape: tuple[int, ...],
           required: bool = True) -> np.ndarray | None:
    if key not in params:
        if required:
            raise ValueError(f"missing parameter {key!r}")
        return None
    a = np.asarray(params[key], dtype=np.float64)
    if a.shape != shape:
        raise ValueError(f"parameter {key!r} has shape {a.shape}, expected {shape}")
    return a


def _step(mode: str, act, gx: np.ndarray, h: np.ndarray, c: np.ndarray | None,
          w_hh: np.ndarray, b_hh: np.ndarray, w_hr: np.ndarray | None,
          ) -> tuple[np.ndarray, np.ndarray | None]:
    """One time step; gx = x_t W_ih^T + b_ih, shape (N, G*H)."""
    gh = h @ w_hh.T + b_hh
    if mode == "RNN":
        return act(gx + gh), None
    if mode == "LSTM":
        i, f, g, o = np.split(gx + gh, 4, axis=-1)
        c = expit(f) * c + expit(i) * np.tanh(g)
        h = expit(o) * np.tanh(c)
        if w_hr is not None:
            h = h @ w_hr.T
        return h, c
    xr, xz, xn = np.split(gx, 3, axis=-1)
    hr, hz, hn = np.split(gh, 3, axis=-1)
    r, z = expit(xr + hr), expit(xz + hz)
    n = np.tanh(xn + r * hn)
    return (1.0 - z) * n + z * h, None


def rnn(mode: str, x: np.ndarray, params: Mapping[str, np.ndarray], *, num_layers: int = 1,
        bidirectional: bool = False, batch_first: bool = False, nonlinearity: str = "tanh",
        h0: np.ndarray | None = None, c0: np.ndarray | None = None, proj_size: int = 0,
        ) -> tuple[np.ndarray, ...]:
    """torch.nn.{RNN,LSTM,GRU} forward (eval mode) in float64.

    x is (S, N, H_in), or (N, S, H_in) when batch_first; h0 is (D*num_layers, N, H_out) and c0
    (D*num_layers, N, H_cell), zeros when None. Unbatched, as torch takes it: x (S, H_in)
    (batch_first ignored), h0 (D*num_layers, H_out), c0 (D*num_layers, H_cell); the
    outputs then have no batch dim either. Returns (output, h_n) for RNN and GRU and
    (output, h_n, c_n) for LSTM, with output (S, N, D*H_out) or (N, S, D*H_out).
    """
    if mode not in GATES:
        raise ValueError(f"mode must be one of {sorted(GATES)}, got {mode!r}")
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
    if mode != "RNN" and nonlinearity != "tanh":
        raise ValueError(f"nonlinearity applies to mode 'RNN' only, not {mode!r}")
    if proj_size < 0 or (proj_size > 0 and mode != "LSTM"):
        raise ValueError(f"proj_size must be 0, or > 0 for LSTM only (got {proj_size})")
    if c0 is not None and mode != "LSTM":
        raise ValueError("c0 is for mode 'LSTM' only")
    if num_layers < 1:
        raise ValueError(f"num_layers must be >= 1, got {num_layers}")
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 2:  # unbatched (torch's docs): x (S, H_in), states (D*num_layers, H)
        states = {"h0": h0, "c0": c0}
        for name, a in states.items():
            if a is not None and np.ndim(a) != 2:
                raise ValueError(f"{name} must be 2-d for an unbatched x, got shape "
                                 f"{np.shape(a)}")
        lifted = {k: None if a is None else np.asarray(a, dtype=np.float64)[:, None]
                  for k, a in states.items()}
        outs = rnn(mode, x[:, None], params, num_layers=num_layers,
                   bidirectional=bidirectional, nonlinearity=nonlinearity,
                   proj_size=proj_size, **lifted)  # batch_first has no effect unbatched
        return (np.ascontiguousarray(outs[0][:, 0]), *(o[:, 0] for o in outs[1:]))
    if x.ndim != 3:
        raise ValueError(f"x must be 2-d (S, H_in: unbatched), 3-d (S, N, H_in) or "
                         f"(N, S, H_in), got shape {x.shape}")
    if batch_first:
        x = x.transpose(1, 0, 2)
    s, n, _ = x.shape
    if s < 1 or n < 1:
        raise ValueError(f"need sequence length and batch >= 1, got x shape {x.shape}")

    g = GATES[mode]
    if "weight_ih_l0" not in params:
        raise ValueError("missing parameter 'weight_ih_l0'")
    w0 = np.shape(params["weight_ih_l0"])
    if len(w0) != 2 or w0[0] % g or w0[0] == 0:
        raise ValueError(f"weight_ih_l0 has shape {w0}, expected ({g}*hidden, H_in)")
    hidden = w0[0] // g
    if proj_size >= hidden and proj_size > 0:
        raise ValueError(f"proj_size ({proj_size}) must be smaller than hidden ({hidden})")
    h_out = proj_size or hidden
    nd = 2 if bidirectional else 1
    suffixes = ["", "_reverse"][:nd]

    expected = set()
    for layer in range(num_layers):
        for sfx in suffixes:
            names = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"]
            names += ["weight_hr"] if proj_size else []
            expected |= {f"{name}_l{layer}{sfx}" for name in names}
    unknown = sorted(set(params) - expected)
    if unknown:
        raise ValueError(f"unexpected parameters {unknown} for {mode} with num_layers="
                         f"{num_layers}, bidirectional={bidirectional}, proj_size={proj_size}")

    def _state(a: np.ndarray | None, name: str, size: int) -> np.ndarray:
        want = (nd * num_layers, n, size)
        if a is None:
            return np.zeros(want)
        a = np.asarray(a, dtype=np.float64)
        if a.shape != want:
            raise ValueError(f"{name} has shape {a.shape}, expected {want}")
        return a

    h_init = _state(h0, "h0", h_out)
    c_init = _state(c0, "c0", hidden) if mode == "LSTM" else None
    act = np.tanh if nonlinearity == "tanh" else (lambda v: np.maximum(v, 0.0))

    inp, h_n, c_n = x, [], []
    for layer in range(num_layers):
        outs = []
        for d, sfx in enumerate(suffixes):
            key = f"_l{layer}{sfx}"
            w_ih = _param(params, "weight_ih" + key, (g * hidden, inp.shape[2]))
            w_hh = _param(params, "weight_hh" + key, (g * hidden, h_out))
            b_ih = _param(params, "bias_ih" + key, (g * hidden,), required=False)
            b_hh = _param(params, "bias_hh" + key, (g * hidden,), required=False)
            w_hr = (_param(params, "weight_hr" + key, (proj_size, hidden))
                    if proj_size else None)
            b_ih = np.zeros(g * hidden) if b_ih is None else b_ih
            b_hh = np.zeros(g * hidden) if b_hh is None else b_hh
            gx = inp @ w_ih.T + b_ih  # (S, N, G*H)
            idx = layer * nd + d
            h = h_init[idx]
            c = c_init[idx] if c_init is not None else None
            out = np.empty((s, n, h_out))
            for t in (range(s - 1, -1, -1) if d else range(s)):
                h, c = _step(mode, act, gx[t], h, c, w_hh, b_hh, w_hr)
                out[t] = h
            outs.append(out)
            h_n.append(h)
            c_n.append(c)
        inp = np.concatenate(outs, axis=2)

    output = inp.transpose(1, 0, 2) if batch_first else inp
    output = np.ascontiguousarray(output)
    if mode == "LSTM":
        return output, np.stack(h_n), np.stack(c_n)
    return output, np.stack(h_n)
