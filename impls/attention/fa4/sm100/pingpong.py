"""Two Q tiles per CTA in ping-pong (schedules ``pingpong`` and ``pingpong_persistent``).

A work tile is 256 query rows: Q tiles ``2 mt`` (tile 0) and ``2 mt + 1`` (tile 1) of one
(head, batch). Warps (16, 512 threads):

- 0-3 softmax of tile 0, 4-7 softmax of tile 1 (``softmax.softmax_role`` unchanged, each with
  its own S buffer and pipelines);
- 8-11 correction of both tiles, interleaved per kv step (``softmax.correction_step`` /
  ``correction_finish``); allocates TMEM;
- 12 MMA, 13 load, 14 epilogue (two TMA stores per work tile), 15 idle.

TMEM (512 columns): S/P of tile 0 at 0-127, S/P of tile 1 at 128-255, O of tile 0 at 256,
O of tile 1 at 256 + Dv (D = Dv = 128: exactly 512 columns).

Each Q tile keeps its own kv range (``kv_range``); the load warp streams the union of the two
ranges once, from the last kv tile to the first, and a Q tile takes part in a kv step only if
the kv tile is in its own range (``_live``). So each Q tile sees exactly the kv tiles, in
exactly the order, of the single-tile kernel: its arithmetic is unchanged.

MMA order per kv step i of the union (K_{i+1} and V_i already waited):
PV_0(i), QK_0(i+1), PV_1(i), QK_1(i+1); so the softmax of tile 1 at step i overlaps PV_0(i)
and QK_0(i+1), and the softmax of tile 0 at step i+1 overlaps PV_1(i) and QK_1(i+1). An S
buffer is overwritten by QK_s(i+1) after PV_s(i), which read P_s(i) from it, was issued:
tcgen05.mma of one thread execute in issue order.
"""

import cutlass
import cutlass.cute as cute
import cutlass.memory as memory
import cutlass.pipeline as pipeline
from cutlass.cute.nvgpu import cpasync
from cutlass.cute.typing import Float32, Int32, Int64

from impls.attention.fa4.sm100 import scheduler as sched
from impls.attention.fa4.sm100 import softmax as sm
from impls.attention.fa4.sm100.exp2 import tcgen05_fence_after, tcgen05_fence_before
from impls.attention.fa4.sm100.roles import TMEM_O, tmem_o, tmem_p, tmem_s
from impls.attention.fa4.spec import BLOCK_M

ROWS = 2 * BLOCK_M
SOFTMAX_WGS = ((0, 1, 2, 3), (4, 5, 6, 7))
CORRECTION_WARPS = (8, 9, 10, 11)
MMA_WARP, LOAD_WARP, EPILOGUE_WARP, IDLE_WARP = 12, 13, 14, 15
THREADS = 32 * 16
TMEM_COLS = 512
TMEM_S_PP = (0, 128)  # S/P of tile 0, tile 1
# 2 x 184 + 80 + 64 = 4 x 128 (launch: 128 registers/thread). ptxas spills (d128 none-none):
# 548/560 B at 192/80/48, 464/496 B here; the softmax would need ~224 (the single-tile split).
REGS = {"softmax": 184, "correction": 80, "other": 64}


def tmem_o_pp(dv: int) -> tuple[int, int]:
    """O columns of tile 0 and tile 1."""
    return TMEM_O, TMEM_O + dv


def make_storage(dtype, kv_stages: int, o_sl, q_sl, k_sl):
    """Shared memory of the ping-pong kernel: Q has two stages (tile 0, tile 1)."""

    @cute.struct
    class Storage:
        q_bar: cute.struct.MemRange[Int64, 4]
        kv_bar: cute.struct.MemRange[Int64, 2 * kv_stages]
        s_bar: cute.struct.MemRange[Int64, 4]  # per tile: full/empty
        p_bar: cute.struct.MemRange[Int64, 4]
        stats_bar: cute.struct.MemRange[Int64, 8]
        o_bar: cute.struct.MemRange[Int64, 4]
        pv_bar: cute.struct.MemRange[Int64, 4]
        epi_bar: cute.struct.MemRange[Int64, 2]
        tmem_addr: Int32
        stats: cute.struct.MemRange[Float32, BLOCK_M * 3 * 2 * 2]
        so: cute.struct.Align[cute.struct.MemRange[dtype, cute.cosize(o_sl)], 1024]
        sq: cute.struct.Align[cute.struct.MemRange[dtype, cute.cosize(q_sl)], 1024]
        skv: cute.struct.Align[cute.struct.MemRange[dtype, cute.cosize(k_sl)], 1024]

    return Storage


def _group(n: int) -> pipeline.CooperativeGroup:
    return pipeline.CooperativeGroup(pipeline.Agent.Thread, n)


def _live(hi, i, hi_s, n_s):
    """Does the Q tile with range (hi_s, n_s) take part in union step i (kv tile hi-1-i)?"""
    kv = hi - 1 - i
    return (kv < hi_s) & (kv >= hi_s - n_s)


class PingPongRoles:
    """Mixin of ``Fa4Sm100Forward``: the ping-pong kernel and its MMA role."""

    @cute.jit
    def pp_ranges(self, mt: Int32, sq: Int32, sk: Int32, window: Int32):
        """(hi0, n0, hi1, n1, hi, n): each Q tile's kv range and their union (empty ranges
        left out; tile 1 is empty when it starts at or past Sq)."""
        hi0, n0 = self.kv_range(2 * mt, sq, sk, window)
        hi1, n1 = self.kv_range(2 * mt + 1, sq, sk, window)
        if (2 * mt + 1) * BLOCK_M >= sq:
            n1 = Int32(0)
        big = Int32(2**30)
        hi = cutlass.max(cutlass.select_(n0 > 0, hi0, 0), cutlass.select_(n1 > 0, hi1, 0))
        lo = cutlass.min(cutlass.select_(n0 > 0, hi0 - n0, big),
                         cutlass.select_(n1 > 0, hi1 - n1, big))
        n = cutlass.max(hi - lo, 0)
        return hi0, n0, hi1, n1, hi, n

    @cute.jit
    def pp_work_tile(self, tile: Int32, gq: cute.Tensor, gk: cute.Tensor, window: Int32):
        """Persistent ping-pong work tile -> (mt, head, batch, kv head, ranges...)."""
        sq, sk = gq.shape[0], gk.shape[0]
        hq, b = gq.shape[2][0], gq.shape[2][1]
        mt, head, batch = sched.tile_coords(tile, sq, hq, b, ROWS)
        hkv_head = head // (hq // gk.shape[2][0])
        return mt, head, batch, hkv_head, self.pp_ranges(mt, sq, sk, window)

    @cute.kernel
    def kernel_pp(self, qk_mma, pv_mma, tma_q, gq, tma_k, gk, tma_v, gv, tma_o, go, lse, slopes,
                  doc_q, doc_kv, scale: Float32, exp_scale: Float32, softcap: Float32,
                  window: Int32, q_sl, k_sl, v_sl, p_tl, o_sl) -> None:
        """The ping-pong kernel: one 256-row work tile per CTA, or a persistent loop."""
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tidx, _, _ = cute.arch.thread_idx()
        mt, head, batch = cute.arch.block_idx()
        sq, sk = gq.shape[0], gk.shape[0]
        hkv_head = head // (gq.shape[2][0] // gk.shape[2][0])
        ranges = self.pp_ranges(mt, sq, sk, window)
        first, stride, tiles = Int32(0), 1, 1  # single: one pass, block_idx coordinates
        if cutlass.const_expr(self.persistent):
            first, stride = mt, cute.arch.grid_dim()[0]
            tiles = sched.tile_count(sq, gq.shape[2][0], gq.shape[2][1], ROWS)
        if warp == LOAD_WARP:
            for atom in (tma_q, tma_k, tma_v, tma_o):
                cpasync.prefetch_descriptor(atom)
        st = memory.SmemAllocator().allocate(self.storage)
        q_pipe, kv_pipe, s, p, stats, o, pv, epi_pipe = make_pipelines(st, self)
        q_prod, q_cons = q_pipe
        kv_prod, kv_cons = kv_pipe
        epi_prod, epi_cons = epi_pipe
        tmem = tmem_allocator(st)
        pipeline.pipeline_init_arrive(is_relaxed=True)
        s_q = st.sq.get_tensor(q_sl.outer, swizzle=q_sl.inner)
        s_k = st.skv.get_tensor(k_sl.outer, swizzle=k_sl.inner)
        s_v = cute.make_tensor(cute.recast_ptr(s_k.iterator, v_sl.inner, dtype=self.dtype),
                               v_sl.outer)
        s_o = st.so.get_tensor(o_sl.outer, swizzle=o_sl.inner)
        stats_all = st.stats.get_tensor(cute.make_layout((BLOCK_M, 3, 2, 2)))
        stats_pair = (stats_all[None, None, None, 0], stats_all[None, None, None, 1])
        qk_thr, pv_thr = qk_mma.get_slice(0), pv_mma.get_slice(0)
        s_layout = qk_thr.make_fragment_C(qk_thr.partition_shape_C(self.qk_tiler[:2])).layout
        o_layout = pv_thr.make_fragment_C(pv_thr.partition_shape_C(self.pv_tiler[:2])).layout
        c_s = qk_thr.partition_C(cute.make_identity_tensor((BLOCK_M, self.qk_tiler[1])))
        c_o = pv_thr.partition_C(cute.make_identity_tensor((BLOCK_M, self.head_dim_v)))
        pipeline.pipeline_init_wait()

        if warp == LOAD_WARP:
            cute.arch.setmaxregister_decrease(self.regs["other"])
            for tile in cutlass.range(first, tiles, stride, unroll=1):
                if cutlass.const_expr(self.persistent):
                    mt, head, batch, hkv_head, ranges = self.pp_work_tile(tile, gq, gk, window)
                q_prod, kv_prod = self.load_role(
                    qk_thr, pv_thr, tma_q, gq, tma_k, gk, tma_v, gv, s_q, s_k, s_v, q_prod,
                    kv_prod, 2 * mt, head, hkv_head, batch, ranges[4], ranges[5])
        if warp == MMA_WARP:
            cute.arch.setmaxregister_decrease(self.regs["other"])
            tmem.wait_for_alloc()
            tmem_ptr = tmem.retrieve_ptr(Float32)
            s_prod, p_cons, o_cons, pv_prod = ((s[0][0], s[1][0]), (p[0][1], p[1][1]),
                                               (o[0][1], o[1][1]), (pv[0][0], pv[1][0]))
            for tile in cutlass.range(first, tiles, stride, unroll=1):
                if cutlass.const_expr(self.persistent):
                    mt, head, batch, hkv_head, ranges = self.pp_work_tile(tile, gq, gk, window)
                q_cons, kv_cons, s_prod, p_cons, o_cons, pv_prod = self.mma_pp(
                    qk_mma, pv_mma, qk_thr, pv_thr, s_q, s_k, s_v, p_tl, tmem_ptr, q_cons,
                    kv_cons, s_prod, p_cons, o_cons, pv_prod, ranges)
        if warp == EPILOGUE_WARP:
            cute.arch.setmaxregister_decrease(self.regs["other"])
            for tile in cutlass.range(first, tiles, stride, unroll=1):
                if cutlass.const_expr(self.persistent):
                    mt, head, batch, hkv_head, ranges = self.pp_work_tile(tile, gq, gk, window)
                epi_cons = self.epilogue_role(tma_o, go, s_o, epi_cons, 2 * mt, head, batch)
                epi_cons = self.epilogue_role(tma_o, go, s_o, epi_cons, 2 * mt + 1, head, batch)
        if warp == IDLE_WARP:
            cute.arch.setmaxregister_decrease(self.regs["other"])
        for t in cutlass.range_constexpr(2):  # softmax of Q tile t: warps 4t .. 4t+3
            if warp >= SOFTMAX_WGS[t][0] and warp <= SOFTMAX_WGS[t][-1]:
                cute.arch.setmaxregister_increase(self.regs["softmax"])
                tmem.wait_for_alloc()
                tmem_ptr = tmem.retrieve_ptr(Float32)
                s_cons, p_prod, stats_prod = s[t][1], p[t][0], stats[t][0]
                for tile in cutlass.range(first, tiles, stride, unroll=1):
                    if cutlass.const_expr(self.persistent):
                        mt, head, batch, hkv_head, ranges = self.pp_work_tile(
                            tile, gq, gk, window)
                    s_cons, p_prod, stats_prod = sm.softmax_role(
                        self, s_layout, c_s, tmem_ptr, stats_pair[t], s_cons, p_prod,
                        stats_prod, slopes, doc_q, doc_kv, scale, exp_scale, softcap, window,
                        2 * mt + t, head, sq, sk, ranges[2 * t], ranges[2 * t + 1], tidx % 128,
                        s_col=TMEM_S_PP[t])
        if warp >= CORRECTION_WARPS[0] and warp < MMA_WARP:
            cute.arch.setmaxregister_decrease(self.regs["correction"])
            tmem.allocate(TMEM_COLS)
            tmem.wait_for_alloc()
            tmem_ptr = tmem.retrieve_ptr(Float32)
            stats_cons, pv_cons, o_prod = ((stats[0][1], stats[1][1]), (pv[0][1], pv[1][1]),
                                           (o[0][0], o[1][0]))
            for tile in cutlass.range(first, tiles, stride, unroll=1):
                if cutlass.const_expr(self.persistent):
                    mt, head, batch, hkv_head, ranges = self.pp_work_tile(tile, gq, gk, window)
                stats_cons, pv_cons, o_prod, epi_prod = correction_pp(
                    self, o_layout, c_o, tmem_ptr, stats_pair, s_o, lse, stats_cons, pv_cons,
                    o_prod, epi_prod, mt, head, batch, sq, ranges, tidx % 128)
            tmem.relinquish_alloc_permit()
            tcgen05_fence_before()
            pipeline.NamedBarrier(barrier_id=2, num_threads=128).arrive_and_wait()
            tcgen05_fence_after()
            tmem.free(tmem_ptr)

    @cute.jit
    def mma_pp(self, qk_mma, pv_mma, qk_thr, pv_thr, s_q, s_k, s_v, p_tl, tmem_ptr, q_cons,
               kv_cons, s_cons_pair, p_pair, o_pair, pv_pair, ranges):
        """tcgen05 issue for one ping-pong work tile (order in the module docstring)."""
        hi0, n0, hi1, n1, hi, n = ranges
        s0, s1 = s_cons_pair
        p0, p1 = p_pair
        o0, o1 = o_pair
        pv0, pv1 = pv_pair
        r_q = qk_thr.make_fragment_A(s_q)
        r_k = qk_thr.make_fragment_B(s_k)
        r_v = pv_thr.make_fragment_B(s_v)
        t_o0 = tmem_o(self, pv_thr, tmem_ptr, tmem_o_pp(self.head_dim_v)[0])
        t_o1 = tmem_o(self, pv_thr, tmem_ptr, tmem_o_pp(self.head_dim_v)[1])
        t_s0 = tmem_s(self, qk_thr, tmem_ptr, 0, TMEM_S_PP[0])
        t_s1 = tmem_s(self, qk_thr, tmem_ptr, 0, TMEM_S_PP[1])
        t_p0 = tmem_p(self, pv_thr, p_tl, tmem_ptr, 0, TMEM_S_PP[0])
        t_p1 = tmem_p(self, pv_thr, p_tl, tmem_ptr, 0, TMEM_S_PP[1])
        if n > 0:
            hq0 = q_cons.wait_and_advance()
            hq1 = q_cons.wait_and_advance()
            r_q0 = r_q[None, None, None, hq0.index]
            r_q1 = r_q[None, None, None, hq1.index]
            hk = kv_cons.wait_and_advance()
            r_k0 = r_k[None, None, None, hk.index]
            if _live(hi, 0, hi0, n0):
                qk_mma, s0 = self.pp_qk(qk_mma, r_q0, r_k0, t_s0, s0)
            if _live(hi, 0, hi1, n1):
                qk_mma, s1 = self.pp_qk(qk_mma, r_q1, r_k0, t_s1, s1)
            hk.release()
            for i in cutlass.range(n, unroll=1):
                if i + 1 < n:
                    hk = kv_cons.wait_and_advance()
                    hv = kv_cons.wait_and_advance()
                    r_kn = r_k[None, None, None, hk.index]
                    r_vi = r_v[None, None, None, hv.index]
                    qk_mma, pv_mma, s0, p0, o0, pv0 = self.pp_step(
                        qk_mma, pv_mma, r_q0, r_kn, r_vi, t_s0, t_p0, t_o0, s0, p0, o0, pv0,
                        hi, i, hi0, n0, True)
                    qk_mma, pv_mma, s1, p1, o1, pv1 = self.pp_step(
                        qk_mma, pv_mma, r_q1, r_kn, r_vi, t_s1, t_p1, t_o1, s1, p1, o1, pv1,
                        hi, i, hi1, n1, True)
                    hk.release()
                    hv.release()
                else:
                    hv = kv_cons.wait_and_advance()
                    r_vi = r_v[None, None, None, hv.index]
                    qk_mma, pv_mma, s0, p0, o0, pv0 = self.pp_step(
                        qk_mma, pv_mma, r_q0, r_vi, r_vi, t_s0, t_p0, t_o0, s0, p0, o0, pv0,
                        hi, i, hi0, n0, False)
                    qk_mma, pv_mma, s1, p1, o1, pv1 = self.pp_step(
                        qk_mma, pv_mma, r_q1, r_vi, r_vi, t_s1, t_p1, t_o1, s1, p1, o1, pv1,
                        hi, i, hi1, n1, False)
                    hv.release()
            hq0.release()
            hq1.release()
        return q_cons, kv_cons, (s0, s1), (p0, p1), (o0, o1), (pv0, pv1)

    @cute.jit
    def pp_qk(self, qk_mma, r_q, r_k, t_s, s_prod):
        """S_s = Q_s K^T into the tile's S buffer (spec fwd 1)."""
        hs = s_prod.acquire_and_advance()
        tcgen05_fence_after()
        for kp in cutlass.range_constexpr(cute.size(r_q, mode=[2])):
            qk_mma.set(cute.nvgpu.tcgen05.Field.ACCUMULATE, kp != 0)
            cute.gemm(qk_mma, t_s, r_q[None, None, kp], r_k[None, None, kp], t_s)
        hs.commit()
        return qk_mma, s_prod

    @cute.jit
    def pp_step(self, qk_mma, pv_mma, r_q, r_kn, r_v, t_s, t_p, t_o, s_prod, p_cons, o_cons,
                pv_prod, hi, i, hi_s, n_s, has_next: cutlass.Constexpr):
        """One Q tile at union step i: PV_s(i) if live (spec fwd 6), then QK_s(i+1) if the
        next kv tile is live for it."""
        if _live(hi, i, hi_s, n_s):
            hp = p_cons.wait_and_advance()  # P_s(i) written
            ho = o_cons.wait_and_advance()  # O_s rescaled by alpha_s(i)
            hpv = pv_prod.acquire_and_advance()
            tcgen05_fence_after()
            pv_mma = self.issue_pv(pv_mma, t_p, r_v, t_o, hi_s - hi + i > 0)  # local step > 0
            hpv.commit()
            hp.release()
            ho.release()
        if cutlass.const_expr(has_next):  # noqa: SIM102 (static, then dynamic)
            if _live(hi, i + 1, hi_s, n_s):
                qk_mma, s_prod = self.pp_qk(qk_mma, r_q, r_kn, t_s, s_prod)
        return qk_mma, pv_mma, s_prod, p_cons, o_cons, pv_prod


@cute.jit
def correction_pp(cfg, o_layout, c_o, tmem_ptr, stats_pair, s_o, lse, stats_cons, pv_cons,
                  o_prod, epi_prod, mt: Int32, head: Int32, batch: Int32, sq: Int32, ranges,
                  tidx: Int32):
    """Correction of both Q tiles of a work tile, interleaved per union step in the MMA
    warp's order (tile 0, then tile 1); then spec fwd 7 for tile 0, then tile 1."""
    hi0, n0, hi1, n1, hi, n = ranges
    c0, c1 = stats_cons
    v0, v1 = pv_cons
    o0, o1 = o_prod
    cols = tmem_o_pp(cfg.head_dim_v)
    views0 = sm.o_views(cfg, o_layout, c_o, tmem_ptr, tidx, cols[0])
    views1 = sm.o_views(cfg, o_layout, c_o, tmem_ptr, tidx, cols[1])
    for i in cutlass.range(n, unroll=1):
        if _live(hi, i, hi0, n0):
            c0, v0, o0 = sm.correction_step(cfg, views0, stats_pair[0], c0, v0, o0,
                                            hi0 - hi + i > 0)
        if _live(hi, i, hi1, n1):
            c1, v1, o1 = sm.correction_step(cfg, views1, stats_pair[1], c1, v1, o1,
                                            hi1 - hi + i > 0)
    c0, v0, epi_prod = sm.correction_finish(cfg, views0, stats_pair[0], s_o, lse, c0, v0,
                                            epi_prod, 2 * mt, head, batch, sq, n0)
    c1, v1, epi_prod = sm.correction_finish(cfg, views1, stats_pair[1], s_o, lse, c1, v1,
                                            epi_prod, 2 * mt + 1, head, batch, sq, n1)
    return (c0, c1), (v0, v1), (o0, o1), epi_prod


def make_pipelines(st, cfg):
    """The ping-pong kernel's pipelines: (q, kv) producer/consumer, and per Q tile the s, p,
    stats, o, pv pairs; epi. Arrive counts as in the single-tile kernel."""
    one, sm_threads, corr = 1, 128, 128

    def pair(cls, n_stages, prod, cons, bars, offset, **kw):
        return cls.create(num_stages=n_stages, producer_group=_group(prod),
                          consumer_group=_group(cons), barrier_storage=bars.data_ptr() + offset,
                          defer_sync=True, **kw).make_participants()

    q = pair(pipeline.PipelineTmaUmma, 2, one, one, st.q_bar, 0, tx_count=cfg.q_bytes)
    kv = pair(pipeline.PipelineTmaUmma, cfg.kv_stages, one, one, st.kv_bar, 0,
              tx_count=cfg.kv_bytes)
    s = [pair(pipeline.PipelineUmmaAsync, 1, one, sm_threads, st.s_bar, 2 * t) for t in (0, 1)]
    p = [pair(pipeline.PipelineAsyncUmma, 1, sm_threads, one, st.p_bar, 2 * t) for t in (0, 1)]
    stats = [pair(pipeline.PipelineAsync, 2, sm_threads, corr, st.stats_bar, 4 * t)
             for t in (0, 1)]
    o = [pair(pipeline.PipelineAsyncUmma, 1, corr, one, st.o_bar, 2 * t) for t in (0, 1)]
    pv = [pair(pipeline.PipelineUmmaAsync, 1, one, corr, st.pv_bar, 2 * t) for t in (0, 1)]
    epi = pair(pipeline.PipelineAsync, 1, corr, 32, st.epi_bar, 0)
    return q, kv, s, p, stats, o, pv, epi


def tmem_allocator(st) -> memory.TmemAllocator:
    return memory.TmemAllocator(
        st.tmem_addr.ptr,
        barrier_for_retrieve=pipeline.NamedBarrier(barrier_id=1, num_threads=256 + 128 + 32),
        allocator_warp_id=CORRECTION_WARPS[0], arch="sm_100")

