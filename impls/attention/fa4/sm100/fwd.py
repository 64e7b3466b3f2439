"""FA4-style attention forward for Blackwell (sm_100a) in CuTe DSL: tcgen05 MMA, TMEM
accumulators, TMA loads/stores and warp-specialised roles.

One CTA computes one BLOCK_M x D output tile of one (batch, query head); kv tiles are visited
from the last live one to the first (spec fwd, preamble). Roles (12 warps, 384 threads):

- warps 0-3   softmax: one thread per query row (TMEM lane = row); spec fwd 2-6.
- warps 4-7   correction: O *= alpha in TMEM (spec fwd 4), final O / l and lse (fwd 7),
              O into shared memory for the epilogue; allocates and frees TMEM.
- warp 8      MMA: S = Q K^T (fwd 1) and O += P V (fwd 6) with tcgen05, single thread issue.
- warp 9      load: TMA of Q once, then K and V tiles in the order the MMA warp uses them.
- warp 10     epilogue: TMA store of the O tile (clipped to Sq by TMA).
- warp 11     idle (completes the fourth warpgroup for setmaxnreg).

TMEM (512 columns x 128 lanes, fp32): S0 at column 0, S1 at 128 (double-buffered S; P_i is
written as 16-bit over the first 64 columns of S_{i%2}), O at 256 (D columns).
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

from impls.attention.fa4.sm100 import softmax as sm
from impls.attention.fa4.sm100.exp2 import tcgen05_fence_after, tcgen05_fence_before
from impls.attention.fa4.spec import BLOCK_M, BLOCK_N, LOG2E

MASKS = ("none", "causal", "sliding_window", "document")
SCORE_MODS = ("none", "softcap", "alibi")

SOFTMAX_WARPS = (0, 1, 2, 3)
CORRECTION_WARPS = (4, 5, 6, 7)
MMA_WARP, LOAD_WARP, EPILOGUE_WARP, IDLE_WARP = 8, 9, 10, 11
THREADS = 32 * 12
TMEM_COLS = 512
TMEM_S = (0, 128)  # S_0 / S_1 (P_i aliases the first 64 columns of S_{i%2})
TMEM_O = 256
REGS = {"softmax": 240, "correction": 96, "other": 32}


def _group(n: int) -> pipeline.CooperativeGroup:
    return pipeline.CooperativeGroup(pipeline.Agent.Thread, n)


class Fa4Sm100Forward:
    """Compile-time configuration: dtype, head dim, mask and score_mod variant."""

    def __init__(self, dtype: type[cutlass.Numeric], head_dim: int, mask: str = "none",
                 score_mod: str = "none") -> None:
        if head_dim not in (64, 128):
            raise ValueError(f"head_dim {head_dim} not in (64, 128)")
        if mask not in MASKS or score_mod not in SCORE_MODS:
            raise ValueError(f"unknown variant {mask!r}/{score_mod!r}")
        self.dtype = dtype
        self.head_dim = head_dim
        self.mask = mask
        self.score_mod = score_mod
        self.kv_stages = 3 if head_dim == 128 else 4
        self.qk_tiler = (BLOCK_M, BLOCK_N, head_dim)
        self.pv_tiler = (BLOCK_M, head_dim, BLOCK_N)

    # ------------------------------------------------------------------ host side
    @cute.jit
    def __call__(self, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, o: cute.Tensor,
                 lse: cute.Tensor, slopes: cute.Tensor | None,
                 doc_q: cute.Tensor | None, doc_kv: cute.Tensor | None,
                 scale: Float32, exp_scale: Float32, softcap: Float32, window: Int32,
                 stream) -> None:
        """q, o: (B, Hq, Sq, D); k, v: (B, Hkv, Sk, D), last mode contiguous; lse: (B, Hq, Sq)
        fp32. exp_scale is spec's c (scale*log2(e) without a score_mod, log2(e) with one)."""
        d = self.head_dim
        b, hq, sq = q.shape[0], q.shape[1], q.shape[2]
        hkv, sk = k.shape[1], k.shape[2]

        def seq_major(t: cute.Tensor, s, h) -> cute.Tensor:  # (S, D, (H, B))
            st = (cute.assume(t.stride[2], divby=8), 1,
                  (cute.assume(t.stride[1], divby=8), cute.assume(t.stride[0], divby=8)))
            return cute.make_tensor(t.iterator, cute.make_layout((s, d, (h, b)), stride=st))

        mq, mo = seq_major(q, sq, hq), seq_major(o, sq, hq)
        mk = seq_major(k, sk, hkv)
        vs = (1, cute.assume(v.stride[2], divby=8),
              (cute.assume(v.stride[1], divby=8), cute.assume(v.stride[0], divby=8)))
        mv = cute.make_tensor(v.iterator, cute.make_layout((d, sk, (hkv, b)), stride=vs))

        cta_group = tcgen05.CtaGroup.ONE
        qk_mma = sm100_utils.make_trivial_tiled_mma(
            self.dtype, self.dtype, OperandMajorMode.K, OperandMajorMode.K, Float32,
            cta_group, self.qk_tiler[:2])
        pv_mma = sm100_utils.make_trivial_tiled_mma(
            self.dtype, self.dtype, OperandMajorMode.K, OperandMajorMode.MN, Float32,
            cta_group, self.pv_tiler[:2], tcgen05.OperandSource.TMEM)
        cluster_vmnk = cute.tiled_divide(cute.make_layout((1, 1, 1)), (qk_mma.thr_id.shape,))

        q_sl = sm100_utils.make_smem_layout_a(qk_mma, self.qk_tiler, self.dtype, 1)
        k_sl = sm100_utils.make_smem_layout_b(qk_mma, self.qk_tiler, self.dtype, self.kv_stages)
        v_sl = sm100_utils.make_smem_layout_b(pv_mma, self.pv_tiler, self.dtype, self.kv_stages)
        p_tl = sm100_utils.make_smem_layout_a(pv_mma, self.pv_tiler, self.dtype, 1)
        o_sl = sm100_utils.make_smem_layout_epi(
            self.dtype, tensor_utils.LayoutEnum.ROW_MAJOR, (BLOCK_M, d), 1)
        k_tile = cute.select(k_sl, mode=[0, 1, 2])
        v_tile = cute.select(v_sl, mode=[0, 1, 2])
        # K and V tiles share the kv stages: same element count per stage.
        assert cute.cosize(k_tile) == cute.cosize(v_tile)

        load_op = cpasync.CopyBulkTensorTileG2SOp(cta_group)
        tma_q, gq = cute.nvgpu.make_tiled_tma_atom_A(
            load_op, mq, cute.select(q_sl, mode=[0, 1, 2]), self.qk_tiler, qk_mma,
            cluster_vmnk.shape)
        tma_k, gk = cute.nvgpu.make_tiled_tma_atom_B(
            load_op, mk, k_tile, self.qk_tiler, qk_mma, cluster_vmnk.shape)
        tma_v, gv = cute.nvgpu.make_tiled_tma_atom_B(
            load_op, mv, v_tile, self.pv_tiler, pv_mma, cluster_vmnk.shape)
        tma_o, go = cpasync.make_tiled_tma_atom(
            cpasync.CopyBulkTensorTileS2GOp(), mo, cute.select(o_sl, mode=[0, 1]), (BLOCK_M, d))
        self.q_bytes = cute.size_in_bytes(self.dtype, cute.select(q_sl, mode=[0, 1, 2]))
        self.kv_bytes = cute.size_in_bytes(self.dtype, k_tile)

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
        self.smem_bytes = Storage.size_in_bytes()
        grid = (cute.ceil_div(sq, BLOCK_M), hq, b)
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
        c_o = pv_thr.partition_C(cute.make_identity_tensor((BLOCK_M, self.head_dim)))
        pipeline.pipeline_init_wait()

        if warp == LOAD_WARP:
            cute.arch.setmaxregister_decrease(REGS["other"])
            self.load_role(qk_thr, pv_thr, tma_q, gq, tma_k, gk, tma_v, gv, s_q, s_k, s_v,
                           q_prod, kv_prod, m_block, head, hkv_head, batch, hi, n)
        if warp == MMA_WARP:
            cute.arch.setmaxregister_decrease(REGS["other"])
            tmem.wait_for_alloc()
            tmem_ptr = tmem.retrieve_ptr(Float32)
            self.mma_role(qk_mma, pv_mma, qk_thr, pv_thr, s_q, s_k, s_v, p_tl, tmem_ptr,
                          q_cons, kv_cons, s_prod, p_cons, o_cons, pv_prod, n)
        if warp == EPILOGUE_WARP:
            cute.arch.setmaxregister_decrease(REGS["other"])
            h = epi_cons.wait_and_advance()
            g_o = cute.flat_divide(go, (BLOCK_M, self.head_dim))[None, None, None, 0,
                                                                  (head, batch)]
            t_so, t_go = cpasync.tma_partition(tma_o, 0, cute.make_layout(1),
                                               cute.group_modes(s_o, 0, 2),
                                               cute.group_modes(g_o, 0, 2))
            cute.copy(tma_o, t_so[None, 0], t_go[None, m_block])
            cute.arch.cp_async_bulk_commit_group()
            cute.arch.cp_async_bulk_wait_group(0, read=True)
            h.release()
        if warp == IDLE_WARP:
            cute.arch.setmaxregister_decrease(REGS["other"])
        if warp < CORRECTION_WARPS[0]:
            cute.arch.setmaxregister_increase(REGS["softmax"])
            tmem.wait_for_alloc()
            tmem_ptr = tmem.retrieve_ptr(Float32)
            sm.softmax_role(self, s_layout, c_s, tmem_ptr, s_stats, s_cons, p_prod, stats_prod,
                            slopes, doc_q, doc_kv, scale, exp_scale, softcap, window,
                            m_block, head, sq, sk, hi, n, tidx)
        if warp >= CORRECTION_WARPS[0] and warp < MMA_WARP:
            cute.arch.setmaxregister_decrease(REGS["correction"])
            tmem.allocate(TMEM_COLS)
            tmem.wait_for_alloc()
            tmem_ptr = tmem.retrieve_ptr(Float32)
            sm.correction_role(self, o_layout, c_o, tmem_ptr, s_stats, s_o, lse, stats_cons,
                               pv_cons, o_prod, epi_prod, m_block, head, batch, sq, n,
                               tidx % corr_threads)
            tmem.relinquish_alloc_permit()
            tcgen05_fence_before()
            pipeline.NamedBarrier(barrier_id=2, num_threads=corr_threads).arrive_and_wait()
            tcgen05_fence_after()
            tmem.free(tmem_ptr)

    @cute.jit
    def load_role(self, qk_thr, pv_thr, tma_q, gq, tma_k, gk, tma_v, gv, s_q, s_k, s_v,
                  q_prod, kv_prod, m_block, head, hkv_head, batch, hi, n) -> None:
        """TMA producer. Order: Q, K_{hi-1}, then per step i: K_{hi-2-i} (if any), V_{hi-1-i};
        exactly the order in which the MMA warp consumes the kv stages."""
        t_sq, t_gq = cpasync.tma_partition(
            tma_q, 0, cute.make_layout(1), cute.group_modes(s_q, 0, 3),
            cute.group_modes(qk_thr.partition_A(cute.flat_divide(
                gq, cute.select(self.qk_tiler, mode=[0, 2]))), 0, 3))
        t_sk, t_gk = cpasync.tma_partition(
            tma_k, 0, cute.make_layout(1), cute.group_modes(s_k, 0, 3),
            cute.group_modes(qk_thr.partition_B(cute.flat_divide(
                gk, cute.select(self.qk_tiler, mode=[1, 2]))), 0, 3))
        t_sv, t_gv = cpasync.tma_partition(
            tma_v, 0, cute.make_layout(1), cute.group_modes(s_v, 0, 3),
            cute.group_modes(pv_thr.partition_B(cute.flat_divide(
                gv, cute.select(self.pv_tiler, mode=[1, 2]))), 0, 3))
        t_gq = t_gq[None, None, 0, (head, batch)]
        t_gk = t_gk[None, None, 0, (hkv_head, batch)]
        t_gv = t_gv[None, 0, None, (hkv_head, batch)]
        if n > 0:
            h = q_prod.acquire_and_advance()
            cute.copy(tma_q, t_gq[None, m_block], t_sq[None, h.index], tma_bar_ptr=h.barrier)
            h = kv_prod.acquire_and_advance()
            cute.copy(tma_k, t_gk[None, hi - 1], t_sk[None, h.index], tma_bar_ptr=h.barrier)
            for i in cutlass.range(n, unroll=1):
                if i + 1 < n:
                    h = kv_prod.acquire_and_advance()
                    cute.copy(tma_k, t_gk[None, hi - 2 - i], t_sk[None, h.index],
                              tma_bar_ptr=h.barrier)
                h = kv_prod.acquire_and_advance()
                cute.copy(tma_v, t_gv[None, hi - 1 - i], t_sv[None, h.index],
                          tma_bar_ptr=h.barrier)

    @cute.jit
    def mma_role(self, qk_mma, pv_mma, qk_thr, pv_thr, s_q, s_k, s_v, p_tl, tmem_ptr,
                 q_cons, kv_cons, s_prod, p_cons, o_cons, pv_prod, n) -> None:
        """tcgen05 issue (spec fwd 1 and 6). S_{i+1} is issued before PV_i so that the
        softmax of tile i+1 overlaps PV_i. Reuse of S_{i%2} by S_{i+2} is safe because
        tcgen05.mma operations issued by one thread execute in issue order."""
        r_q = qk_thr.make_fragment_A(s_q)
        r_k = qk_thr.make_fragment_B(s_k)
        r_v = pv_thr.make_fragment_B(s_v)
        if n > 0:
            hq = q_cons.wait_and_advance()
            r_qi = r_q[None, None, None, hq.index]
            kv_cons, s_prod = self.issue_qk(qk_mma, r_qi, r_k,
                                            tmem_s(self, qk_thr, tmem_ptr, 0), kv_cons, s_prod)
            for i in cutlass.range(n, unroll=1):
                if i + 1 < n:  # S_{i+1} overlaps the softmax of tile i
                    kv_cons, s_prod = self.issue_qk(
                        qk_mma, r_qi, r_k, tmem_s(self, qk_thr, tmem_ptr, (i + 1) % 2),
                        kv_cons, s_prod)
                hv = kv_cons.wait_and_advance()
                hp = p_cons.wait_and_advance()  # P_i written (spec fwd 6)
                ho = o_cons.wait_and_advance()  # O rescaled by alpha_i (spec fwd 4)
                hpv = pv_prod.acquire_and_advance()
                tcgen05_fence_after()  # order the PV MMA after the softmax/correction syncs
                self.issue_pv(pv_mma, tmem_p(self, pv_thr, p_tl, tmem_ptr, i % 2),
                              r_v[None, None, None, hv.index], tmem_o(self, pv_thr, tmem_ptr),
                              i > 0)
                hpv.commit()
                hp.release()
                ho.release()
                hv.release()
            hq.release()

    @cute.jit
    def issue_qk(self, qk_mma, r_q, r_k, t_s, kv_cons, s_prod) -> None:
        hk = kv_cons.wait_and_advance()
        hs = s_prod.acquire_and_advance()
        tcgen05_fence_after()
        r_ki = r_k[None, None, None, hk.index]
        for kp in cutlass.range_constexpr(cute.size(r_q, mode=[2])):
            qk_mma.set(tcgen05.Field.ACCUMULATE, kp != 0)
            cute.gemm(qk_mma, t_s, r_q[None, None, kp], r_ki[None, None, kp], t_s)
        hs.commit()
        hk.release()
        return kv_cons, s_prod

    @cute.jit
    def issue_pv(self, pv_mma, t_p, r_v, t_o, accumulate) -> None:
        for kp in cutlass.range_constexpr(cute.size(t_p, mode=[2])):
            pv_mma.set(tcgen05.Field.ACCUMULATE, accumulate or kp != 0)
            cute.gemm(pv_mma, t_o, t_p[None, None, kp], r_v[None, None, kp], t_o)


def tmem_s(cfg: Fa4Sm100Forward, qk_thr, tmem_ptr, buf) -> cute.Tensor:
    """S buffer ``buf`` (0/1, may be dynamic) as the QK MMA accumulator."""
    layout = qk_thr.make_fragment_C(qk_thr.partition_shape_C(cfg.qk_tiler[:2])).layout
    return cute.make_tensor(tmem_ptr + TMEM_S[1] * buf, layout)


def tmem_o(cfg: Fa4Sm100Forward, pv_thr, tmem_ptr) -> cute.Tensor:
    """The O accumulator (fp32, D columns)."""
    layout = pv_thr.make_fragment_C(pv_thr.partition_shape_C(cfg.pv_tiler[:2])).layout
    return cute.make_tensor(tmem_ptr + TMEM_O, layout)


def tmem_p(cfg: Fa4Sm100Forward, pv_thr, p_tl, tmem_ptr, buf) -> cute.Tensor:
    """P_i (16-bit) over S buffer ``buf``, as the PV MMA's A operand from TMEM."""
    frag = pv_thr.make_fragment_A(cute.make_tensor(tmem_ptr, p_tl.outer))[None, None, None, 0]
    ptr = cute.recast_ptr(tmem_ptr + TMEM_S[1] * buf, dtype=frag.element_type)
    return cute.make_tensor(ptr, frag.layout)


def exp_scale_for(score_mod: str, scale: float) -> float:
    """spec fwd 2: c = scale*log2(e) without a score_mod, log2(e) with one (host, fp64)."""
    return LOG2E if score_mod != "none" else scale * LOG2E
