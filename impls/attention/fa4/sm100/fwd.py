"""FA4-style attention forward for Blackwell (sm_100a) in CuTe DSL: tcgen05 MMA, TMEM
accumulators, TMA loads/stores and warp-specialised roles.

A work tile is one BLOCK_M x Dv output tile of one (batch, query head) (``schedule`` single
or persistent, see scheduler.py; the two-Q-tile ping-pong schedules are in pingpong.py); kv
tiles are visited from the last live one to the first (spec fwd, preamble). Roles (12 warps,
384 threads):

- warps 0-3   softmax: one thread per query row (TMEM lane = row); spec fwd 2-6.
- warps 4-7   correction: O *= alpha in TMEM (spec fwd 4), final O / l and lse (fwd 7),
              O into shared memory for the epilogue; allocates and frees TMEM.
- warp 8      MMA: S = Q K^T (fwd 1) and O += P V (fwd 6) with tcgen05, single thread issue.
- warp 9      load: TMA of Q once, then K and V tiles in the order the MMA warp uses them.
- warp 10     epilogue: TMA store of the O tile (clipped to Sq by TMA).
- warp 11     idle (completes the fourth warpgroup for setmaxnreg).

TMEM (512 columns x 128 lanes, fp32): S0 at column 0, S1 at 128 (double-buffered S; P_i is
written as 16-bit over the first 64 columns of its S buffer), O at 256 (Dv columns).
Head dims (D, Dv): (64, 64), (96, 96), (128, 128), (192, 192), (192, 128).
The step-by-step correspondence with spec.py is in softmax.py and README.md.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.memory as memory
import cutlass.pipeline as pipeline
import cutlass.tensor_utils as tensor_utils
import cutlass.utils.blackwell_helpers as sm100_utils
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, tcgen05
from cutlass.cute.typing import Float32, Int32, Int64

from impls.attention.fa4.sm100 import pingpong as pp
from impls.attention.fa4.sm100 import scheduler as sched
from impls.attention.fa4.sm100 import softmax as sm
from impls.attention.fa4.sm100.exp2 import tcgen05_fence_after, tcgen05_fence_before
from impls.attention.fa4.sm100.roles import LoadMmaRoles
from impls.attention.fa4.spec import BLOCK_M, BLOCK_N, LOG2E

MASKS = ("none", "causal", "sliding_window", "document")
SCORE_MODS = ("none", "softcap", "alibi")

SOFTMAX_WARPS = (0, 1, 2, 3)
CORRECTION_WARPS = (4, 5, 6, 7)
MMA_WARP, LOAD_WARP, EPILOGUE_WARP, IDLE_WARP = 8, 9, 10, 11
THREADS = 32 * 12
TMEM_COLS = 512
# (D, Dv) -> kv stages (K and V tiles share the stages; a stage holds a K tile): what fits in
# 227 KB of shared memory with Q, the O tile and the stats (README "Shapes and budgets").
KV_STAGES = {(64, 64): 4, (96, 96): 4, (128, 128): 3, (192, 192): 2, (192, 128): 2}
LAUNCH_REGS = 168  # registers/thread at launch (384 threads, ptxas), re-balanced below
REGS = {"softmax": 240, "correction": 96, "other": 32}
# The persistent loops keep more state live (work-tile coordinates, carried pipeline states);
# the MMA/load warps spill at 32. d128 causal softcap, ptxas spills (store/load bytes):
# 240/96/32: 540/600; 224/184/96: 24/116; with the O tile stored 8 values at a time
# (softmax._store_o_chunk) 248/160/96: 24/112. Sum 3 x LAUNCH_REGS (the registers the MMA,
# load, epilogue and idle warps give up go to softmax and correction).
REGS_PERSISTENT = {"softmax": 248, "correction": 160, "other": 96}


def _group(n: int) -> pipeline.CooperativeGroup:
    return pipeline.CooperativeGroup(pipeline.Agent.Thread, n)


class Fa4Sm100Forward(LoadMmaRoles, pp.PingPongRoles):
    """Compile-time configuration: dtype, head dims (D, Dv), mask, score_mod and schedule
    (scheduler.SCHEDULES). Dv defaults to D."""

    def __init__(self, dtype: type[cutlass.Numeric], head_dim: int, mask: str = "none",
                 score_mod: str = "none", head_dim_v: int | None = None,
                 schedule: str = "single") -> None:
        dv = head_dim if head_dim_v is None else head_dim_v
        if (head_dim, dv) not in KV_STAGES:
            raise ValueError(f"(D, Dv) = ({head_dim}, {dv}) not in {sorted(KV_STAGES)}")
        if mask not in MASKS or score_mod not in SCORE_MODS:
            raise ValueError(f"unknown variant {mask!r}/{score_mod!r}")
        if schedule not in sched.SCHEDULES:
            raise ValueError(f"schedule {schedule!r} not in {sched.SCHEDULES}")
        if sched.is_pingpong(schedule) and 2 * 128 + 2 * dv > TMEM_COLS:
            raise ValueError(f"ping-pong needs 2 S + 2 O = {256 + 2 * dv} > {TMEM_COLS} "
                             "TMEM columns")
        if sched.is_pingpong(schedule) and dv != head_dim:
            raise ValueError("ping-pong: Dv == D only (two Q tiles of D = 192 exceed smem)")
        self.dtype = dtype
        self.head_dim = head_dim
        self.head_dim_v = dv
        self.mask = mask
        self.score_mod = score_mod
        self.schedule = schedule
        self.persistent = sched.is_persistent(schedule)
        self.pingpong = sched.is_pingpong(schedule)
        self.kv_stages = KV_STAGES[(head_dim, dv)]
        self.regs = REGS_PERSISTENT if self.persistent else REGS
        if self.pingpong:
            self.regs = pp.REGS
        if not self.persistent and head_dim == 192:  # 12 k-blocks per QK: the MMA warp
            self.regs = {**REGS, "other": 64}  # spilled 136 B at 32 registers
        self.qk_tiler = (BLOCK_M, BLOCK_N, head_dim)
        self.pv_tiler = (BLOCK_M, dv, BLOCK_N)

    # ------------------------------------------------------------------ host side
    @cute.jit
    def __call__(self, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, o: cute.Tensor,
                 lse: cute.Tensor, slopes: cute.Tensor | None,
                 doc_q: cute.Tensor | None, doc_kv: cute.Tensor | None,
                 scale: Float32, exp_scale: Float32, softcap: Float32, window: Int32,
                 num_sms: Int32, stream) -> None:
        """q: (B, Hq, Sq, D); k: (B, Hkv, Sk, D); v: (B, Hkv, Sk, Dv); o: (B, Hq, Sq, Dv);
        last mode contiguous; lse: (B, Hq, Sq) fp32. exp_scale is spec's c (scale*log2(e)
        without a score_mod, log2(e) with one). num_sms: the persistent grid (unused by the
        single-tile schedule)."""
        d, dv = self.head_dim, self.head_dim_v
        b, hq, sq = q.shape[0], q.shape[1], q.shape[2]
        hkv, sk = k.shape[1], k.shape[2]

        def seq_major(t: cute.Tensor, s, h, w) -> cute.Tensor:  # (S, D, (H, B))
            st = (cute.assume(t.stride[2], divby=8), 1,
                  (cute.assume(t.stride[1], divby=8), cute.assume(t.stride[0], divby=8)))
            return cute.make_tensor(t.iterator, cute.make_layout((s, w, (h, b)), stride=st))

        mq, mo = seq_major(q, sq, hq, d), seq_major(o, sq, hq, dv)
        mk = seq_major(k, sk, hkv, d)
        vs = (1, cute.assume(v.stride[2], divby=8),
              (cute.assume(v.stride[1], divby=8), cute.assume(v.stride[0], divby=8)))
        mv = cute.make_tensor(v.iterator, cute.make_layout((dv, sk, (hkv, b)), stride=vs))

        cta_group = tcgen05.CtaGroup.ONE
        qk_mma = sm100_utils.make_trivial_tiled_mma(
            self.dtype, self.dtype, OperandMajorMode.K, OperandMajorMode.K, Float32,
            cta_group, self.qk_tiler[:2])
        pv_mma = sm100_utils.make_trivial_tiled_mma(
            self.dtype, self.dtype, OperandMajorMode.K, OperandMajorMode.MN, Float32,
            cta_group, self.pv_tiler[:2], tcgen05.OperandSource.TMEM)
        cluster_vmnk = cute.tiled_divide(cute.make_layout((1, 1, 1)), (qk_mma.thr_id.shape,))

        q_stages = 2 if self.pingpong else 1
        q_sl = sm100_utils.make_smem_layout_a(qk_mma, self.qk_tiler, self.dtype, q_stages)
        k_sl = sm100_utils.make_smem_layout_b(qk_mma, self.qk_tiler, self.dtype, self.kv_stages)
        v_sl = sm100_utils.make_smem_layout_b(pv_mma, self.pv_tiler, self.dtype, self.kv_stages)
        p_tl = sm100_utils.make_smem_layout_a(pv_mma, self.pv_tiler, self.dtype, 1)
        o_sl = sm100_utils.make_smem_layout_epi(
            self.dtype, tensor_utils.LayoutEnum.ROW_MAJOR, (BLOCK_M, dv), 1)
        k_tile = cute.select(k_sl, mode=[0, 1, 2])
        v_tile = cute.select(v_sl, mode=[0, 1, 2])
        # K and V tiles share the kv stages: a stage holds a K tile (the larger when Dv < D).
        if cutlass.const_expr(dv == d):
            assert cute.cosize(k_tile) == cute.cosize(v_tile)
        else:
            assert cute.cosize(v_tile) < cute.cosize(k_tile)
            v_outer = v_sl.outer
            v_sl = cute.make_composed_layout(v_sl.inner, 0, cute.make_layout(
                v_outer.shape, stride=(*v_outer.stride[:-1], cute.cosize(k_tile))))

        load_op = cpasync.CopyBulkTensorTileG2SOp(cta_group)
        tma_q, gq = cute.nvgpu.make_tiled_tma_atom_A(
            load_op, mq, cute.select(q_sl, mode=[0, 1, 2]), self.qk_tiler, qk_mma,
            cluster_vmnk.shape)
        tma_k, gk = cute.nvgpu.make_tiled_tma_atom_B(
            load_op, mk, k_tile, self.qk_tiler, qk_mma, cluster_vmnk.shape)
        tma_v, gv = cute.nvgpu.make_tiled_tma_atom_B(
            load_op, mv, v_tile, self.pv_tiler, pv_mma, cluster_vmnk.shape)
        tma_o, go = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileS2GOp(), mo, cute.select(o_sl, mode=[0, 1]), (BLOCK_M, dv))
        self.q_bytes = cute.size_in_bytes(self.dtype, cute.select(q_sl, mode=[0, 1, 2]))
        self.kv_bytes = cute.size_in_bytes(self.dtype, k_tile)
        self.v_bytes = cute.size_in_bytes(self.dtype, v_tile)

        kv_stages = self.kv_stages

        @cute.struct
        class Storage:
            q_bar: cute.struct.MemRange[Int64, 2]
            kv_bar: cute.struct.MemRange[Int64, 2 * kv_stages]
            s_bar: cute.struct.MemRange[Int64, 4]  # S_0/S_1 full/empty
            p_bar: cute.struct.MemRange[Int64, 2]
            stats_bar: cute.struct.MemRange[Int64, 4]
            o_bar: cute.struct.MemRange[Int64, 2]
            pv_bar: cute.struct.MemRange[Int64, 2]
            epi_bar: cute.struct.MemRange[Int64, 2]
            tmem_addr: Int32
            stats: cute.struct.MemRange[Float32, BLOCK_M * 3 * 2]
            so: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(o_sl)], 1024]
            sq: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(q_sl)], 1024]
            skv: cute.struct.Align[cute.struct.MemRange[self.dtype, cute.cosize(k_sl)], 1024]

        self.storage = Storage
        if cutlass.const_expr(self.pingpong):
            self.storage = pp.make_storage(self.dtype, kv_stages, o_sl, q_sl, k_sl)
        self.smem_bytes = self.storage.size_in_bytes()
        rows = pp.ROWS if self.pingpong else BLOCK_M
        grid = (cute.ceil_div(sq, rows), hq, b)
        if cutlass.const_expr(self.persistent):
            grid = (sched.grid_size(num_sms, sched.tile_count(sq, hq, b, rows)), 1, 1)
        if cutlass.const_expr(self.pingpong):
            self.kernel_pp(qk_mma, pv_mma, tma_q, gq, tma_k, gk, tma_v, gv, tma_o, go, lse,
                           slopes, doc_q, doc_kv, scale, exp_scale, softcap, window, q_sl, k_sl,
                           v_sl, p_tl, o_sl).launch(grid=grid, block=[pp.THREADS, 1, 1],
                                                    cluster=(1, 1, 1), stream=stream,
                                                    min_blocks_per_mp=1)
            return
        self.kernel(qk_mma, pv_mma, tma_q, gq, tma_k, gk, tma_v, gv, tma_o, go, lse, slopes,
                    doc_q, doc_kv, scale, exp_scale, softcap, window, q_sl, k_sl, v_sl, p_tl,
                    o_sl).launch(grid=grid, block=[THREADS, 1, 1], cluster=(1, 1, 1),
                                 stream=stream, min_blocks_per_mp=1)

    # ------------------------------------------------------------------ tile range
    @cute.jit
    def kv_range(self, m_block: Int32, sq: Int32, sk: Int32, window: Int32):
        """Live kv tiles of this Q tile: (hi, n); tiles hi-1, hi-2, ..., hi-n are visited.
        Causal and sliding window are bottom-right aligned (kv <= q + Sk - Sq), as FA4."""
        n_kv = (sk + BLOCK_N - 1) // BLOCK_N
        hi = n_kv
        lo = Int32(0)
        if cutlass.const_expr(self.mask in ("causal", "sliding_window")):
            last_q = cutlass.min((m_block + 1) * BLOCK_M, sq) - 1
            last_kv = last_q + sk - sq  # highest live kv of the tile
            hi = Int32(0)
            if last_kv >= 0:
                hi = cutlass.min(last_kv // BLOCK_N + 1, n_kv)
            if cutlass.const_expr(self.mask == "sliding_window"):
                first_kv = m_block * BLOCK_M + sk - sq - window + 1  # lowest live kv
                if first_kv > 0:
                    lo = first_kv // BLOCK_N
        n = cutlass.max(hi - lo, 0)
        return hi, n

    @cute.jit
    def work_tile(self, tile: Int32, gq: cute.Tensor, gk: cute.Tensor, window: Int32):
        """Persistent work tile ``tile`` -> (m_block, head, batch, kv head, hi, n)."""
        sq, sk = gq.shape[0], gk.shape[0]
        hq, b = gq.shape[2][0], gq.shape[2][1]
        m_block, head, batch = sched.tile_coords(tile, sq, hq, b, BLOCK_M)
        hkv_head = head // (hq // gk.shape[2][0])
        hi, n = self.kv_range(m_block, sq, sk, window)
        return m_block, head, batch, hkv_head, hi, n

    @cute.jit
    def epilogue_role(self, tma_o, go, s_o, epi_cons, m_block, head, batch):
        """TMA store of one O tile (clipped at Sq by the TMA unit)."""
        h = epi_cons.wait_and_advance()
        g_o = cute.flat_divide(go, (BLOCK_M, self.head_dim_v))[None, None, None, 0,
                                                                (head, batch)]
        t_so, t_go = cpasync.tma_partition(tma_o, 0, cute.make_layout(1),
                                           cute.group_modes(s_o, 0, 2),
                                           cute.group_modes(g_o, 0, 2))
        cute.copy(tma_o, t_so[None, 0], t_go[None, m_block])
        cute.arch.cp_async_bulk_commit_group()
        cute.arch.cp_async_bulk_wait_group(0, read=True)
        h.release()
        return epi_cons

    # ------------------------------------------------------------------ device side
    @cute.kernel
    def kernel(self, qk_mma: cute.TiledMma, pv_mma: cute.TiledMma, tma_q: cute.CopyAtom,
               gq: cute.Tensor, tma_k: cute.CopyAtom, gk: cute.Tensor, tma_v: cute.CopyAtom,
               gv: cute.Tensor, tma_o: cute.CopyAtom, go: cute.Tensor, lse: cute.Tensor,
               slopes: cute.Tensor | None, doc_q: cute.Tensor | None,
               doc_kv: cute.Tensor | None, scale: Float32, exp_scale: Float32,
               softcap: Float32, window: Int32, q_sl: cute.ComposedLayout,
               k_sl: cute.ComposedLayout, v_sl: cute.ComposedLayout, p_tl: cute.ComposedLayout,
               o_sl: cute.ComposedLayout) -> None:
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tidx, _, _ = cute.arch.thread_idx()
        m_block, head, batch = cute.arch.block_idx()
        sq, sk = gq.shape[0], gk.shape[0]
        hkv_head = head // (gq.shape[2][0] // gk.shape[2][0])  # GQA: kv head = h // group
        hi, n = self.kv_range(m_block, sq, sk, window)

        if warp == LOAD_WARP:
            cpasync.prefetch_descriptor(tma_q)
            cpasync.prefetch_descriptor(tma_k)
            cpasync.prefetch_descriptor(tma_v)
            cpasync.prefetch_descriptor(tma_o)

        smem = memory.SmemAllocator()
        st = smem.allocate(self.storage)
        one, softmax_threads = 1, 32 * len(SOFTMAX_WARPS)
        corr_threads = 32 * len(CORRECTION_WARPS)
        q_prod, q_cons = pipeline.PipelineTmaUmma.create(
            num_stages=1, producer_group=_group(one), consumer_group=_group(one),
            tx_count=self.q_bytes, barrier_storage=st.q_bar.data_ptr(),
            defer_sync=True).make_participants()
        kv_prod, kv_cons = pipeline.PipelineTmaUmma.create(
            num_stages=self.kv_stages, producer_group=_group(one), consumer_group=_group(one),
            tx_count=self.kv_bytes, barrier_storage=st.kv_bar.data_ptr(),
            defer_sync=True).make_participants()
        # MMA -> softmax: S_i complete (2 buffers); softmax frees a buffer once P_i is written.
        s_prod, s_cons = pipeline.PipelineUmmaAsync.create(
            num_stages=2, producer_group=_group(one), consumer_group=_group(softmax_threads),
            barrier_storage=st.s_bar.data_ptr(), defer_sync=True).make_participants()
        # softmax -> MMA: P_i in TMEM.
        p_prod, p_cons = pipeline.PipelineAsyncUmma.create(
            num_stages=1, producer_group=_group(softmax_threads), consumer_group=_group(one),
            barrier_storage=st.p_bar.data_ptr(), defer_sync=True).make_participants()
        # softmax -> correction: per-row alpha_i, then a final (l, m*c) entry, in smem.
        stats_prod, stats_cons = pipeline.PipelineAsync.create(
            num_stages=2, producer_group=_group(softmax_threads),
            consumer_group=_group(corr_threads), barrier_storage=st.stats_bar.data_ptr(),
            defer_sync=True).make_participants()
        # correction -> MMA: O rescaled for tile i, PV_i may accumulate.
        o_prod, o_cons = pipeline.PipelineAsyncUmma.create(
            num_stages=1, producer_group=_group(corr_threads), consumer_group=_group(one),
            barrier_storage=st.o_bar.data_ptr(), defer_sync=True).make_participants()
        # MMA -> correction: PV_i complete.
        pv_prod, pv_cons = pipeline.PipelineUmmaAsync.create(
            num_stages=1, producer_group=_group(one), consumer_group=_group(corr_threads),
            barrier_storage=st.pv_bar.data_ptr(), defer_sync=True).make_participants()
        # correction -> epilogue: the O tile is in smem.
        epi_prod, epi_cons = pipeline.PipelineAsync.create(
            num_stages=1, producer_group=_group(corr_threads), consumer_group=_group(32),
            barrier_storage=st.epi_bar.data_ptr(), defer_sync=True).make_participants()
        tmem = memory.TmemAllocator(
            st.tmem_addr.ptr,
            barrier_for_retrieve=pipeline.NamedBarrier(
                barrier_id=1, num_threads=softmax_threads + corr_threads + 32),
            allocator_warp_id=CORRECTION_WARPS[0], arch="sm_100")
        pipeline.pipeline_init_arrive(is_relaxed=True)

        s_q = st.sq.get_tensor(q_sl.outer, swizzle=q_sl.inner)
        s_k = st.skv.get_tensor(k_sl.outer, swizzle=k_sl.inner)
        s_v = cute.make_tensor(cute.recast_ptr(s_k.iterator, v_sl.inner, dtype=self.dtype),
                               v_sl.outer)
        s_o = st.so.get_tensor(o_sl.outer, swizzle=o_sl.inner)
        s_stats = st.stats.get_tensor(cute.make_layout((BLOCK_M, 3, 2)))
        qk_thr, pv_thr = qk_mma.get_slice(0), pv_mma.get_slice(0)
        # Everything derived from the tiled MMAs is built before the role branches: the MMA
        # warp mutates them (ACCUMULATE field) inside its own branch.
        s_layout = qk_thr.make_fragment_C(qk_thr.partition_shape_C(self.qk_tiler[:2])).layout
        o_layout = pv_thr.make_fragment_C(pv_thr.partition_shape_C(self.pv_tiler[:2])).layout
        c_s = qk_thr.partition_C(cute.make_identity_tensor((BLOCK_M, BLOCK_N)))
        c_o = pv_thr.partition_C(cute.make_identity_tensor((BLOCK_M, self.head_dim_v)))
        pipeline.pipeline_init_wait()
        first, stride, tiles = m_block, 1, 1
        if cutlass.const_expr(self.persistent):  # work tiles first, first + stride, ... < tiles
            stride = cute.arch.grid_dim()[0]
            tiles = sched.tile_count(sq, gq.shape[2][0], gq.shape[2][1], BLOCK_M)

        if warp == LOAD_WARP:
            cute.arch.setmaxregister_decrease(self.regs["other"])
            if cutlass.const_expr(self.persistent):
                for tile in cutlass.range(first, tiles, stride, unroll=1):
                    m_block, head, batch, hkv_head, hi, n = self.work_tile(tile, gq, gk, window)
                    q_prod, kv_prod = self.load_role(
                        qk_thr, pv_thr, tma_q, gq, tma_k, gk, tma_v, gv, s_q, s_k, s_v, q_prod,
                        kv_prod, m_block, head, hkv_head, batch, hi, n)
            else:
                self.load_role(qk_thr, pv_thr, tma_q, gq, tma_k, gk, tma_v, gv, s_q, s_k, s_v,
                               q_prod, kv_prod, m_block, head, hkv_head, batch, hi, n)
        if warp == MMA_WARP:
            cute.arch.setmaxregister_decrease(self.regs["other"])
            tmem.wait_for_alloc()
            tmem_ptr = tmem.retrieve_ptr(Float32)
            if cutlass.const_expr(self.persistent):
                s_base = Int32(0)
                for tile in cutlass.range(first, tiles, stride, unroll=1):
                    m_block, head, batch, hkv_head, hi, n = self.work_tile(tile, gq, gk, window)
                    q_cons, kv_cons, s_prod, p_cons, o_cons, pv_prod = self.mma_role(
                        qk_mma, pv_mma, qk_thr, pv_thr, s_q, s_k, s_v, p_tl, tmem_ptr, q_cons,
                        kv_cons, s_prod, p_cons, o_cons, pv_prod, n, s_base)
                    s_base = (s_base + n) % 2
            else:
                self.mma_role(qk_mma, pv_mma, qk_thr, pv_thr, s_q, s_k, s_v, p_tl, tmem_ptr,
                              q_cons, kv_cons, s_prod, p_cons, o_cons, pv_prod, n)
        if warp == EPILOGUE_WARP:
            cute.arch.setmaxregister_decrease(self.regs["other"])
            if cutlass.const_expr(self.persistent):
                for tile in cutlass.range(first, tiles, stride, unroll=1):
                    m_block, head, batch, hkv_head, hi, n = self.work_tile(tile, gq, gk, window)
                    epi_cons = self.epilogue_role(tma_o, go, s_o, epi_cons, m_block, head,
                                                  batch)
            else:
                self.epilogue_role(tma_o, go, s_o, epi_cons, m_block, head, batch)
        if warp == IDLE_WARP:
            cute.arch.setmaxregister_decrease(self.regs["other"])
        if warp < CORRECTION_WARPS[0]:
            cute.arch.setmaxregister_increase(self.regs["softmax"])
            tmem.wait_for_alloc()
            tmem_ptr = tmem.retrieve_ptr(Float32)
            if cutlass.const_expr(self.persistent):
                s_base = Int32(0)
                for tile in cutlass.range(first, tiles, stride, unroll=1):
                    m_block, head, batch, hkv_head, hi, n = self.work_tile(tile, gq, gk, window)
                    s_cons, p_prod, stats_prod = sm.softmax_role(
                        self, s_layout, c_s, tmem_ptr, s_stats, s_cons, p_prod, stats_prod,
                        slopes, doc_q, doc_kv, scale, exp_scale, softcap, window, m_block, head,
                        sq, sk, hi, n, tidx, s_base)
                    s_base = (s_base + n) % 2
            else:
                sm.softmax_role(self, s_layout, c_s, tmem_ptr, s_stats, s_cons, p_prod,
                                stats_prod, slopes, doc_q, doc_kv, scale, exp_scale, softcap,
                                window, m_block, head, sq, sk, hi, n, tidx)
        if warp >= CORRECTION_WARPS[0] and warp < MMA_WARP:
            if cutlass.const_expr(self.regs["correction"] > LAUNCH_REGS):
                cute.arch.setmaxregister_increase(self.regs["correction"])
            elif cutlass.const_expr(self.regs["correction"] < LAUNCH_REGS):
                cute.arch.setmaxregister_decrease(self.regs["correction"])
            tmem.allocate(TMEM_COLS)
            tmem.wait_for_alloc()
            tmem_ptr = tmem.retrieve_ptr(Float32)
            if cutlass.const_expr(self.persistent):
                for tile in cutlass.range(first, tiles, stride, unroll=1):
                    m_block, head, batch, hkv_head, hi, n = self.work_tile(tile, gq, gk, window)
                    stats_cons, pv_cons, o_prod, epi_prod = sm.correction_role(
                        self, o_layout, c_o, tmem_ptr, s_stats, s_o, lse, stats_cons, pv_cons,
                        o_prod, epi_prod, m_block, head, batch, sq, n, tidx % corr_threads)
            else:
                sm.correction_role(self, o_layout, c_o, tmem_ptr, s_stats, s_o, lse,
                                   stats_cons, pv_cons, o_prod, epi_prod, m_block, head, batch,
                                   sq, n, tidx % corr_threads)
            tmem.relinquish_alloc_permit()
            tcgen05_fence_before()
            pipeline.NamedBarrier(barrier_id=2, num_threads=corr_threads).arrive_and_wait()
            tcgen05_fence_after()
            tmem.free(tmem_ptr)


def exp_scale_for(score_mod: str, scale: float) -> float:
    """spec fwd 2: c = scale*log2(e) without a score_mod, log2(e) with one (host, fp64)."""
    return LOG2E if score_mod != "none" else scale * LOG2E
