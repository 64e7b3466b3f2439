"""Compute role of the sm100 backward (spec.py backward steps 2-5, with the sm100 choices).

Warps 0-3 (128 threads); thread t owns row t of the tile (TMEM lane t): a key row in the
dK/dV kernel (tiles S^T, dP^T), a query row in the dQ kernel (tiles S, dP). Per tile and per
chunk of CHUNK columns (tcgen05.ld of S and dP, 32 fp32 registers each):

  x   = S (no score_mod), cap * tanh(fp32(S * scale) / cap) (softcap) or
        fp32(S * scale) + slope[h] * fp32(kv - q - (Sk - Sq)) (ALiBi): as softmax.score;
  P   = ex2.approx.ftz(fma.rn(x, c, -L2[q])), 0 where dead (masked, kv >= Sk, q >= Sq);
  P_r = cvt.rn(P) to the input dtype (16-bit, 2 per TMEM column; the dK/dV kernel stores it
        over the consumed S columns for dV += P_r^T dO);
  dS  = mul.rn(fp32(P_r), sub.rn(dP, Delta[q])); softcap: dS = mul.rn(dS, sub.rn(1,
        mul.rn(t, t))) with t = div.rn(x, cap); 0 where dead;
  dS_r = cvt.rn(dS), stored over the consumed dP columns for dK += dS_r^T Q / dQ += dS_r K.
Epilogue: the fp32 accumulators from TMEM, dK and dQ times scale (mul.rn), dV as is, stored
as fp32 rows (row < S) straight to global memory.
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
    fma_rn,
    mul_rn,
    sub_rn,
    tcgen05_fence_after,
    tcgen05_fence_before,
)
from impls.attention.fa4.spec import BLOCK_M

CHUNK = 32  # columns per tcgen05.ld of S / dP (and of the accumulators in the epilogue)
COMPUTE_THREADS = 128
STAGE_BARRIER = 2  # named barrier: per-tile column data staged in smem by the compute warps
FREE_BARRIER = 3  # named barrier: all compute warps done before TMEM is freed


def _sel(cond, a, b) -> Float32:
    return Float32(cutlass.select_(cond, Float32(a), Float32(b)))


def tmem_copy(acc_layout, c_acc: cute.Tensor, tmem_ptr, tidx: Int32, cols: int, store: bool):
    """A tcgen05 32x32b copy of ``cols`` fp32 columns of a 128-lane accumulator: (tiled copy,
    this thread's TMEM view, its register fragment, its row). Offsets along the columns are
    added to the view's iterator."""
    t = cute.make_tensor(tmem_ptr, cute.composition(acc_layout, cute.make_layout((128, cols))))
    c = cute.make_tensor(c_acc.iterator, cute.composition(c_acc.layout,
                                                          cute.make_layout((128, cols))))
    op = tcgen05.copy.St32x32bOp if store else tcgen05.copy.Ld32x32bOp
    tiled = tcgen05.make_tmem_copy(cute.make_copy_atom(op(tcgen05.copy.Repetition(cols)),
                                                       Float32), t)
    thr = tiled.get_slice(tidx)
    view = thr.partition_D(t) if store else thr.partition_S(t)
    coords = thr.partition_S(c) if store else thr.partition_D(c)
    regs = cute.make_rmem_tensor(coords.shape, Float32)
    return tiled, view, regs, coords[0][0]


def _at(view: cute.Tensor, col) -> cute.Tensor:
    return cute.make_tensor(view.iterator + col, view.layout)


@cute.jit
def score_x(cfg, s: Float32, dist: Int32, scale: Float32, softcap: Float32,
            slope: Float32) -> Float32:
    """spec fwd 2 (as softmax.score): x for a raw score s; dist = kv - q - (Sk - Sq)."""
    x = s
    if cutlass.const_expr(cfg.score_mod == "softcap"):  # cap * tanh(s * scale / cap)
        x = mul_rn(softcap, cute.math.tanh(div_rn(mul_rn(s, scale), softcap), fastmath=False))
    if cutlass.const_expr(cfg.score_mod == "alibi"):  # s * scale + slope[h] * dist
        x = add_rn(mul_rn(s, scale), mul_rn(slope, Float32(dist)))
    return x


@cute.jit
def tile_grads(cfg, ld, t_s, t_dp, r_s, r_dp, r_x, st, t_p, r_p32, t_ds, r_ds32,
               transposed: cutlass.Constexpr, row_doc: Int32, s_doc: cute.Tensor,
               s_l2: cute.Tensor, s_dl: cute.Tensor, buf: Int32, lo_col: Int32, hi_col: Int32,
               rel: Int32, l2_row: Float32, dl_row: Float32, scale: Float32, c: Float32,
               softcap: Float32, slope: Float32) -> None:
    """spec bwd 2-4 for one tile, CHUNK columns at a time (see the module docstring).

    Column jj is live iff lo_col <= jj <= hi_col (and the document ids agree); dist is
    rel - jj (transposed: columns are queries) or rel + jj (columns are keys). Transposed:
    L2, Delta and doc ids of the columns come from smem (s_l2, s_dl, s_doc [jj, buf]) and
    P_r is stored to TMEM (t_p); else they are the row's (l2_row, dl_row, row_doc)."""
    r_p = cute.make_tensor(cute.recast_ptr(r_p32.iterator, dtype=cfg.dtype), r_s.layout)
    r_ds = cute.make_tensor(cute.recast_ptr(r_ds32.iterator, dtype=cfg.dtype), r_dp.layout)
    for ch in cutlass.range_constexpr(BLOCK_M // CHUNK):
        cute.copy(ld, _at(t_s, ch * CHUNK), r_s)
        cute.copy(ld, _at(t_dp, ch * CHUNK), r_dp)
        cute.arch.fence_view_async_tmem_load()
        lives = []
        for j in cutlass.range_constexpr(CHUNK):
            jj = ch * CHUNK + j
            live = (jj >= lo_col) & (jj <= hi_col)
            if cutlass.const_expr(cfg.mask == "document"):
                live = live & (s_doc[jj, buf] == row_doc)
            lives.append(live)
            dist = rel - jj if cutlass.const_expr(transposed) else rel + jj
            x = score_x(cfg, r_s[j], dist, scale, softcap, slope)
            if cutlass.const_expr(cfg.score_mod == "softcap"):
                r_x[j] = x
            l2 = s_l2[jj, buf] if cutlass.const_expr(transposed) else l2_row
            r_s[j] = _sel(live, exp2_hw(fma_rn(x, c, sub_rn(Float32(0.0), l2))), 0.0)
        r_p.store(r_s.load().to(cfg.dtype))  # P_r: cvt.rn (bwd 3)
        r_s.store(r_p.load().to(Float32))  # fp32(P_r), exact
        for j in cutlass.range_constexpr(CHUNK):
            jj = ch * CHUNK + j
            dl = s_dl[jj, buf] if cutlass.const_expr(transposed) else dl_row
            ds = mul_rn(r_s[j], sub_rn(r_dp[j], dl))  # bwd 4, from the rounded P
            if cutlass.const_expr(cfg.score_mod == "softcap"):
                t = div_rn(r_x[j], softcap)  # tanh(u) = x / cap: d x / d u = 1 - t^2
                ds = mul_rn(ds, sub_rn(Float32(1.0), mul_rn(t, t)))
            r_dp[j] = _sel(lives[j], ds, 0.0)
        r_ds.store(r_dp.load().to(cfg.dtype))  # dS_r: cvt.rn
        if cutlass.const_expr(transposed):
            cute.copy(st, r_p32, _at(t_p, ch * CHUNK // 2))  # over consumed S columns
        cute.copy(st, r_ds32, _at(t_ds, ch * CHUNK // 2))  # over consumed dP columns
    cute.arch.fence_view_async_tmem_store()


@cute.jit
def store_acc(ld, t_acc, r_acc, g: cute.Tensor, row: Int32, limit: Int32, d: int,
              factor: Float32, scaled: cutlass.Constexpr, live: Int32) -> None:
    """g[row, :] = acc[row, :] (times factor with mul.rn when scaled), fp32, if row < limit;
    zeros when the CTA had no live tile (live == 0: the accumulator was never written)."""
    for ch in cutlass.range_constexpr(d // CHUNK):
        if live > 0:
            cute.copy(ld, _at(t_acc, ch * CHUNK), r_acc)
            cute.arch.fence_view_async_tmem_load()
            if cutlass.const_expr(scaled):
                for e in cutlass.range_constexpr(CHUNK):
                    r_acc[e] = mul_rn(r_acc[e], factor)
        else:
            r_acc.fill(0.0)
        if row < limit:
            for e in cutlass.range_constexpr(CHUNK):
                g[row, ch * CHUNK + e] = r_acc[e]


@cute.jit
def compute_role(cfg, transposed: cutlass.Constexpr, tmem_ptr, s_layout, c_s, acc_layout,
                 c_acc, p_offset: int, accs, outs, s_cons, g_prod, acc_cons, s_doc, s_l2, s_dl,
                 l2, delta, slopes, doc_q, doc_kv, scale: Float32, c: Float32,
                 softcap: Float32, window: Int32, blk: Int32, head: Int32, batch: Int32,
                 sq: Int32, sk: Int32, lo: Int32, n: Int32, tidx: Int32) -> None:
    """The whole compute role of one CTA. transposed: the dK/dV kernel (rows are the keys of
    tile blk, columns the queries of q tile lo + i); else the dQ kernel (rows are the queries
    of tile blk, columns the keys of kv tile lo + i). accs: TMEM column offsets of the
    accumulators with a "times scale" flag ((dK, True), (dV, False) or (dQ, True)), outs:
    their (S, D) fp32 global views."""
    ld, t_s, r_s, row = tmem_copy(s_layout, c_s, tmem_ptr, tidx, CHUNK, False)
    _, t_dp, r_dp, _ = tmem_copy(s_layout, c_s, tmem_ptr + BLOCK_M, tidx, CHUNK, False)
    st, t_p, r_p32, _ = tmem_copy(s_layout, c_s, tmem_ptr + p_offset, tidx, CHUNK // 2, True)
    _, t_ds, r_ds32, _ = tmem_copy(s_layout, c_s, tmem_ptr + BLOCK_M, tidx, CHUNK // 2, True)
    r_x = cute.make_rmem_tensor(r_s.layout, Float32)
    off = sk - sq
    pos = blk * BLOCK_M + row  # this thread's key (transposed) or query
    slope = Float32(0.0)
    if cutlass.const_expr(cfg.score_mod == "alibi"):
        slope = slopes[head]
    row_doc = Int32(0)
    l2_row, dl_row = Float32(0.0), Float32(0.0)
    if cutlass.const_expr(transposed):
        if cutlass.const_expr(cfg.mask == "document"):
            row_doc = Int32(doc_kv[cutlass.min(pos, sk - 1)])
    else:
        qc = cutlass.min(pos, sq - 1)
        l2_row, dl_row = Float32(l2[batch, head, qc]), Float32(delta[batch, head, qc])
        if cutlass.const_expr(cfg.mask == "document"):
            row_doc = Int32(doc_q[qc])
    for i in cutlass.range(n, unroll=1):
        c0 = (lo + i) * BLOCK_M  # first query (transposed) or key of the column tile
        buf = i % 2
        # Column data of the tile in smem (double-buffered; one barrier per tile).
        col = c0 + tidx
        if cutlass.const_expr(transposed):
            colc = cutlass.min(col, sq - 1)
            s_l2[tidx, buf] = Float32(l2[batch, head, colc])
            s_dl[tidx, buf] = Float32(delta[batch, head, colc])
            if cutlass.const_expr(cfg.mask == "document"):
                s_doc[tidx, buf] = Int32(doc_q[colc])
        elif cutlass.const_expr(cfg.mask == "document"):
            s_doc[tidx, buf] = Int32(doc_kv[cutlass.min(col, sk - 1)])
        cute.arch.barrier(barrier_id=STAGE_BARRIER, number_of_threads=COMPUTE_THREADS)
        # Live columns lo_col <= jj <= hi_col (bottom-right aligned, as fwd.kv_range).
        if cutlass.const_expr(transposed):  # row = key pos, column jj = query c0 + jj
            lo_col = Int32(0)
            hi_col = cutlass.min(sq - 1 - c0, Int32(BLOCK_M - 1))
            if cutlass.const_expr(cfg.mask in ("causal", "sliding_window")):
                lo_col = pos - off - c0  # kv <= q + off
            if cutlass.const_expr(cfg.mask == "sliding_window"):
                hi_col = cutlass.min(hi_col, pos - off - c0 + window - 1)  # q + off - kv < w
            hi_col = Int32(cutlass.select_(pos < sk, hi_col, Int32(-1)))
            rel = pos - c0 - off
        else:  # row = query pos, column jj = key c0 + jj
            lo_col = Int32(0)
            hi_col = cutlass.min(sk - 1 - c0, Int32(BLOCK_M - 1))
            if cutlass.const_expr(cfg.mask in ("causal", "sliding_window")):
                hi_col = cutlass.min(hi_col, pos + off - c0)
            if cutlass.const_expr(cfg.mask == "sliding_window"):
                lo_col = pos + off - window + 1 - c0
            hi_col = Int32(cutlass.select_(pos < sq, hi_col, Int32(-1)))
            rel = c0 - pos - off
        hs = s_cons.wait_and_advance()  # S and dP of this tile in TMEM
        hg = g_prod.acquire_and_advance()
        tcgen05_fence_after()
        tile_grads(cfg, ld, t_s, t_dp, r_s, r_dp, r_x, st, t_p, r_p32, t_ds, r_ds32,
                   transposed, row_doc, s_doc, s_l2, s_dl, buf, lo_col, hi_col, rel, l2_row,
                   dl_row, scale, c, softcap, slope)
        tcgen05_fence_before()
        hg.commit()  # P_r (transposed) and dS_r in TMEM
        hs.release()
    # Epilogue: the accumulators, complete once the MMA warp's final commit arrives.
    if n > 0:
        ha = acc_cons.wait_and_advance()
        tcgen05_fence_after()
        ha.release()  # nothing writes the accumulators again: the release is bookkeeping
    ld_d, t_acc, r_acc, _ = tmem_copy(acc_layout, c_acc, tmem_ptr, tidx, CHUNK, False)
    limit = sk if cutlass.const_expr(transposed) else sq
    for a in cutlass.range_constexpr(len(accs)):
        store_acc(ld_d, _at(t_acc, accs[a][0]), r_acc, outs[a], pos, limit, cfg.head_dim,
                  scale, accs[a][1], n)
