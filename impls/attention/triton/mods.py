"""The attention catalogue's score_mods and mask_mods as Triton functions.

Uniform signatures, so kernels take any of them as a ``tl.constexpr`` argument:

    score_mod(s, b, h, q, kv, AUXF, AUXI, SQ, SK, H) -> modified score (natural units)
    score_grad(s, b, h, q, kv, AUXF, AUXI, SQ, SK, H) -> d(modified)/ds
    mask_mod(b, h, q, kv, AUXF, AUXI, SQ, SK, H) -> bool, True = attend

q is a (BLOCK_M, 1) and kv a (1, BLOCK_N) block of indices (rows past SQ and columns past
SK are masked by the kernel; loads here mask them too). Parameters live in two small
buffers, AUXF (float32) and AUXI (int32), laid out per mod by impls/attention/triton_fa.py.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _tanh(x):
    """tanh in float32 without cancellation: odd Taylor series below |x| = 1/8
    (truncation < 1e-12), (1 - e^-2|x|) / (1 + e^-2|x|) above."""
    ax = tl.abs(x)
    e = tl.exp(-2.0 * ax)
    big = (1.0 - e) / (1.0 + e)
    x2 = ax * ax
    small = ax * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0
                                                                     + x2 * (62.0 / 2835.0)))))
    t = tl.where(ax < 0.125, small, big)
    return tl.where(x < 0, -t, t)


# ------------------------------------------------------------------ score mods
@triton.jit
def no_score_mod(s, b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    return s


@triton.jit
def unit_grad(s, b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    return tl.full(s.shape, 1.0, tl.float32)


@triton.jit
def alibi(s, b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    slope = tl.load(AUXF + h)
    return s + slope * (kv - q - (SK - SQ)).to(tl.float32)


@triton.jit
def softcap(s, b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    cap = tl.load(AUXF)
    return cap * _tanh(s / cap)


@triton.jit
def softcap_grad(s, b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    cap = tl.load(AUXF)
    t = _tanh(s / cap)
    return 1.0 - t * t


@triton.jit
def rel_bias(s, b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    ok = (q < SQ) & (kv < SK)
    return s + tl.load(AUXF + (kv - q + SQ - 1), mask=ok, other=0.0)


@triton.jit
def bias_lookup(s, b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    ok = (q < SQ) & (kv < SK)
    return s + tl.load(AUXF + ((b * H + h) * SQ + q) * SK + kv, mask=ok, other=0.0)


@triton.jit
def head_scale(s, b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    return s * tl.load(AUXF + h)


@triton.jit
def head_scale_grad(s, b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    return tl.full(s.shape, 1.0, tl.float32) * tl.load(AUXF + h)


# ------------------------------------------------------------------ mask mods
@triton.jit
def no_mask(b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    return (q >= 0) & (kv >= 0)


@triton.jit
def causal_tl(b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    return q >= kv


@triton.jit
def causal_br(b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    return q + (SK - SQ) >= kv


@triton.jit
def sliding_window(b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    qk = q + (SK - SQ)
    return (qk >= kv) & (qk - kv < tl.load(AUXI))


@triton.jit
def prefix_lm(b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    return (kv < tl.load(AUXI)) | (q + (SK - SQ) >= kv)


@triton.jit
def document(b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    dq = tl.load(AUXI + q, mask=q < SQ, other=-1)
    dk = tl.load(AUXI + SQ + kv, mask=kv < SK, other=-2)
    return dq == dk


@triton.jit
def block_sparse(b, h, q, kv, AUXF, AUXI, SQ, SK, H):
    # AUXI: dead0, dead1, nq128, nk128, nq16, nk16, coarse (H, nq128, nk128), fine (nq16, nk16)
    nq128 = tl.load(AUXI + 2)
    nk128 = tl.load(AUXI + 3)
    nk16 = tl.load(AUXI + 5)
    ok = (q < SQ) & (kv < SK)
    coarse = tl.load(AUXI + 6 + (h * nq128 + q // 128) * nk128 + kv // 128, mask=ok, other=0)
    fine_at = AUXI + 6 + H * nq128 * nk128 + (q // 16) * nk16 + kv // 16
    fine = tl.load(fine_at, mask=ok, other=0)
    alive = (q != tl.load(AUXI)) & (q != tl.load(AUXI + 1))
    return (coarse != 0) & (fine != 0) & alive
