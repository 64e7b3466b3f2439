"""FA4-style attention backward for Blackwell (sm_100a) in CuTe DSL: tcgen05 MMA with TMEM
accumulators, TMA loads, warp-specialised roles; two kernels launched by one host function.

* dK/dV kernel: one CTA per (128-key tile, query head, batch), visiting the live 128-row q
  tiles in increasing order: S^T = K Q^T, dP^T = V dO^T (TMEM), P_r^T and dS_r^T written back
  to TMEM by the compute warps, dV += P_r^T dO, dK += dS_r^T Q (A operands from TMEM).
* dQ kernel: one CTA per (128-row q tile, query head, batch), visiting the live kv tiles in
  increasing order: S = Q K^T, dP = dO V^T recomputed, dQ += dS_r K, fp32 in TMEM. No
  atomics: one CTA owns each dQ tile and the kv order is fixed, so dQ is deterministic.

Roles (6 warps, 192 threads, no setmaxnreg): warps 0-3 compute (bwd_compute.py; warp 0 also
allocates and frees TMEM), warp 4 MMA (one thread issues tcgen05.mma), warp 5 TMA loads.
TMEM (512 columns allocated): S / S^T at 0, dP / dP^T at 128 (P_r, dS_r 16-bit over their
first 64 columns), accumulators from 256 (dV, dK: 256, 256 + D; dQ: 256): 256 + 2D <= 512
columns for D in HEAD_DIMS (448 at D = 96).
Shared memory, both kernels: a fixed pair of 128 x D tiles (K, V or Q, dO; 1 stage) and a
streamed pair (Q, dO or K, V; 2 stages), 192 KB at D = 128, 144 KB at D = 96, 96 KB at D = 64.
The MN-major B operands (Q, dO in dK/dV; K in dQ) are the same smem tiles seen through an
MN-major layout (128B swizzle; 64B at D = 96, in both views).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.memory as memory
import cutlass.pipeline as pipeline
import cutlass.utils.blackwell_helpers as sm100_utils
from cutlass.cute.nvgpu import OperandMajorMode, cpasync, tcgen05
from cutlass.cute.typing import Float32, Int32, Int64

from impls.attention.fa4.sm100 import bwd_compute
from impls.attention.fa4.sm100.exp2 import tcgen05_fence_after, tcgen05_fence_before
from impls.attention.fa4.spec import BLOCK_M, BLOCK_N

MASKS = ("none", "causal", "sliding_window", "document")
SCORE_MODS = ("none", "softcap", "alibi")
COMPUTE_WARPS = (0, 1, 2, 3)
MMA_WARP, LOAD_WARP = 4, 5
THREADS = 32 * 6
TMEM_COLS = 512
TMEM_S, TMEM_DP, TMEM_ACC = 0, 128, 256
STAGES = 2  # streamed tiles
HEAD_DIMS = (64, 96, 128)  # D = Dv; D = 192 needs 640 TMEM columns and 288 KB of smem


def _group(n: int) -> pipeline.CooperativeGroup:
    return pipeline.CooperativeGroup(pipeline.Agent.Thread, n)


@cute.jit
def q_tiles(mask: cutlass.Constexpr, n_blk: Int32, sq: Int32, sk: Int32, window: Int32):
    """Live q tiles of key tile n_blk: (lo, n), tiles lo ... lo + n - 1 in increasing order.
    The mirror of fwd.kv_range: live iff kv <= q + Sk - Sq (causal, window) and
    q + Sk - Sq - kv < window (window); document and none visit every q tile."""
    n_q = (sq + BLOCK_M - 1) // BLOCK_M
    lo, hi = Int32(0), n_q
    if cutlass.const_expr(mask in ("causal", "sliding_window")):
        first_q = n_blk * BLOCK_N - (sk - sq)  # lowest query that sees the tile's first key
        if first_q > 0:
            lo = cutlass.min(first_q // BLOCK_M, n_q)
    if cutlass.const_expr(mask == "sliding_window"):
        last_kv = cutlass.min((n_blk + 1) * BLOCK_N, sk) - 1
        last_q = last_kv - (sk - sq) + window - 1  # highest query that sees the tile
        hi = Int32(0)
        if last_q >= 0:
            hi = cutlass.min(last_q // BLOCK_M + 1, n_q)
    return lo, cutlass.max(hi - lo, 0)


@cute.jit
def kv_tiles(mask: cutlass.Constexpr, m_blk: Int32, sq: Int32, sk: Int32, window: Int32):
    """Live kv tiles of q tile m_blk: (lo, n), visited in increasing order (same bounds as
    fwd.kv_range, which visits them from the last)."""
    n_kv = (sk + BLOCK_N - 1) // BLOCK_N
    hi, lo = n_kv, Int32(0)
    if cutlass.const_expr(mask in ("causal", "sliding_window")):
        last_kv = cutlass.min((m_blk + 1) * BLOCK_M, sq) - 1 + sk - sq
        hi = Int32(0)
        if last_kv >= 0:
            hi = cutlass.min(last_kv // BLOCK_N + 1, n_kv)
    if cutlass.const_expr(mask == "sliding_window"):
        first_kv = m_blk * BLOCK_M + sk - sq - window + 1
        if first_kv > 0:
            lo = first_kv // BLOCK_N
    return lo, cutlass.max(hi - lo, 0)


class Fa4Sm100Backward:
    """Compile-time configuration: dtype, head dim, mask and score_mod variant."""

    def __init__(self, dtype: type[cutlass.Numeric], head_dim: int, mask: str = "none",
                 score_mod: str = "none") -> None:
        if head_dim not in HEAD_DIMS:
            raise ValueError(f"head_dim {head_dim} not in {HEAD_DIMS}")
        if mask not in MASKS or score_mod not in SCORE_MODS:
            raise ValueError(f"unknown variant {mask!r}/{score_mod!r}")
        self.dtype, self.head_dim, self.mask, self.score_mod = dtype, head_dim, mask, score_mod
        self.ss_tiler = (BLOCK_M, BLOCK_N, head_dim)  # S^T, dP^T, S, dP: K = D
        self.ts_tiler = (BLOCK_M, head_dim, BLOCK_N)  # dV, dK, dQ: A from TMEM, K = 128
        self.smem_bytes = 0

    # ------------------------------------------------------------------ host side
    @cute.jit
    def __call__(self, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, do: cute.Tensor,
                 l2: cute.Tensor, delta: cute.Tensor, dq: cute.Tensor, dk: cute.Tensor,
                 dv: cute.Tensor, slopes: cute.Tensor | None, doc_q: cute.Tensor | None,
                 doc_kv: cute.Tensor | None, scale: Float32, exp_scale: Float32,
                 softcap: Float32, window: Int32, stream) -> None:
        """q, do: (B, Hq, Sq, D); k, v: (B, Hkv, Sk, D); l2, delta: (B, Hq, Sq) fp32;
        dq: (B, Hq, Sq, D), dk, dv: (B, Hq, Sk, D) fp32 (per query head). exp_scale is c."""
        d, dt = self.head_dim, self.dtype
        b, hq, sq = q.shape[0], q.shape[1], q.shape[2]
        hkv, sk = k.shape[1], k.shape[2]

        def seq_major(t: cute.Tensor, s, h) -> cute.Tensor:  # (S, D, (H, B))
            st = (cute.assume(t.stride[2], divby=8), 1,
                  (cute.assume(t.stride[1], divby=8), cute.assume(t.stride[0], divby=8)))
            return cute.make_tensor(t.iterator, cute.make_layout((s, d, (h, b)), stride=st))

        mq, mdo = seq_major(q, sq, hq), seq_major(do, sq, hq)
        mk, mv = seq_major(k, sk, hkv), seq_major(v, sk, hkv)
        km, mn, one = OperandMajorMode.K, OperandMajorMode.MN, tcgen05.CtaGroup.ONE

        def ss() -> cute.TiledMma:  # both operands K-major in smem
            return sm100_utils.make_trivial_tiled_mma(dt, dt, km, km, Float32, one,
                                                      self.ss_tiler[:2])

        def ts() -> cute.TiledMma:  # A (16-bit P_r / dS_r) from TMEM, B MN-major in smem
            return sm100_utils.make_trivial_tiled_mma(dt, dt, km, mn, Float32, one,
                                                      self.ts_tiler[:2],
                                                      tcgen05.OperandSource.TMEM)

        a_sl = sm100_utils.make_smem_layout_a(ss(), self.ss_tiler, dt, 1)  # fixed pair
        b_sl = sm100_utils.make_smem_layout_b(ss(), self.ss_tiler, dt, STAGES)  # streamed
        bt_sl = sm100_utils.make_smem_layout_b(ts(), self.ts_tiler, dt, STAGES)  # MN view
        p_tl = sm100_utils.make_smem_layout_a(ts(), self.ts_tiler, dt, 1)  # TMEM A shape
        a_tile, b_tile = cute.select(a_sl, mode=[0, 1, 2]), cute.select(b_sl, mode=[0, 1, 2])
        load_op = cpasync.CopyBulkTensorTileG2SOp(one)
        cl = cute.tiled_divide(cute.make_layout((1, 1, 1)), (ss().thr_id.shape,)).shape

        def tma_a(m, mma):
            return cute.nvgpu.make_tiled_tma_atom_A(load_op, m, a_tile, self.ss_tiler, mma, cl)

        def tma_b(m, mma):
            return cute.nvgpu.make_tiled_tma_atom_B(load_op, m, b_tile, self.ss_tiler, mma, cl)

        self.fixed_bytes = 2 * cute.size_in_bytes(dt, a_tile)
        self.stream_bytes = 2 * cute.size_in_bytes(dt, b_tile)

        @cute.struct
        class Storage:
            fixed_bar: cute.struct.MemRange[Int64, 2]
            stream_bar: cute.struct.MemRange[Int64, 2 * STAGES]
            s_bar: cute.struct.MemRange[Int64, 2]
            g_bar: cute.struct.MemRange[Int64, 2]
            acc_bar: cute.struct.MemRange[Int64, 2]
            tmem_addr: Int32
            cols_l2: cute.struct.MemRange[Float32, BLOCK_M * 2]
            cols_dl: cute.struct.MemRange[Float32, BLOCK_M * 2]
            cols_doc: cute.struct.MemRange[Int32, BLOCK_M * 2]
            sx: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(a_sl)], 1024]
            sy: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(a_sl)], 1024]
            ss_: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(b_sl)], 1024]
            st_: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(b_sl)], 1024]

        self.storage = Storage
        self.smem_bytes = Storage.size_in_bytes()
        aux = (l2, delta, slopes, doc_q, doc_kv, scale, exp_scale, softcap, window)
        mdk = cute.make_tensor(dk.iterator, cute.select(dk.layout, mode=[2, 3, 1, 0]))
        mdv = cute.make_tensor(dv.iterator, cute.select(dv.layout, mode=[2, 3, 1, 0]))
        mdq = cute.make_tensor(dq.iterator, cute.select(dq.layout, mode=[2, 3, 1, 0]))
        # dK/dV kernel: fixed K, V (A operands), streamed Q, dO (B, and MN-major B views).
        st_mma, dpt_mma, dv_mma, dk_mma = ss(), ss(), ts(), ts()
        (tk, gk), (tv, gv) = tma_a(mk, st_mma), tma_a(mv, dpt_mma)
        (tq, gq), (tdo, gdo) = tma_b(mq, st_mma), tma_b(mdo, dpt_mma)
        self.kernel(True, st_mma, dpt_mma, dv_mma, dk_mma, tk, gk, tv, gv, tq, gq, tdo, gdo,
                    (mdv, mdk), a_sl, b_sl, bt_sl, p_tl, aux, sq, sk, hq, hkv).launch(
            grid=(cute.ceil_div(sk, BLOCK_N), hq, b), block=[THREADS, 1, 1], cluster=(1, 1, 1),
            stream=stream, min_blocks_per_mp=1)
        # dQ kernel: fixed Q, dO (A operands), streamed K, V (B), K^T the MN-major view.
        s_mma, dp_mma, dq_mma = ss(), ss(), ts()
        (tq2, gq2), (tdo2, gdo2) = tma_a(mq, s_mma), tma_a(mdo, dp_mma)
        (tk2, gk2), (tv2, gv2) = tma_b(mk, s_mma), tma_b(mv, dp_mma)
        self.kernel(False, s_mma, dp_mma, dq_mma, dq_mma, tq2, gq2, tdo2, gdo2, tk2, gk2, tv2,
                    gv2, (mdq,), a_sl, b_sl, bt_sl, p_tl, aux, sq, sk, hq, hkv).launch(
            grid=(cute.ceil_div(sq, BLOCK_M), hq, b), block=[THREADS, 1, 1], cluster=(1, 1, 1),
            stream=stream, min_blocks_per_mp=1)

    # ------------------------------------------------------------------ device side
    @cute.kernel
    def kernel(self, transposed: cutlass.Constexpr, mma_s: cute.TiledMma,
               mma_dp: cute.TiledMma, mma_1: cute.TiledMma, mma_2: cute.TiledMma,
               tma_x: cute.CopyAtom, gx: cute.Tensor, tma_y: cute.CopyAtom, gy: cute.Tensor,
               tma_s: cute.CopyAtom, gs: cute.Tensor, tma_t: cute.CopyAtom, gt: cute.Tensor,
               outs, a_sl: cute.ComposedLayout, b_sl: cute.ComposedLayout,
               bt_sl: cute.ComposedLayout, p_tl: cute.ComposedLayout, aux, sq: Int32,
               sk: Int32, hq: Int32, hkv: Int32) -> None:
        """transposed (dK/dV kernel): x, y = K, V fixed, s, t = Q, dO streamed; mma_1, mma_2 =
        dV, dK; outs = (dV, dK) as (S, D, H, B) fp32. Else (dQ kernel): x, y = Q, dO, s, t =
        K, V; mma_1 = mma_2 = dQ; outs = (dQ,)."""
        l2, delta, slopes, doc_q, doc_kv, scale, c, softcap, window = aux
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tidx, _, _ = cute.arch.thread_idx()
        blk, head, batch = cute.arch.block_idx()
        hkv_head = head // (hq // hkv)  # GQA
        if cutlass.const_expr(transposed):
            lo, n = q_tiles(self.mask, blk, sq, sk, window)
            hx, hs_ = hkv_head, head  # heads of the fixed and the streamed tensors
        else:
            lo, n = kv_tiles(self.mask, blk, sq, sk, window)
            hx, hs_ = head, hkv_head
        if warp == LOAD_WARP:
            for t in (tma_x, tma_y, tma_s, tma_t):
                cpasync.prefetch_descriptor(t)

        st = memory.SmemAllocator().allocate(self.storage)
        one, cthreads = 1, bwd_compute.COMPUTE_THREADS
        fixed_prod, fixed_cons = pipeline.PipelineTmaUmma.create(
            num_stages=1, producer_group=_group(one), consumer_group=_group(one),
            tx_count=self.fixed_bytes, barrier_storage=st.fixed_bar.data_ptr(),
            defer_sync=True).make_participants()
        stream_prod, stream_cons = pipeline.PipelineTmaUmma.create(
            num_stages=STAGES, producer_group=_group(one), consumer_group=_group(one),
            tx_count=self.stream_bytes, barrier_storage=st.stream_bar.data_ptr(),
            defer_sync=True).make_participants()
        # MMA -> compute: S and dP of a tile in TMEM; released once P_r / dS_r are written.
        s_prod, s_cons = pipeline.PipelineUmmaAsync.create(
            num_stages=1, producer_group=_group(one), consumer_group=_group(cthreads),
            barrier_storage=st.s_bar.data_ptr(), defer_sync=True).make_participants()
        # compute -> MMA: P_r (dK/dV kernel) and dS_r in TMEM.
        g_prod, g_cons = pipeline.PipelineAsyncUmma.create(
            num_stages=1, producer_group=_group(cthreads), consumer_group=_group(one),
            barrier_storage=st.g_bar.data_ptr(), defer_sync=True).make_participants()
        # MMA -> compute: the accumulators are final.
        acc_prod, acc_cons = pipeline.PipelineUmmaAsync.create(
            num_stages=1, producer_group=_group(one), consumer_group=_group(cthreads),
            barrier_storage=st.acc_bar.data_ptr(), defer_sync=True).make_participants()
        tmem = memory.TmemAllocator(
            st.tmem_addr.ptr,
            barrier_for_retrieve=pipeline.NamedBarrier(barrier_id=1, num_threads=cthreads + 32),
            allocator_warp_id=COMPUTE_WARPS[0], arch="sm_100")
        pipeline.pipeline_init_arrive(is_relaxed=True)

        s_x = st.sx.get_tensor(a_sl.outer, swizzle=a_sl.inner)
        s_y = st.sy.get_tensor(a_sl.outer, swizzle=a_sl.inner)
        s_s = st.ss_.get_tensor(b_sl.outer, swizzle=b_sl.inner)
        s_t = st.st_.get_tensor(b_sl.outer, swizzle=b_sl.inner)
        s_l2 = st.cols_l2.get_tensor(cute.make_layout((BLOCK_M, 2)))
        s_dl = st.cols_dl.get_tensor(cute.make_layout((BLOCK_M, 2)))
        s_doc = st.cols_doc.get_tensor(cute.make_layout((BLOCK_M, 2)))
        thr_s, thr_1 = mma_s.get_slice(0), mma_1.get_slice(0)
        # Built before the role branches (the MMA warp mutates the tiled MMAs).
        s_layout = thr_s.make_fragment_C(thr_s.partition_shape_C(self.ss_tiler[:2])).layout
        acc_layout = thr_1.make_fragment_C(thr_1.partition_shape_C(self.ts_tiler[:2])).layout
        c_s = thr_s.partition_C(cute.make_identity_tensor(self.ss_tiler[:2]))
        c_acc = thr_1.partition_C(cute.make_identity_tensor(self.ts_tiler[:2]))
        pipeline.pipeline_init_wait()

        if warp == LOAD_WARP:
            self.load_role(mma_s, tma_x, gx, tma_y, gy, tma_s, gs, tma_t, gt, s_x, s_y, s_s,
                           s_t, fixed_prod, stream_prod, blk, hx, hs_, batch, lo, n)
        if warp == MMA_WARP:
            tmem.wait_for_alloc()
            tmem_ptr = tmem.retrieve_ptr(Float32)
            self.mma_role(transposed, mma_s, mma_dp, mma_1, mma_2, s_x, s_y, s_s, s_t, bt_sl,
                          p_tl, tmem_ptr, s_layout, acc_layout, fixed_cons, stream_cons,
                          s_prod, g_cons, acc_prod, n)
        if warp < MMA_WARP:
            tmem.allocate(TMEM_COLS)
            tmem.wait_for_alloc()
            tmem_ptr = tmem.retrieve_ptr(Float32)
            d = self.head_dim
            # (TMEM column, times scale) of each accumulator, and its (S, D) output rows:
            # dV as is and dK * scale (outs = (dV, dK)), or dQ * scale (outs = (dQ,)).
            outs_h = tuple(o[None, None, head, batch] for o in outs)
            accs = ((TMEM_ACC, True),)
            if cutlass.const_expr(transposed):
                accs = ((TMEM_ACC, False), (TMEM_ACC + d, True))
            bwd_compute.compute_role(
                self, transposed, tmem_ptr, s_layout, c_s, acc_layout, c_acc, TMEM_S, accs,
                outs_h, s_cons, g_prod, acc_cons, s_doc, s_l2, s_dl, l2, delta, slopes, doc_q,
                doc_kv, scale, c, softcap, window, blk, head, batch, sq, sk, lo, n, tidx)
            tmem.relinquish_alloc_permit()
            tcgen05_fence_before()
            pipeline.NamedBarrier(barrier_id=bwd_compute.FREE_BARRIER,
                                  num_threads=cthreads).arrive_and_wait()
            tcgen05_fence_after()
            tmem.free(tmem_ptr)

    @cute.jit
    def load_role(self, mma_s, tma_x, gx, tma_y, gy, tma_s, gs, tma_t, gt, s_x, s_y, s_s, s_t,
                  fixed_prod, stream_prod, blk, hx, hs_, batch, lo, n) -> None:
        """TMA producer: the fixed pair (tile blk) once, then the streamed pair of tiles
        lo, lo + 1, ..., in the order the MMA warp consumes them."""
        thr = mma_s.get_slice(0)
        sel_a, sel_b = cute.select(self.ss_tiler, mode=[0, 2]), cute.select(self.ss_tiler,
                                                                            mode=[1, 2])

        def views(tma, g, smem, a_operand: bool, h):
            part = thr.partition_A if a_operand else thr.partition_B
            t_s, t_g = cpasync.tma_partition(
                tma, 0, cute.make_layout(1), cute.group_modes(smem, 0, 3),
                cute.group_modes(part(cute.flat_divide(g, sel_a if a_operand else sel_b)), 0,
                                 3))
            return t_s, t_g[None, None, 0, (h, batch)]

        t_sx, t_gx = views(tma_x, gx, s_x, True, hx)
        t_sy, t_gy = views(tma_y, gy, s_y, True, hx)
        t_ss, t_gs = views(tma_s, gs, s_s, False, hs_)
        t_st, t_gt = views(tma_t, gt, s_t, False, hs_)
        if n > 0:
            h = fixed_prod.acquire_and_advance()
            cute.copy(tma_x, t_gx[None, blk], t_sx[None, h.index], tma_bar_ptr=h.barrier)
            cute.copy(tma_y, t_gy[None, blk], t_sy[None, h.index], tma_bar_ptr=h.barrier)
            for i in cutlass.range(n, unroll=1):
                h = stream_prod.acquire_and_advance()
                cute.copy(tma_s, t_gs[None, lo + i], t_ss[None, h.index], tma_bar_ptr=h.barrier)
                cute.copy(tma_t, t_gt[None, lo + i], t_st[None, h.index], tma_bar_ptr=h.barrier)

    @cute.jit
    def mma_role(self, transposed: cutlass.Constexpr, mma_s, mma_dp, mma_1, mma_2, s_x, s_y,
                 s_s, s_t, bt_sl, p_tl, tmem_ptr, s_layout, acc_layout, fixed_cons,
                 stream_cons, s_prod, g_cons, acc_prod, n) -> None:
        """tcgen05 issue, one thread. Per tile i: S (S^T) and dP (dP^T) into TMEM; after the
        compute warps' P_r / dS_r: dV += P_r^T dO and dK += dS_r^T Q, or dQ += dS_r K. The
        next tile's S overwrites P_r / dS_r only after these MMAs: tcgen05.mma operations
        issued by one thread execute in issue order."""
        thr_s, thr_dp = mma_s.get_slice(0), mma_dp.get_slice(0)
        thr_1, thr_2 = mma_1.get_slice(0), mma_2.get_slice(0)
        r_x, r_y = thr_s.make_fragment_A(s_x), thr_dp.make_fragment_A(s_y)
        r_s, r_t = thr_s.make_fragment_B(s_s), thr_dp.make_fragment_B(s_t)
        # MN-major views of the streamed tiles (same bytes): dO^T and Q^T, or K^T.
        s_t_mn = cute.make_tensor(cute.recast_ptr(s_t.iterator, bt_sl.inner, dtype=self.dtype),
                                  bt_sl.outer)
        s_s_mn = cute.make_tensor(cute.recast_ptr(s_s.iterator, bt_sl.inner, dtype=self.dtype),
                                  bt_sl.outer)
        if cutlass.const_expr(transposed):
            r_b1, r_b2 = thr_1.make_fragment_B(s_t_mn), thr_2.make_fragment_B(s_s_mn)
        else:
            r_b1, r_b2 = thr_1.make_fragment_B(s_s_mn), thr_1.make_fragment_B(s_s_mn)
        t_sacc = cute.make_tensor(tmem_ptr + TMEM_S, s_layout)
        t_dpacc = cute.make_tensor(tmem_ptr + TMEM_DP, s_layout)
        t_a1 = self.tmem_operand(thr_1, p_tl, tmem_ptr, TMEM_S)  # P_r^T (dK/dV kernel)
        t_a2 = self.tmem_operand(thr_2, p_tl, tmem_ptr, TMEM_DP)  # dS_r^T or dS_r
        t_acc1 = cute.make_tensor(tmem_ptr + TMEM_ACC, acc_layout)
        t_acc2 = cute.make_tensor(tmem_ptr + TMEM_ACC + self.head_dim, acc_layout)
        if n > 0:
            hf = fixed_cons.wait_and_advance()
            for i in cutlass.range(n, unroll=1):
                hst = stream_cons.wait_and_advance()
                hs = s_prod.acquire_and_advance()
                tcgen05_fence_after()
                gemm(mma_s, t_sacc, r_x[None, None, None, 0], r_s[None, None, None, hst.index],
                     False)
                gemm(mma_dp, t_dpacc, r_y[None, None, None, 0],
                     r_t[None, None, None, hst.index], False)
                hs.commit()
                hg = g_cons.wait_and_advance()  # P_r / dS_r written by the compute warps
                tcgen05_fence_after()
                if cutlass.const_expr(transposed):
                    gemm(mma_1, t_acc1, t_a1, r_b1[None, None, None, hst.index], i > 0)  # dV
                    gemm(mma_2, t_acc2, t_a2, r_b2[None, None, None, hst.index], i > 0)  # dK
                else:
                    gemm(mma_2, t_acc1, t_a2, r_b2[None, None, None, hst.index], i > 0)  # dQ
                hg.release()
                hst.release()
            ha = acc_prod.acquire_and_advance()
            ha.commit()  # all MMAs complete: the accumulators are final
            hf.release()

    def tmem_operand(self, thr, p_tl, tmem_ptr, column: int) -> cute.Tensor:
        """16-bit A operand (P_r^T, dS_r^T or dS_r) over the first 64 columns at ``column``."""
        frag = thr.make_fragment_A(cute.make_tensor(tmem_ptr, p_tl.outer))[None, None, None, 0]
        ptr = cute.recast_ptr(tmem_ptr + column, dtype=frag.element_type)
        return cute.make_tensor(ptr, frag.layout)


@cute.jit
def gemm(mma: cute.TiledMma, acc: cute.Tensor, a: cute.Tensor, b: cute.Tensor,
         accumulate) -> None:
    """acc (+)= a b over the k-blocks; the first k-block overwrites unless accumulate."""
    for kp in cutlass.range_constexpr(cute.size(a, mode=[2])):
        mma.set(tcgen05.Field.ACCUMULATE, accumulate or kp != 0)
        cute.gemm(mma, acc, a[None, None, kp], b[None, None, kp], acc)
