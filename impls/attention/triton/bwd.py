"""Backward kernels: preprocess (Delta = rowsum(O * dO)), dK/dV, and dQ.

Both main kernels recompute P = exp2(s log2(e) - lse log2(e)) from the forward's lse, so
nothing of size Sq x Sk is stored; dS = P (dP - Delta) f'(s) with f the score_mod. The
dK/dV program owns one key block of one key/value head and walks every query head of its
group and every query block whose table lists that key block (Q_CNT, Q_IDX); the dQ program
owns one query block and walks its key blocks (KV_CNT, KV_IDX). No dependence on sequence
lengths being multiples of the blocks: every load and store is bounds-masked.
"""

from __future__ import annotations

import triton
import triton.language as tl

from impls.attention.triton.tiles import load_tile, store_tile

LOG2E = tl.constexpr(1.4426950408889634)


@triton.jit
def attn_bwd_preprocess(OUT, DO, DELTA, s_ob, s_oh, s_om, s_db, s_dh, s_dm, H, SQ,
                        DV: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_DV: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_dv = tl.arange(0, BLOCK_DV)
    o = load_tile(OUT + b * s_ob + h * s_oh, offs_m, offs_dv, s_om, SQ, DV).to(tl.float32)
    do = load_tile(DO + b * s_db + h * s_dh, offs_m, offs_dv, s_dm, SQ, DV).to(tl.float32)
    tl.store(DELTA + pid_bh * SQ + offs_m, tl.sum(o * do, 1), mask=offs_m < SQ)


@triton.jit
def _probs(q, k, b, h, offs_m, offs_n, lse, AUXF, AUXI, SQ, SK, H, sm_scale,
           SCORE_MOD: tl.constexpr, SCORE_GRAD: tl.constexpr, MASK_MOD: tl.constexpr,
           PRECISION: tl.constexpr):
    """P and f'(s) for one (query block, key block) tile."""
    s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * sm_scale
    qi = offs_m[:, None]
    ki = offs_n[None, :]
    grad = SCORE_GRAD(s, b, h, qi, ki, AUXF, AUXI, SQ, SK, H)
    s = SCORE_MOD(s, b, h, qi, ki, AUXF, AUXI, SQ, SK, H)
    keep = (qi < SQ) & (ki < SK) & MASK_MOD(b, h, qi, ki, AUXF, AUXI, SQ, SK, H)
    keep = keep & (lse[:, None] != float("-inf"))
    lse2 = tl.where(lse == float("-inf"), 0.0, lse * LOG2E)
    p = tl.where(keep, tl.exp2(s * LOG2E - lse2[:, None]), 0.0)
    return p, grad


@triton.jit
def attn_bwd_dkdv(
    Q, K, V, DO, LSE, DELTA, DK, DV_OUT, Q_CNT, Q_IDX, AUXF, AUXI,
    s_qb, s_qh, s_qm, s_kb, s_kh, s_kn, s_vb, s_vh, s_vn, s_db, s_dh, s_dm,
    s_dkb, s_dkh, s_dkn, s_dvb, s_dvh, s_dvn,
    H, HKV, GROUP, SQ, SK, NUM_N, MAX_BLOCKS, sm_scale,
    D: tl.constexpr, DV: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    SCORE_MOD: tl.constexpr, SCORE_GRAD: tl.constexpr, MASK_MOD: tl.constexpr,
    PRECISION: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_bk = tl.program_id(1)
    b = pid_bk // HKV
    hk = pid_bk % HKV
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    k = load_tile(K + b * s_kb + hk * s_kh, offs_n, offs_d, s_kn, SK, D)
    v = load_tile(V + b * s_vb + hk * s_vh, offs_n, offs_dv, s_vn, SK, DV)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_DV], tl.float32)
    for g in range(0, GROUP):
        h = hk * GROUP + g
        table = (b * H + h) * NUM_N + pid_n
        for i in range(0, tl.load(Q_CNT + table)):
            start_m = tl.load(Q_IDX + table * MAX_BLOCKS + i) * BLOCK_M
            offs_m = start_m + tl.arange(0, BLOCK_M)
            row_ok = offs_m < SQ
            q = load_tile(Q + b * s_qb + h * s_qh, offs_m, offs_d, s_qm, SQ, D)
            do = load_tile(DO + b * s_db + h * s_dh, offs_m, offs_dv, s_dm, SQ, DV)
            lse = tl.load(LSE + (b * H + h) * SQ + offs_m, mask=row_ok, other=float("-inf"))
            delta = tl.load(DELTA + (b * H + h) * SQ + offs_m, mask=row_ok, other=0.0)
            p, grad = _probs(q, k, b, h, offs_m, offs_n, lse, AUXF, AUXI, SQ, SK, H, sm_scale,
                             SCORE_MOD, SCORE_GRAD, MASK_MOD, PRECISION)
            dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=PRECISION)
            dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
            ds = p * (dp - delta[:, None]) * grad
            dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=PRECISION)
    store_tile(DK + b * s_dkb + hk * s_dkh, offs_n, offs_d, s_dkn, SK, D, dk * sm_scale)
    store_tile(DV_OUT + b * s_dvb + hk * s_dvh, offs_n, offs_dv, s_dvn, SK, DV, dv)


@triton.jit
def attn_bwd_dq(
    Q, K, V, DO, LSE, DELTA, DQ, KV_CNT, KV_IDX, AUXF, AUXI,
    s_qb, s_qh, s_qm, s_kb, s_kh, s_kn, s_vb, s_vh, s_vn, s_db, s_dh, s_dm,
    s_dqb, s_dqh, s_dqm,
    H, GROUP, SQ, SK, NUM_M, MAX_BLOCKS, sm_scale,
    D: tl.constexpr, DV: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    SCORE_MOD: tl.constexpr, SCORE_GRAD: tl.constexpr, MASK_MOD: tl.constexpr,
    PRECISION: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // H
    h = pid_bh % H
    hk = h // GROUP
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    offs_dv = tl.arange(0, BLOCK_DV)
    row_ok = offs_m < SQ
    q = load_tile(Q + b * s_qb + h * s_qh, offs_m, offs_d, s_qm, SQ, D)
    do = load_tile(DO + b * s_db + h * s_dh, offs_m, offs_dv, s_dm, SQ, DV)
    lse = tl.load(LSE + pid_bh * SQ + offs_m, mask=row_ok, other=float("-inf"))
    delta = tl.load(DELTA + pid_bh * SQ + offs_m, mask=row_ok, other=0.0)
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    table = pid_bh * NUM_M + pid_m
    for i in range(0, tl.load(KV_CNT + table)):
        start_n = tl.load(KV_IDX + table * MAX_BLOCKS + i) * BLOCK_N
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = load_tile(K + b * s_kb + hk * s_kh, offs_n, offs_d, s_kn, SK, D)
        v = load_tile(V + b * s_vb + hk * s_vh, offs_n, offs_dv, s_vn, SK, DV)
        p, grad = _probs(q, k, b, h, offs_m, offs_n, lse, AUXF, AUXI, SQ, SK, H, sm_scale,
                         SCORE_MOD, SCORE_GRAD, MASK_MOD, PRECISION)
        dp = tl.dot(do, tl.trans(v), input_precision=PRECISION)
        ds = p * (dp - delta[:, None]) * grad
        dq += tl.dot(ds.to(k.dtype), k, input_precision=PRECISION)
    store_tile(DQ + b * s_dqb + h * s_dqh, offs_m, offs_d, s_dqm, SQ, D, dq * sm_scale)
