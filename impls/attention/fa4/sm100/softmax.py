"""Softmax and correction roles of the sm100 forward (spec.py forward steps 2-7).

Softmax (warps 0-3, thread t owns query row t of the tile = TMEM lane t), per kv tile i:
  fwd 1  wait S_i (TMEM buffer i % 2), tcgen05.ld the row (128 fp32 columns) to registers;
  fwd 2  x = S (no score_mod) or x = score_mod(S * scale) (softcap, ALiBi);
  fwd 3  x = -inf where masked (kv >= Sk, causal / window / document);
  fwd 4  t = max x; m_new = max(m, t); rescale iff m = -inf or (m_new - m) * c > 8:
         alpha = ex2((m - m_new) * c) (1 if m = -inf), l *= alpha, m = m_new; alpha goes to
         the correction warps through shared memory;
  fwd 5  mc = m * c (0 if m = -inf); y = fma(x, c, -mc); P = ex2.approx(y), or the software
         exp2 (exp2.py) on columns j % 32 >= EMU_FROM;
  fwd 6  l += sum_j P_j (fp32, column order, unrounded P); P rounded (RNE) to the input dtype
         and tcgen05.st into TMEM over S_i, for the MMA warp's O += P V.
  end    a final (l, mc) entry for the correction warps.
Correction (warps 4-7, thread t owns O row t): per tile i > 0 waits PV_{i-1}, O *= alpha_i
(skipped when alpha == 1 for the whole warp), then lets PV_i run (fwd 4); at the end
(fwd 7) out = dtype(O * (1 / l)), or 0 when l == 0, into shared memory for the epilogue
warp's TMA store, and lse = (mc + log2 l) * ln 2, or -inf when l == 0.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import tcgen05
from cutlass.cute.typing import Float32, Int32

from impls.attention.fa4.sm100.exp2 import (
    add_rn,
    div_rn,
    exp2_hw,
    exp2_sw,
    fma_rn,
    mul_rn,
    sub_rn,
    tcgen05_fence_after,
    tcgen05_fence_before,
)
from impls.attention.fa4.sm100.roles import TMEM_O, s_buf
from impls.attention.fa4.spec import BLOCK_M, BLOCK_N, EMU_FROM, LN2, RESCALE_THRESHOLD

NEG_INF = -float("inf")
O_CHUNK = 32  # O columns per tcgen05.ld/st in the correction warps


def _sel(cond, a, b) -> Float32:
    return Float32(cutlass.select_(cond, Float32(a), Float32(b)))


@cute.jit
def score(cfg, s: Float32, j: int, rel: Int32, hi_col: Int32, lo_col: Int32, scale: Float32,
          softcap: Float32, slope: Float32, doc_row: Int32, doc_col: Int32) -> Float32:
    """spec fwd 2-3 for column j of the tile: the modified score x, or -inf where masked.

    rel = kv0 - q - (Sk - Sq) (so kv - q - off = rel + j); the masks as column bounds:
    j <= hi_col covers kv < Sk and, for causal/window, kv <= q + off; j >= lo_col the
    window's q + off - kv < w; document: doc_q[q] == doc_kv[kv] (doc_row == doc_col).
    """
    x = s
    if cutlass.const_expr(cfg.score_mod == "softcap"):  # cap * tanh(s * scale / cap)
        x = mul_rn(softcap, cute.math.tanh(div_rn(mul_rn(s, scale), softcap), fastmath=False))
    if cutlass.const_expr(cfg.score_mod == "alibi"):  # s * scale + slope[h] * (kv - q - off)
        x = add_rn(mul_rn(s, scale), mul_rn(slope, Float32(rel + j)))
    x = _sel(j <= hi_col, x, NEG_INF)
    if cutlass.const_expr(cfg.mask == "sliding_window"):
        x = _sel(j >= lo_col, x, NEG_INF)
    if cutlass.const_expr(cfg.mask == "document"):
        x = _sel(doc_row == doc_col, x, NEG_INF)
    return x


@cute.jit
def softmax_role(cfg, s_layout, c_s, tmem_ptr, s_stats, s_cons, p_prod, stats_prod, slopes, doc_q,
                 doc_kv, scale: Float32, c: Float32, softcap: Float32, window: Int32,
                 m_block: Int32, head: Int32, sq: Int32, sk: Int32, hi: Int32, n: Int32,
                 tidx: Int32, s_base=0, s_col=None):
    """One Q tile's softmax (spec fwd 2-6), S_i in TMEM buffer s_buf(s_base, i), or always at
    column ``s_col`` (ping-pong: one S buffer per Q tile); returns the participants it
    advanced."""
    t_s = cute.make_tensor(tmem_ptr, s_layout)
    ld_atom = cute.make_copy_atom(tcgen05.copy.Ld32x32bOp(tcgen05.copy.Repetition(32)),
                                  Float32)
    tiled_ld = tcgen05.make_tmem_copy(ld_atom, t_s)
    thr_ld = tiled_ld.get_slice(tidx)
    t_ld = thr_ld.partition_S(t_s)
    r_s = cute.make_rmem_tensor(thr_ld.partition_D(c_s).shape, Float32)
    # P (16-bit, BLOCK_N per row) packed two per 32-bit TMEM column over the start of S_i.
    p_cols = BLOCK_N * cfg.dtype.width // 32
    t_p = cute.make_tensor(tmem_ptr, cute.composition(s_layout, cute.make_layout((128, p_cols))))
    c_p = cute.make_tensor(c_s.iterator, cute.composition(c_s.layout,
                                                          cute.make_layout((128, p_cols))))
    st_atom = cute.make_copy_atom(tcgen05.copy.St32x32bOp(tcgen05.copy.Repetition(32)),
                                  Float32)
    tiled_st = tcgen05.make_tmem_copy(st_atom, t_p)
    thr_st = tiled_st.get_slice(tidx)
    t_st = thr_st.partition_D(t_p)
    r_p32 = cute.make_rmem_tensor(thr_st.partition_S(c_p).shape, Float32)
    r_p = cute.make_tensor(cute.recast_ptr(r_p32.iterator, dtype=cfg.dtype), r_s.layout)

    row = thr_ld.partition_D(c_s)[0][0]  # this thread's row (TMEM lane); register j = column j
    q = m_block * BLOCK_M + row
    off = sk - sq
    lane = cute.arch.lane_idx()
    slope = Float32(0.0)
    if cutlass.const_expr(cfg.score_mod == "alibi"):
        slope = slopes[head]
    doc_row = Int32(0)
    if cutlass.const_expr(cfg.mask == "document"):
        doc_row = Int32(doc_q[cutlass.min(q, sq - 1)])
    m = Float32(NEG_INF)
    l_sum = Float32(0.0)
    mc = Float32(0.0)
    for i in cutlass.range(n, unroll=1):
        kv0 = (hi - 1 - i) * BLOCK_N
        hs = s_cons.wait_and_advance()
        tcgen05_fence_after()
        col = 128 * s_buf(s_base, i) if s_col is None else s_col
        cute.copy(tiled_ld, cute.make_tensor(t_ld.iterator + col, t_ld.layout), r_s)
        cute.arch.fence_view_async_tmem_load()
        # fwd 2-3 and the tile row max t (fwd 4); register j holds column j.
        hi_col = sk - 1 - kv0  # kv < Sk
        if cutlass.const_expr(cfg.mask in ("causal", "sliding_window")):
            hi_col = cutlass.min(hi_col, q + off - kv0)  # kv <= q + off (bottom-right)
        lo_col = q + off - window + 1 - kv0  # window: q + off - kv < w
        doc_cols = [Int32(0)] * (BLOCK_N // 32)
        if cutlass.const_expr(cfg.mask == "document"):
            # lane L loads doc_kv of columns L, L+32, ...; column j is shuffled from lane j%32
            for ch in cutlass.range_constexpr(BLOCK_N // 32):
                doc_cols[ch] = Int32(doc_kv[cutlass.min(kv0 + ch * 32 + lane, sk - 1)])
        t_max = Float32(NEG_INF)
        for j in cutlass.range_constexpr(BLOCK_N):
            doc_col = Int32(0)
            if cutlass.const_expr(cfg.mask == "document"):
                doc_col = cute.arch.shuffle_sync(doc_cols[j // 32], j % 32)
            x = score(cfg, r_s[j], j, kv0 - q - off, hi_col, lo_col, scale, softcap, slope,
                      doc_row, doc_col)
            r_s[j] = x
            t_max = cute.arch.fmax(t_max, x)
        # fwd 4: conditional rescaling, threshold in log2 units.
        m_new = cute.arch.fmax(m, t_max)
        first = m == Float32(NEG_INF)
        grow = mul_rn(sub_rn(m_new, m), c)
        take = first | (grow > Float32(RESCALE_THRESHOLD))
        alpha = _sel(first, 1.0, _sel(take, exp2_hw(mul_rn(sub_rn(m, m_new), c)), 1.0))
        m = _sel(take, m_new, m)
        l_sum = mul_rn(l_sum, alpha)
        hst = stats_prod.acquire_and_advance()
        s_stats[row, 0, hst.index] = alpha
        hst.commit()
        # fwd 5: P = exp2(fma(x, c, -mc)), software exp2 on columns j % 32 >= EMU_FROM.
        mc = _sel(m == Float32(NEG_INF), 0.0, mul_rn(m, c))
        neg_mc = Float32(0.0) - mc
        tile_sum = Float32(0.0)
        for ch in cutlass.range_constexpr(BLOCK_N // 32):
            for jj in cutlass.range_constexpr(32):
                j = ch * 32 + jj
                y = fma_rn(r_s[j], c, neg_mc)
                if cutlass.const_expr(jj >= EMU_FROM):
                    r_s[j] = exp2_sw(y)
                else:
                    r_s[j] = exp2_hw(y)
                tile_sum = add_rn(tile_sum, r_s[j])  # fwd 6: unrounded P
            # fwd 6: P rounded to the input dtype (cvt.rn), 32 columns at a time so that the
            # fp32 values die as the packed 16-bit ones appear (register pressure).
            r_p[None, ch, None, None].store(r_s[None, ch, None, None].load().to(cfg.dtype))
        l_sum = add_rn(l_sum, tile_sum)
        hp = p_prod.acquire_and_advance()
        cute.copy(tiled_st, r_p32, cute.make_tensor(t_st.iterator + col, t_st.layout))
        cute.arch.fence_view_async_tmem_store()
        tcgen05_fence_before()
        hp.commit()
        hs.release()
    hst = stats_prod.acquire_and_advance()
    s_stats[row, 1, hst.index] = l_sum
    s_stats[row, 2, hst.index] = mc
    hst.commit()
    return s_cons, p_prod, stats_prod


def o_views(cfg, o_layout, c_o, tmem_ptr, tidx: Int32, col: int = TMEM_O):
    """TMEM copies of the O accumulator at column ``col`` in O_CHUNK-column chunks, the
    register fragments and this thread's O row (register e = column e of a chunk)."""
    t_o = cute.make_tensor(tmem_ptr + col, o_layout)
    t_oc = cute.make_tensor(t_o.iterator, cute.composition(o_layout,
                                                           cute.make_layout((128, O_CHUNK))))
    c_oc = cute.make_tensor(c_o.iterator, cute.composition(c_o.layout,
                                                           cute.make_layout((128, O_CHUNK))))
    ld = tcgen05.make_tmem_copy(cute.make_copy_atom(
        tcgen05.copy.Ld32x32bOp(tcgen05.copy.Repetition(O_CHUNK)), Float32), t_oc)
    st = tcgen05.make_tmem_copy(cute.make_copy_atom(
        tcgen05.copy.St32x32bOp(tcgen05.copy.Repetition(O_CHUNK)), Float32), t_oc)
    t_ld = ld.get_slice(tidx).partition_S(t_oc)
    t_st = st.get_slice(tidx).partition_D(t_oc)
    r_o = cute.make_rmem_tensor(ld.get_slice(tidx).partition_D(c_oc).shape, Float32)
    r_o16 = cute.make_rmem_tensor(r_o.layout, cfg.dtype)
    row = ld.get_slice(tidx).partition_D(c_oc)[0][0]
    return ld, st, t_ld, t_st, r_o, r_o16, row


@cute.jit
def correction_step(cfg, views, s_stats, stats_cons, pv_cons, o_prod, rescale):
    """kv step i of one Q tile (spec fwd 4): alpha_i from the softmax; for i > 0 (``rescale``)
    wait PV_{i-1}, O *= alpha_i (skipped when the whole warp has alpha == 1, exact); then PV_i
    may accumulate."""
    ld, st, t_ld, t_st, r_o, _r_o16, row = views
    h = stats_cons.wait_and_advance()
    alpha = s_stats[row, 0, h.index]
    h.release()
    if rescale:
        hpv = pv_cons.wait_and_advance()  # PV_{i-1} done: O holds tiles < i
        tcgen05_fence_after()
        if cute.arch.vote_any_sync(alpha != Float32(1.0)):  # fwd 4: O *= alpha
            for ch in cutlass.range_constexpr(cfg.head_dim_v // O_CHUNK):
                cute.copy(ld, cute.make_tensor(t_ld.iterator + ch * O_CHUNK, t_ld.layout), r_o)
                cute.arch.fence_view_async_tmem_load()
                for e in cutlass.range_constexpr(O_CHUNK):
                    r_o[e] = mul_rn(r_o[e], alpha)
                cute.copy(st, r_o, cute.make_tensor(t_st.iterator + ch * O_CHUNK,
                                                    t_st.layout))
            cute.arch.fence_view_async_tmem_store()
        tcgen05_fence_before()
        hpv.release()
    ho = o_prod.acquire_and_advance()
    if cutlass.const_expr(cfg.persistent):
        tcgen05_fence_before()  # the previous work tile's last O loads precede PV_0
    ho.commit()
    return stats_cons, pv_cons, o_prod


@cute.jit
def _store_o_chunk(s_o, row, ch: int, r_o16) -> None:
    """O_CHUNK output values of a row into the (swizzled) smem O tile, 8 at a time (the same
    values to the same places as element stores). Persistent schedules only: there the
    element-wise addresses were hoisted out of the work-tile loop by the compiler and kept
    live (d128 ping-pong persistent: correction spills 262 -> 25 store instructions)."""
    s_row = cute.flat_divide(s_o[row, None, 0], (8,))
    r_v = cute.flat_divide(cute.make_tensor(r_o16.iterator, cute.make_layout(O_CHUNK)), (8,))
    for v in cutlass.range_constexpr(O_CHUNK // 8):
        cute.autovec_copy(r_v[None, v], s_row[None, ch * (O_CHUNK // 8) + v])


@cute.jit
def correction_finish(cfg, views, s_stats, s_o, lse, stats_cons, pv_cons, epi_prod,
                      m_block: Int32, head: Int32, batch: Int32, sq: Int32, n: Int32):
    """spec fwd 7 for one Q tile: out = dtype(O * (1 / l)) into shared memory for the
    epilogue (0 for a fully masked row, l == 0), lse = (mc + log2 l) * ln 2 (-inf)."""
    ld, _st, t_ld, _t_st, r_o, r_o16, row = views
    d = cfg.head_dim_v
    h = stats_cons.wait_and_advance()
    l_sum = s_stats[row, 1, h.index]
    mc = s_stats[row, 2, h.index]
    h.release()
    dead = l_sum == Float32(0.0)
    inv = div_rn(Float32(1.0), l_sum)
    he = epi_prod.acquire_and_advance()
    if n > 0:
        hpv = pv_cons.wait_and_advance()  # PV_{n-1} done
        tcgen05_fence_after()
        for ch in cutlass.range_constexpr(d // O_CHUNK):
            cute.copy(ld, cute.make_tensor(t_ld.iterator + ch * O_CHUNK, t_ld.layout), r_o)
            cute.arch.fence_view_async_tmem_load()
            for e in cutlass.range_constexpr(O_CHUNK):
                r_o[e] = _sel(dead, 0.0, mul_rn(r_o[e], inv))
            r_o16.store(r_o.load().to(cfg.dtype))
            if cutlass.const_expr(cfg.persistent):
                _store_o_chunk(s_o, row, ch, r_o16)
            else:
                for e in cutlass.range_constexpr(O_CHUNK):
                    s_o[row, ch * O_CHUNK + e, 0] = r_o16[e]
        hpv.release()
    else:
        r_o.fill(0.0)
        r_o16.store(r_o.load().to(cfg.dtype))
        for ch in cutlass.range_constexpr(d // O_CHUNK):
            if cutlass.const_expr(cfg.persistent):
                _store_o_chunk(s_o, row, ch, r_o16)
            else:
                for e in cutlass.range_constexpr(O_CHUNK):
                    s_o[row, ch * O_CHUNK + e, 0] = r_o16[e]
    cute.arch.fence_view_async_shared()  # generic-proxy writes -> TMA store
    he.commit()
    q = m_block * BLOCK_M + row
    if q < sq:
        # accurate fp32 log2 (not lg2.approx), once per row
        value = mul_rn(add_rn(mc, cute.math.log2(l_sum, fastmath=False)), Float32(LN2))
        lse[batch, head, q] = _sel(dead, NEG_INF, value)
    return stats_cons, pv_cons, epi_prod


@cute.jit
def correction_role(cfg, o_layout, c_o, tmem_ptr, s_stats, s_o, lse, stats_cons, pv_cons, o_prod,
                    epi_prod, m_block: Int32, head: Int32, batch: Int32, sq: Int32, n: Int32,
                    tidx: Int32):
    """One work tile's correction and output (spec fwd 4, 7); returns the participants it
    advanced."""
    views = o_views(cfg, o_layout, c_o, tmem_ptr, tidx)
    for i in cutlass.range(n, unroll=1):
        stats_cons, pv_cons, o_prod = correction_step(cfg, views, s_stats, stats_cons, pv_cons,
                                                      o_prod, i > 0)
    stats_cons, pv_cons, epi_prod = correction_finish(
        cfg, views, s_stats, s_o, lse, stats_cons, pv_cons, epi_prod, m_block, head, batch, sq,
        n)
    return stats_cons, pv_cons, o_prod, epi_prod
