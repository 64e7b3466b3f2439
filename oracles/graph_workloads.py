"""The graphs area's workloads in numpy (torch-free): what one eager step computes.

Every function takes ``work`` (the numpy dtype the arithmetic runs in: float64 for the
oracle, float32 for the same-precision baseline of the error-ratio rule) and ``rnd`` (applied
to every intermediate a kernel would store: identity for the oracle, rounding to the case's
dtype for the baseline). Inputs are float64 arrays; results are float64 arrays.

Conventions follow torch: ``linear(x, w, b) = x w^T + b``; Adam is torch.optim.Adam with
its defaults (betas 0.9 / 0.999, eps 1e-8, no weight decay, no amsgrad):

    t += 1;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
    p -= (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)

(torch/optim/adam.py, ``_single_tensor_adam``). Scaled dot-product attention is
softmax(q k^T / sqrt(D) + causal mask) v with the mask on j > i.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

Array = np.ndarray
Round = Callable[[Array], Array]
BETAS = (0.9, 0.999)
EPS = 1e-8


def _same(x: Array) -> Array:
    return x


def _cast(arrays: Sequence[Array], work: type) -> list[Array]:
    return [np.asarray(a, dtype=np.float64).astype(work) for a in arrays]


def matmul(a: Array, b: Array, work: type = np.float64) -> Array:
    """a @ b (batched over leading dims). In float64 by BLAS; in a lower ``work`` precision
    by sequential accumulation over the inner dimension, a separately rounded product and
    sum per term: the least accurate standard order, so that a same-precision baseline
    errs at least as much as a kernel's blocked or FMA accumulation typically does."""
    a, b = np.asarray(a, dtype=work), np.asarray(b, dtype=work)
    if work == np.float64:
        return a @ b
    acc = np.zeros(np.broadcast_shapes((*a.shape[:-1], 1), (*b.shape[:-2], 1, b.shape[-1])),
                   dtype=work)
    for i in range(a.shape[-1]):
        acc = (acc + (a[..., :, i:i + 1] * b[..., i:i + 1, :]).astype(work)).astype(work)
    return acc


def total(a: Array, axis: int, work: type = np.float64) -> Array:
    """Sum over ``axis``: pairwise (numpy) in float64, sequential in a lower precision."""
    a = np.asarray(a, dtype=work)
    if work == np.float64:
        return a.sum(axis=axis)
    return np.take(np.cumsum(a, axis=axis, dtype=work), -1, axis=axis)


def _out(x: Array, rnd: Round) -> Array:
    return np.asarray(rnd(np.asarray(x, dtype=np.float64)), dtype=np.float64)


def linear(x: Array, w: Array, b: Array, work: type = np.float64, rnd: Round = _same) -> Array:
    x, w, b = _cast((x, w, b), work)
    return _out((matmul(x, w.T, work) + b).astype(work), rnd)


def mlp(x: Array, w1: Array, b1: Array, w2: Array, b2: Array, work: type = np.float64,
        rnd: Round = _same) -> Array:
    """relu(x w1^T + b1) w2^T + b2, with the hidden layer stored (rounded) once."""
    h = np.maximum(linear(x, w1, b1, work, rnd), 0.0)
    return linear(h, w2, b2, work, rnd)


def attention_block(x: Array, w_qkv: Array, w_out: Array, heads: int,
                    work: type = np.float64, rnd: Round = _same) -> Array:
    """out-projection of causal multi-head attention of (q, k, v) = x w_qkv^T split in
    three; x is (B, S, E), heads divide E."""
    bsz, seq, emb = x.shape
    d = emb // heads
    qkv = linear(x, w_qkv, np.zeros(3 * emb), work, rnd)
    q, k, v = (qkv[..., i * emb:(i + 1) * emb].reshape(bsz, seq, heads, d).transpose(0, 2, 1, 3)
               for i in range(3))
    q, k, v = _cast((q, k, v), work)
    s = _out(matmul(q, k.transpose(0, 1, 3, 2), work) / np.sqrt(work(d)), rnd).astype(work)
    s = np.where(np.tril(np.ones((seq, seq), dtype=bool)), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p = _out(p / total(p, -1, work)[..., None], rnd).astype(work)
    o = _out(matmul(p, v, work), rnd).transpose(0, 2, 1, 3).reshape(bsz, seq, emb)
    return linear(o, w_out, np.zeros(emb), work, rnd)


def state_update(state: Array, x: Array, w: Array, decay: float, work: type = np.float64,
                 rnd: Round = _same) -> Array:
    """state <- decay * state + (1 - decay) * tanh(x w^T), the new state (the scaled state
    stored once, as ``state.mul_(decay).add_(t, alpha=1 - decay)`` does)."""
    z = linear(x, w, np.zeros(w.shape[0]), work, rnd)
    state, z = _cast((state, z), work)
    t = _out(np.tanh(z).astype(work), rnd).astype(work)
    scaled = _out((work(decay) * state).astype(work), rnd).astype(work)
    return _out((scaled + work(1 - decay) * t).astype(work), rnd)


def tanh_mlp_loss_grads(x: Array, y: Array, params: Sequence[Array], work: type = np.float64,
                        rnd: Round = _same) -> tuple[float, list[Array]]:
    """mean((tanh(x w1^T + b1) w2^T + b2 - y)^2) and its gradients (w1, b1, w2, b2)."""
    w1, b1, w2, b2 = params
    h = _out(np.tanh(linear(x, w1, b1, work, rnd).astype(work)), rnd)
    out = linear(h, w2, b2, work, rnd)
    x, y, h, out, w2 = _cast((x, y, h, out, w2), work)
    diff = out - y
    loss = float(_out(total((diff * diff).ravel(), 0, work) / work(diff.size), rnd))
    dout = _out((work(2.0 / diff.size) * diff).astype(work), rnd).astype(work)
    dw2, db2 = _out(matmul(dout.T, h, work), rnd), _out(total(dout, 0, work), rnd)
    dh = _out(matmul(dout, w2, work), rnd).astype(work)
    dz = _out(dh * (work(1) - h * h), rnd).astype(work)
    dw1, db1 = _out(matmul(dz.T, x, work), rnd), _out(total(dz, 0, work), rnd)
    return loss, [dw1, db1, dw2, db2]


def adam_step(params: Sequence[Array], grads: Sequence[Array], exp_avg: Sequence[Array],
              exp_avg_sq: Sequence[Array], step: float, lr: float, work: type = np.float64,
              rnd: Round = _same) -> tuple[list[Array], list[Array], list[Array], float]:
    """One Adam step: new (params, exp_avg, exp_avg_sq, step)."""
    # the complements in float64 first, as torch does (1 - float32(0.999) is 1.3e-5 off)
    b1, b2 = work(BETAS[0]), work(BETAS[1])
    a1, a2 = work(1 - BETAS[0]), work(1 - BETAS[1])
    t = step + 1
    c1, c2 = 1 - BETAS[0] ** t, np.sqrt(1 - BETAS[1] ** t)
    new_p, new_m, new_v = [], [], []
    for p, g, m, v in zip(params, grads, exp_avg, exp_avg_sq, strict=True):
        p, g, m, v = _cast((p, g, m, v), work)
        m = _out(b1 * m + a1 * g, rnd).astype(work)
        v = _out(b2 * v + a2 * g * g, rnd).astype(work)
        denom = _out(np.sqrt(v) / work(c2) + work(EPS), rnd).astype(work)
        p = _out(p - work(lr / c1) * (m / denom), rnd)
        new_p.append(p)
        new_m.append(np.asarray(m, dtype=np.float64))
        new_v.append(np.asarray(v, dtype=np.float64))
    return new_p, new_m, new_v, float(t)
