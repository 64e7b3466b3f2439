"""FA4-style attention forward for Hopper (sm_90a) in CuTe DSL: TMA + wgmma, warp-specialised.

CTA = one Q tile of BLOCK_M = 128 rows of one (batch, query head); 3 warpgroups:
  * warpgroup 0, warp 0: producer. TMA-loads the two 64-row halves of Q once, then K and V
    tiles (BLOCK_N = 128 rows each) from the last live kv tile to the first into two mbarrier
    pipelines (one for K, one for V; stages per shape in FWD_SHAPES). It gives registers away
    (setmaxnreg 40 at D = 64, 32 otherwise).
  * warpgroups 1 and 2: consumers, 64 query rows each (setmaxnreg 232 / 240). Per kv tile j they
    issue S_j = Q K_j^T (wgmma, smem operands) and O += P_{j-1} V_{j-1} (wgmma, P from
    registers) back to back, wait for S_j only, run the softmax of tile j while the P·V wgmma
    is still in flight (intra-warpgroup overlap, as FA3), then wait for it and rescale O.
    At D = Dv = 192 (registers) the loop is serial: S_j, softmax, O *= alpha, O += P_j V_j.
q and k have head dim D, v and out Dv (FWD_SHAPES lists the (D, Dv) pairs).
The order of operations on O, m and l is exactly spec fwd 1-7; only the issue order differs.
Output and lse are written straight from registers with row predicates (no TMA store).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import cutlass
import cutlass.cute as cute
import cutlass.memory
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.nvgpu import warpgroup
from cutlass.tensor_utils import LayoutEnum

from impls.attention.fa4 import spec
from impls.attention.fa4.sm90.common import (
    NEG_INF,
    Variant,
    acc_to_a_operand,
    add_rn,
    apply_mods,
    ex2,
    fma_rn,
    kv_block_range,
    mul_rn,
    quad_max,
    quad_sum,
    rowcol,
    wg_gemm,
)

WG_ROWS = 64  # query rows per consumer warpgroup (one m64 wgmma)


@dataclass(frozen=True)
class FwdShape:
    """Per-(D, Dv) budget: setmaxnreg (producer, consumer), K and V pipeline stages."""

    regs: tuple[int, int]  # 1 x producer + 2 x consumer <= 512 (64K registers, 384 threads)
    k_stages: int = 2
    v_stages: int = 2
    overlap: bool = True  # S_n = Q K_n^T and O += P_{n+1} V_{n+1} in flight together
    late_out: bool = False  # output partitions made after the loop (no address held across it)


# ptxas allocates each role within its budget: 24 for the producer spilled a few bytes at
# D = 64 (document + alibi); from D = 96 on the consumers get the largest budget, 240.
# Shared memory (Q 128 x D, K stages x 128 x D, V stages x 128 x Dv, 16-bit) must stay
# within 227 KB: at D = Dv = 192 two K and two V stages need 240 KB, so K gets one stage
# (a K tile is released right after its S = Q K^T, before the softmax) and V two: 192 KB.
FWD_SHAPES = {
    (64, 64): FwdShape((40, 232)),
    (128, 128): FwdShape((32, 240)),
    (96, 96): FwdShape((32, 240)),
    (192, 192): FwdShape((32, 240), k_stages=1, overlap=False, late_out=True),
    (192, 128): FwdShape((32, 240), late_out=True),
}


class FwdSm90:
    """Forward kernel for one compile-time :class:`Variant`.

    Call (under ``cute.compile``) with torch-layout tensors: q (B, Hq, Sq, D), k (B, Hkv, Sk, D),
    v (B, Hkv, Sk, Dv), o (B, Hq, Sq, Dv), lse (B, Hq, Sq) fp32; scalars scale, c (spec fwd 2),
    window, softcap; optional alibi slopes (Hq,) fp32, doc_q (Sq,) / doc_kv (Sk,) int32.
    """

    def __init__(self, variant: Variant):
        self.variant = variant
        self.dtype = variant.cutlass_dtype
        self.d, self.dv = variant.shape
        self.cfg = FWD_SHAPES[variant.shape]
        self.block_m = spec.BLOCK_M
        self.block_n = spec.BLOCK_N
        assert self.block_m == 2 * WG_ROWS
        self.threads = 3 * 128
        self.smem_bytes = 0  # filled at trace time

    @cute.jit
    def __call__(self, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, o: cute.Tensor,
                 lse: cute.Tensor, scale: cutlass.Float32, c: cutlass.Float32,
                 window: cutlass.Int32, softcap: cutlass.Float32, alibi: cute.Tensor,
                 doc_q: cute.Tensor, doc_kv: cute.Tensor, stream):
        d, dv, bn, dt = self.d, self.dv, self.block_n, self.dtype
        ks, vs = self.cfg.k_stages, self.cfg.v_stages
        # Views with the MMA's (rows, K, head, batch) mode order.
        mQ = cute.make_tensor(q.iterator, cute.select(q.layout, mode=[2, 3, 1, 0]))
        mK = cute.make_tensor(k.iterator, cute.select(k.layout, mode=[2, 3, 1, 0]))
        mV = cute.make_tensor(v.iterator, cute.select(v.layout, mode=[3, 2, 1, 0]))  # (D, Sk)
        mO = cute.make_tensor(o.iterator, cute.select(o.layout, mode=[2, 3, 1, 0]))
        mLse = cute.make_tensor(lse.iterator, cute.select(lse.layout, mode=[2, 1, 0]))

        k_major, mn_major = cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.MN
        qk_mma = sm90_utils.make_trivial_tiled_mma(
            dt, dt, k_major, k_major, cutlass.Float32, (1, 1, 1), (WG_ROWS, bn))
        pv_mma = sm90_utils.make_trivial_tiled_mma(
            dt, dt, k_major, mn_major, cutlass.Float32, (1, 1, 1), (WG_ROWS, dv),
            warpgroup.OperandSource.RMEM)

        row, col = LayoutEnum.ROW_MAJOR, LayoutEnum.COL_MAJOR
        sQ_layout = sm90_utils.make_smem_layout_a(row, (WG_ROWS, bn, d), dt, 2)
        sK_layout = sm90_utils.make_smem_layout_b(row, (WG_ROWS, bn, d), dt, ks)
        sV_layout = sm90_utils.make_smem_layout_b(col, (WG_ROWS, dv, bn), dt, vs)

        g2s = cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp()
        tma_q, tQ = cute.nvgpu.cpasync.make_tiled_tma_atom(
            g2s, mQ, cute.slice_(sQ_layout, (None, None, 0)), (WG_ROWS, d))
        tma_k, tK = cute.nvgpu.cpasync.make_tiled_tma_atom(
            g2s, mK, cute.slice_(sK_layout, (None, None, 0)), (bn, d))
        tma_v, tV = cute.nvgpu.cpasync.make_tiled_tma_atom(
            g2s, mV, cute.slice_(sV_layout, (None, None, 0)), (dv, bn))

        @cute.struct
        class Storage:
            q_bar: cute.struct.MemRange[cutlass.Int64, 2]
            k_bar: cute.struct.MemRange[cutlass.Int64, 2 * ks]
            v_bar: cute.struct.MemRange[cutlass.Int64, 2 * vs]
            sQ: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(sQ_layout)], 1024]
            sK: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(sK_layout)], 1024]
            sV: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(sV_layout)], 1024]

        self.storage = Storage
        self.smem_bytes = Storage.size_in_bytes()
        grid = (cute.ceil_div(mQ.shape[0], self.block_m), mQ.shape[2], mQ.shape[3])
        self.kernel(qk_mma, pv_mma, tma_q, tQ, tma_k, tK, tma_v, tV, mO, mLse,
                    sQ_layout, sK_layout, sV_layout, scale, c, window, softcap,
                    alibi, doc_q, doc_kv).launch(
            grid=grid, block=[self.threads, 1, 1], smem=self.smem_bytes, stream=stream)

    @cute.kernel
    def kernel(self, qk_mma: cute.TiledMma, pv_mma: cute.TiledMma,
               tma_q: cute.CopyAtom, mQ: cute.Tensor, tma_k: cute.CopyAtom, mK: cute.Tensor,
               tma_v: cute.CopyAtom, mV: cute.Tensor, mO: cute.Tensor, mLse: cute.Tensor,
               sQ_layout: cute.ComposedLayout, sK_layout: cute.ComposedLayout,
               sV_layout: cute.ComposedLayout, scale: cutlass.Float32, c: cutlass.Float32,
               window: cutlass.Int32, softcap: cutlass.Float32, alibi: cute.Tensor,
               doc_q: cute.Tensor, doc_kv: cute.Tensor):
        var, d, dv, bn = self.variant, self.d, self.dv, self.block_n
        ks, vs = self.cfg.k_stages, self.cfg.v_stages
        tidx, _, _ = cute.arch.thread_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        wg = warp // 4
        m_block, head, batch = cute.arch.block_idx()
        seqlen_q, seqlen_k = mQ.shape[0], mK.shape[0]
        head_kv = head // (mQ.shape[2] // mK.shape[2])  # GQA: query heads share a kv head

        smem = cutlass.memory.SmemAllocator()
        st = smem.allocate(self.storage)
        sQ = st.sQ.get_tensor(sQ_layout.outer, swizzle=sQ_layout.inner)
        sK = st.sK.get_tensor(sK_layout.outer, swizzle=sK_layout.inner)
        sV = st.sV.get_tensor(sV_layout.outer, swizzle=sV_layout.inner)

        one = pipeline.CooperativeGroup(pipeline.Agent.Thread, 1)
        consumers = pipeline.CooperativeGroup(pipeline.Agent.Thread, 8)  # one arrive per warp
        tile_bytes_q = cute.size_in_bytes(self.dtype, cute.slice_(sQ_layout, (None, None, 0)))
        tile_bytes_k = cute.size_in_bytes(self.dtype, cute.slice_(sK_layout, (None, None, 0)))
        tile_bytes_v = cute.size_in_bytes(self.dtype, cute.slice_(sV_layout, (None, None, 0)))
        q_pipe = pipeline.PipelineTmaAsync.create(
            barrier_storage=st.q_bar.data_ptr(), num_stages=1, producer_group=one,
            consumer_group=consumers, tx_count=2 * tile_bytes_q, defer_sync=True)
        k_pipe = pipeline.PipelineTmaAsync.create(
            barrier_storage=st.k_bar.data_ptr(), num_stages=ks, producer_group=one,
            consumer_group=consumers, tx_count=tile_bytes_k, defer_sync=True)
        v_pipe = pipeline.PipelineTmaAsync.create(
            barrier_storage=st.v_bar.data_ptr(), num_stages=vs, producer_group=one,
            consumer_group=consumers, tx_count=tile_bytes_v, defer_sync=True)
        cute.arch.mbarrier_init_fence()
        cute.arch.sync_threads()

        # kv tiles with a live entry for this Q tile, visited from hi - 1 down to lo.
        q_first = m_block * self.block_m
        q_last = cutlass.min(q_first + self.block_m, seqlen_q) - 1
        lo, hi = kv_block_range(var, q_first, q_last, seqlen_q, seqlen_k, window, bn)
        n_tiles = cutlass.max(hi - lo, 0)

        if wg == 0:
            # ---------------------------------------------------------------- producer
            cute.arch.setmaxregister_decrease(self.cfg.regs[0])
            if warp == 0:
                cute.nvgpu.cpasync.prefetch_descriptor(tma_q)
                cute.nvgpu.cpasync.prefetch_descriptor(tma_k)
                cute.nvgpu.cpasync.prefetch_descriptor(tma_v)
                gQ = cute.local_tile(mQ[None, None, head, batch], (WG_ROWS, d), (None, 0))
                gK = cute.local_tile(mK[None, None, head_kv, batch], (bn, d), (None, 0))
                gV = cute.local_tile(mV[None, None, head_kv, batch], (dv, bn), (0, None))
                tQs, tQg = cute.nvgpu.cpasync.tma_partition(
                    tma_q, 0, cute.make_layout(1), cute.group_modes(sQ, 0, 2),
                    cute.group_modes(gQ, 0, 2))
                tKs, tKg = cute.nvgpu.cpasync.tma_partition(
                    tma_k, 0, cute.make_layout(1), cute.group_modes(sK, 0, 2),
                    cute.group_modes(gK, 0, 2))
                tVs, tVg = cute.nvgpu.cpasync.tma_partition(
                    tma_v, 0, cute.make_layout(1), cute.group_modes(sV, 0, 2),
                    cute.group_modes(gV, 0, 2))
                q_st = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 1)
                k_st = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, ks)
                v_st = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, vs)
                if n_tiles > 0:
                    q_pipe.producer_acquire(q_st)
                    for half in cutlass.range_constexpr(2):
                        cute.copy(tma_q, tQg[None, 2 * m_block + half], tQs[None, half],
                                  tma_bar_ptr=q_pipe.producer_get_barrier(q_st))
                for i in cutlass.range(n_tiles, unroll=1):
                    n = hi - 1 - i
                    k_pipe.producer_acquire(k_st)
                    cute.copy(tma_k, tKg[None, n], tKs[None, k_st.index],
                              tma_bar_ptr=k_pipe.producer_get_barrier(k_st))
                    k_st.advance()
                    v_pipe.producer_acquire(v_st)
                    cute.copy(tma_v, tVg[None, n], tVs[None, v_st.index],
                              tma_bar_ptr=v_pipe.producer_get_barrier(v_st))
                    v_st.advance()
        else:
            # --------------------------------------------------------------- consumers
            cute.arch.setmaxregister_increase(self.cfg.regs[1])
            half = wg - 1
            t = tidx % 128
            thr_qk = qk_mma.get_slice(t)
            thr_pv = pv_mma.get_slice(t)
            tSrQ = thr_qk.make_fragment_A(thr_qk.partition_A(sQ))
            tSrK = thr_qk.make_fragment_B(thr_qk.partition_B(sK))
            tOrV = thr_pv.make_fragment_B(thr_pv.partition_B(sV))
            acc_s = thr_qk.make_fragment_C(thr_qk.partition_shape_C((WG_ROWS, bn)))
            acc_o = thr_pv.make_fragment_C(thr_pv.partition_shape_C((WG_ROWS, dv)))
            tOrP = thr_pv.make_fragment_A(thr_pv.partition_shape_A((WG_ROWS, bn)))
            s_rc, o_rc = rowcol(acc_s), rowcol(acc_o)
            c_rc = rowcol(thr_qk.partition_C(cute.make_identity_tensor((WG_ROWS, bn))))
            n_rows = cute.size(s_rc, mode=[0])
            row_m = cute.make_rmem_tensor((n_rows,), cutlass.Float32)  # running max m
            row_l = cute.make_rmem_tensor((n_rows,), cutlass.Float32)  # this lane's part of l
            row_a = cute.make_rmem_tensor((n_rows,), cutlass.Float32)  # alpha of the tile
            row_m.fill(NEG_INF)
            row_l.fill(0.0)
            acc_o.fill(0.0)
            q0 = q_first + half * WG_ROWS
            if cutlass.const_expr(not self.cfg.late_out):
                # Epilogue partitions made before the loop (tiled_mma.set() restages the MMA).
                tOgO, tOcO = self.out_partitions(thr_pv, mO, q0, head, batch)
            mods = (var, q0, seqlen_q, seqlen_k, head, scale, window, softcap, alibi,
                    doc_q, doc_kv)

            q_st = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, 1)
            k_st = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, ks)
            v_st = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, vs)
            if n_tiles > 0:
                q_pipe.consumer_wait(q_st)
                tSrQ_h = tSrQ[None, None, None, half]
                if cutlass.const_expr(self.cfg.overlap):
                    # First tile (n = hi - 1): S = Q K^T (spec fwd 1), softmax, P.
                    k_pipe.consumer_wait(k_st)
                    qk_mma = wg_gemm(qk_mma, acc_s, tSrQ_h, tSrK[None, None, None, k_st.index],
                                     True)
                    cute.nvgpu.warpgroup.commit_group()
                    cute.nvgpu.warpgroup.wait_group(0)
                    k_pipe.consumer_release(k_st)
                    k_st.advance()
                    self.softmax(acc_s, s_rc, c_rc, (hi - 1) * bn, c, row_m, row_l, row_a, mods)
                    tOrP.store(acc_to_a_operand(acc_s, tOrP, self.dtype))
                    for i in cutlass.range(1, n_tiles, unroll=1):
                        n = hi - 1 - i
                        k_pipe.consumer_wait(k_st)
                        k_tile = tSrK[None, None, None, k_st.index]
                        qk_mma = wg_gemm(qk_mma, acc_s, tSrQ_h, k_tile, True)
                        cute.nvgpu.warpgroup.commit_group()
                        v_pipe.consumer_wait(v_st)
                        pv_mma = wg_gemm(pv_mma, acc_o, tOrP, tOrV[None, None, None, v_st.index],
                                         False)
                        cute.nvgpu.warpgroup.commit_group()
                        cute.nvgpu.warpgroup.wait_group(1)  # S_n ready; P·V of tile n+1 in flight
                        k_pipe.consumer_release(k_st)
                        k_st.advance()
                        self.softmax(acc_s, s_rc, c_rc, n * bn, c, row_m, row_l, row_a, mods)
                        cute.nvgpu.warpgroup.wait_group(0)
                        v_pipe.consumer_release(v_st)
                        v_st.advance()
                        # spec fwd 4: O *= alpha (alpha = 1 exactly when m was not updated)
                        for r in cutlass.range_constexpr(n_rows):
                            for j in cutlass.range_constexpr(cute.size(o_rc, mode=[1])):
                                o_rc[r, j] = o_rc[r, j] * row_a[r]
                        tOrP.store(acc_to_a_operand(acc_s, tOrP, self.dtype))
                    # spec fwd 6 for the last tile: O += P_r V
                    v_pipe.consumer_wait(v_st)
                    pv_mma = wg_gemm(pv_mma, acc_o, tOrP, tOrV[None, None, None, v_st.index],
                                     False)
                    cute.nvgpu.warpgroup.commit_group()
                    cute.nvgpu.warpgroup.wait_group(0)
                    v_pipe.consumer_release(v_st)
                else:  # no intra-warpgroup overlap: S_n, softmax, O *= alpha, O += P_n V_n
                    for i in cutlass.range(n_tiles, unroll=1):
                        n = hi - 1 - i
                        k_pipe.consumer_wait(k_st)
                        qk_mma = wg_gemm(qk_mma, acc_s, tSrQ_h, tSrK[None, None, None, k_st.index],
                                         True)
                        cute.nvgpu.warpgroup.commit_group()
                        cute.nvgpu.warpgroup.wait_group(0)
                        k_pipe.consumer_release(k_st)
                        k_st.advance()
                        self.softmax(acc_s, s_rc, c_rc, n * bn, c, row_m, row_l, row_a, mods)
                        # spec fwd 4 (alpha = 1 on the first tile, where O = 0)
                        for r in cutlass.range_constexpr(n_rows):
                            for j in cutlass.range_constexpr(cute.size(o_rc, mode=[1])):
                                o_rc[r, j] = o_rc[r, j] * row_a[r]
                        tOrP.store(acc_to_a_operand(acc_s, tOrP, self.dtype))
                        v_pipe.consumer_wait(v_st)
                        pv_mma = wg_gemm(pv_mma, acc_o, tOrP, tOrV[None, None, None, v_st.index],
                                         False)  # spec fwd 6
                        cute.nvgpu.warpgroup.commit_group()
                        cute.nvgpu.warpgroup.wait_group(0)
                        v_pipe.consumer_release(v_st)
                        v_st.advance()
            if cutlass.const_expr(self.cfg.late_out):
                # After the loop, from a fresh MMA: no output address is live across the loop
                # (at D = 192 it was spilled).
                thr_o = sm90_utils.make_trivial_tiled_mma(
                    self.dtype, self.dtype, cute.nvgpu.OperandMajorMode.K,
                    cute.nvgpu.OperandMajorMode.MN, cutlass.Float32, (1, 1, 1), (WG_ROWS, dv),
                    warpgroup.OperandSource.RMEM).get_slice(t)
                tOgO, tOcO = self.out_partitions(thr_o, mO, q0, head, batch)
            self.epilogue(acc_o, o_rc, tOgO, tOcO, row_m, row_l, c, mLse, q0, seqlen_q, head,
                          batch)

    @cute.jit
    def out_partitions(self, thr: cute.ThrMma, mO: cute.Tensor, q0: cutlass.Int32,
                       head: cutlass.Int32, batch: cutlass.Int32):
        """This thread's (rows, cols) views of the output tile and of its coordinates."""
        gO = cute.local_tile(mO[None, None, head, batch], (WG_ROWS, self.dv), (q0 // WG_ROWS, 0))
        return (rowcol(thr.partition_C(gO)),
                rowcol(thr.partition_C(cute.make_identity_tensor((WG_ROWS, self.dv)))))

    @cute.jit
    def softmax(self, acc_s: cute.Tensor, s_rc: cute.Tensor, c_rc: cute.Tensor,
                kv0: cutlass.Int32, c: cutlass.Float32, row_m: cute.Tensor, row_l: cute.Tensor,
                row_a: cute.Tensor, mods: cutlass.Constexpr):
        """Spec fwd 2-6 on one S tile: x, masking, conditional rescale, P = exp2(fma(x,c,-mc))."""
        var, q0, sq, sk, head, scale, window, softcap, alibi, doc_q, doc_kv = mods
        apply_mods(var, s_rc, c_rc, q0, kv0, sq, sk, head, scale, window, softcap, alibi,
                   doc_q, doc_kv)
        for r in cutlass.range_constexpr(cute.size(s_rc, mode=[0])):
            t = cutlass.Float32(NEG_INF)  # spec fwd 4: tile row max
            for j in cutlass.range_constexpr(cute.size(s_rc, mode=[1])):
                t = cute.arch.fmax(t, s_rc[r, j])
            t = quad_max(t)
            m_old = row_m[r]
            m_new = cute.arch.fmax(m_old, t)
            alpha = cutlass.Float32(1.0)
            if m_old == NEG_INF:
                row_m[r] = m_new
            elif (m_new - m_old) * c > spec.RESCALE_THRESHOLD:
                alpha = ex2((m_old - m_new) * c)
                row_m[r] = m_new
            row_a[r] = alpha
            mc = cutlass.Float32(0.0)  # spec fwd 5
            if row_m[r] != NEG_INF:
                mc = mul_rn(row_m[r], c)
            s = cutlass.Float32(0.0)
            for j in cutlass.range_constexpr(cute.size(s_rc, mode=[1])):
                p = ex2(fma_rn(s_rc[r, j], c, -mc))
                s_rc[r, j] = p
                s = s + p
            # spec fwd 4 then 6: l *= alpha, l += sum (two roundings; per-lane partial sums)
            row_l[r] = add_rn(mul_rn(row_l[r], alpha), s)

    @cute.jit
    def epilogue(self, acc_o: cute.Tensor, o_rc: cute.Tensor, tOgO: cute.Tensor,
                 tOcO: cute.Tensor, row_m: cute.Tensor, row_l: cute.Tensor, c: cutlass.Float32,
                 mLse: cute.Tensor, q0: cutlass.Int32, seqlen_q: cutlass.Int32,
                 head: cutlass.Int32, batch: cutlass.Int32):
        """Spec fwd 7: out = dtype(O * (1 / l)), lse = (mc + log2 l) ln 2; l == 0: 0 and -inf."""
        n_rows = cute.size(o_rc, mode=[0])
        lse_r = cute.make_rmem_tensor((n_rows,), cutlass.Float32)
        for r in cutlass.range_constexpr(n_rows):
            l_full = quad_sum(row_l[r])
            inv = cutlass.Float32(0.0)
            lse_r[r] = cutlass.Float32(NEG_INF)
            if l_full != 0.0:
                inv = cutlass.Float32(1.0) / l_full
                mc = cutlass.Float32(0.0)
                if row_m[r] != NEG_INF:
                    mc = mul_rn(row_m[r], c)
                # accurate fp32 log2 (not lg2.approx), as the numerics model
                lg = cute.math.log2(l_full, fastmath=False)
                lse_r[r] = mul_rn(add_rn(mc, lg), cutlass.Float32(math.log(2.0)))
            for j in cutlass.range_constexpr(cute.size(o_rc, mode=[1])):
                o_rc[r, j] = o_rc[r, j] * inv
        out = cute.make_rmem_tensor_like(acc_o, self.dtype)
        out.store(acc_o.load().to(self.dtype))
        out_rc = rowcol(out)
        for r in cutlass.range_constexpr(n_rows):
            q = q0 + tOcO[r, 0][0]
            if q < seqlen_q:
                for j in cutlass.range_constexpr(cute.size(out_rc, mode=[1])):
                    tOgO[r, j] = out_rc[r, j]
                if tOcO[r, 0][1] == 0:  # one lane of the quad writes the row's lse
                    mLse[q, head, batch] = lse_r[r]
