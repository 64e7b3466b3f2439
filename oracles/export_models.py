"""Forward passes of three small models in float64 numpy, parameters keyed by the torch
state_dict names of the modules they mirror. Torch-free.

- ``seq_model``: nn.Embedding ``embedding`` -> 1-layer nn.LSTM(batch_first=True) ``lstm``
  (zero initial state) -> nn.Linear ``head``, applied at every position.
- ``encoder_layer``: nn.TransformerEncoderLayer(batch_first=True, norm_first=False,
  activation=relu, dropout=0) in eval mode: x = norm1(x + self_attn(x)),
  x = norm2(x + linear2(relu(linear1(x)))), LayerNorm with the biased variance.
- ``convnet``: conv1 (3x3, padding 1) -> relu -> max-pool 2x2 stride 2 (floor) -> conv2
  (3x3, padding 1) -> relu -> mean over H, W -> ``head`` linear.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from oracles import recurrent


def _get(params: Mapping[str, np.ndarray], key: str, ndim: int) -> np.ndarray:
    if key not in params:
        raise ValueError(f"missing parameter {key!r}")
    a = np.asarray(params[key], dtype=np.float64)
    if a.ndim != ndim:
        raise ValueError(f"parameter {key!r} must be {ndim}-d, got shape {a.shape}")
    return a


def _linear(x: np.ndarray, params: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    w = _get(params, f"{name}.weight", 2)
    b = _get(params, f"{name}.bias", 1)
    if w.shape[1] != x.shape[-1] or b.shape != (w.shape[0],):
        raise ValueError(f"{name}: weight {w.shape} and bias {b.shape} do not fit input "
                         f"features {x.shape[-1]}")
    return x @ w.T + b


def _layer_norm(x: np.ndarray, params: Mapping[str, np.ndarray], name: str,
                eps: float) -> np.ndarray:
    w = _get(params, f"{name}.weight", 1)
    b = _get(params, f"{name}.bias", 1)
    if w.shape != (x.shape[-1],) or b.shape != w.shape:
        raise ValueError(f"{name}: weight {w.shape}, bias {b.shape}, features {x.shape[-1]}")
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def seq_model(tokens: np.ndarray, params: Mapping[str, np.ndarray]) -> np.ndarray:
    """Embedding -> batch_first LSTM -> linear head; tokens (N, S) ints -> (N, S, V_out)."""
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be a 2-d integer array, got {tokens.dtype} "
                         f"{tokens.shape}")
    emb = _get(params, "embedding.weight", 2)
    if tokens.size and (tokens.min() < 0 or tokens.max() >= emb.shape[0]):
        raise ValueError(f"tokens must lie in [0, {emb.shape[0]}), got "
                         f"[{tokens.min()}, {tokens.max()}]")
    lstm = {k[len("lstm."):]: v for k, v in params.items() if k.startswith("lstm.")}
    out, _, _ = recurrent.rnn("LSTM", emb[tokens], lstm, batch_first=True)
    return _linear(out, params, "head")


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def encoder_layer(x: np.ndarray, params: Mapping[str, np.ndarray], *, nhead: int,
                  eps: float = 1e-5) -> np.ndarray:
    """nn.TransformerEncoderLayer (batch_first, post-norm, relu, eval); (N, S, E) -> same."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 3:
        raise ValueError(f"x must be (N, S, E), got shape {x.shape}")
    n, s, e = x.shape
    if nhead < 1 or e % nhead:
        raise ValueError(f"embedding dim {e} is not divisible by nhead {nhead}")
    w_in = _get(params, "self_attn.in_proj_weight", 2)
    b_in = _get(params, "self_attn.in_proj_bias", 1)
    if w_in.shape != (3 * e, e) or b_in.shape != (3 * e,):
        raise ValueError(f"in_proj weight {w_in.shape} / bias {b_in.shape}, expected "
                         f"({3 * e}, {e}) / ({3 * e},)")
    d = e // nhead
    qkv = x @ w_in.T + b_in  # (N, S, 3E), rows q, k, v
    q, k, v = (a.reshape(n, s, nhead, d).transpose(0, 2, 1, 3)
               for a in np.split(qkv, 3, axis=-1))
    p = _softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(d))  # (N, h, S, S)
    attn = (p @ v).transpose(0, 2, 1, 3).reshape(n, s, e)
    x = _layer_norm(x + _linear(attn, params, "self_attn.out_proj"), params, "norm1", eps)
    ff = _linear(np.maximum(_linear(x, params, "linear1"), 0.0), params, "linear2")
    return _layer_norm(x + ff, params, "norm2", eps)


def _conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, padding: int) -> np.ndarray:
    """Cross-correlation as torch's Conv2d, stride 1: (N, C, H, W) -> (N, O, H', W')."""
    kh, kw = w.shape[2:]
    xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    win = sliding_window_view(xp, (kh, kw), axis=(2, 3))  # (N, C, H', W', kh, kw)
    return np.einsum("nchwij,ocij->nohw", win, w, optimize=True) + b[:, None, None]


def _conv_params(params: Mapping[str, np.ndarray], name: str, c_in: int,
                 ) -> tuple[np.ndarray, np.ndarray]:
    w = _get(params, f"{name}.weight", 4)
    b = _get(params, f"{name}.bias", 1)
    if w.shape[1:] != (c_in, 3, 3) or b.shape != (w.shape[0],):
        raise ValueError(f"{name}: weight {w.shape}, bias {b.shape}, expected "
                         f"(C_out, {c_in}, 3, 3) and (C_out,)")
    return w, b


def convnet(x: np.ndarray, params: Mapping[str, np.ndarray]) -> np.ndarray:
    """conv-relu-maxpool-conv-relu-global-mean-linear; (N, 3, H, W) -> (N, V_out)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"x must be (N, 3, H, W), got shape {x.shape}")
    if x.shape[2] < 2 or x.shape[3] < 2:
        raise ValueError(f"H and W must be >= 2 for the 2x2 max-pool, got {x.shape[2:]}")
    w1, b1 = _conv_params(params, "conv1", 3)
    y = np.maximum(_conv2d(x, w1, b1, 1), 0.0)
    n, c, h, w = y.shape
    h2, w2 = h // 2, w // 2
    y = y[:, :, :2 * h2, :2 * w2].reshape(n, c, h2, 2, w2, 2).max(axis=(3, 5))
    w2_, b2 = _conv_params(params, "conv2", c)
    y = np.maximum(_conv2d(y, w2_, b2, 1), 0.0)
    return _linear(y.mean(axis=(2, 3)), params, "head")
