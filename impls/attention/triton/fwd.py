"""Forward kernel: tiled online softmax in base 2 with float32 accumulation.

One program computes BLOCK_M query rows of one (batch, query head). It visits only the key
blocks listed for its query block in the block-sparsity table (KV_CNT, KV_IDX), applies
the score_mod to the scaled score (natural units, as FlexAttention), the mask_mod and the
sequence bounds, then works in base 2: p = exp2(s log2(e) - m). P is rounded to the input
dtype before the P V product (as FlashAttention). Fully masked rows give out = 0 and
lse = -inf. lse leaves the kernel in natural-log units.

FAULT (constexpr, for the suite's planted-fault tests only): 0 none, 1 skip the rescale of
the accumulator, 2 an off-by-one key bound, 3 drop the last partial key block, 4 lse = 0 on
fully masked rows.
"""

from __future__ import annotations

import triton
import triton.language as tl

from impls.attention.triton.tiles import load_tile, store_tile

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def attn_fwd(
    Q, K, V, OUT, LSE, KV_CNT, KV_IDX, AUXF, AUXI,
    s_qb, s_qh, s_qm, s_kb, s_kh, s_kn, s_vb, s_vh, s_vn, s_ob, s_oh, s_om,
    H, GROUP, SQ, SK, NUM_M, MAX_BLOCKS, sm_scale,
    D: tl.constexpr, DV: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    SCORE_MOD: tl.constexpr, MASK_MOD: tl.constexpr, PRECISION: tl.constexpr,
    FAULT: tl.constexpr,
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
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    table = (pid_bh * NUM_M + pid_m)
    n_blocks = tl.load(KV_CNT + table)
    key_end = SK
    if FAULT == 2:
        key_end = SK + 1
    for i in range(0, n_blocks):
        start_n = tl.load(KV_IDX + table * MAX_BLOCKS + i) * BLOCK_N
        skip = False
        if FAULT == 3:
            skip = start_n + BLOCK_N > SK
        if not skip:
            offs_n = start_n + tl.arange(0, BLOCK_N)
            col_ok = offs_n < key_end
            k = load_tile(K + b * s_kb + hk * s_kh, offs_n, offs_d, s_kn, key_end, D)
            s = tl.dot(q, tl.trans(k), input_precision=PRECISION) * sm_scale
            qi = offs_m[:, None]
            ki = offs_n[None, :]
            s = SCORE_MOD(s, b, h, qi, ki, AUXF, AUXI, SQ, SK, H)
            keep = row_ok[:, None] & col_ok[None, :] & MASK_MOD(b, h, qi, ki, AUXF, AUXI,
                                                                  SQ, SK, H)
            s = tl.where(keep, s * LOG2E, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            p = tl.exp2(s - m_safe[:, None])
            alpha = tl.exp2(m_i - m_safe)
            l_i = l_i * alpha + tl.sum(p, 1)
            if FAULT != 1:
                acc = acc * alpha[:, None]
            v = load_tile(V + b * s_vb + hk * s_vh, offs_n, offs_dv, s_vn, key_end, DV)
            acc += tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
            m_i = m_new
    live = l_i > 0
    l_safe = tl.where(live, l_i, 1.0)
    out = tl.where(live[:, None], acc / l_safe[:, None], 0.0)
    empty_lse = float("-inf")
    if FAULT == 4:
        empty_lse = 0.0
    lse = tl.where(live, (m_i + tl.log2(l_safe)) * LN2, empty_lse)
    store_tile(OUT + b * s_ob + h * s_oh, offs_m, offs_dv, s_om, SQ, DV, out)
    tl.store(LSE + pid_bh * SQ + offs_m, lse, mask=row_ok)
