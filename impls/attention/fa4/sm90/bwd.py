"""FA4-style attention backward for Hopper (sm_90a) in CuTe DSL: TMA + wgmma, two kernels.

A simpler design than the forward: no warp specialisation; warp 0 also issues the TMA loads
one tile ahead (2-stage mbarrier pipeline); no overlap between MMAs and the elementwise work.
Tiles are 64 x 64 (one m64 wgmma per tile); one warpgroup per CTA, except the dK/dV kernel at
D = 128: two warpgroups that each own 64 of the D columns of dK and dV and both compute the
same S^T and dP^T tiles (redundant MMAs, traded for registers: 255 and spills with one), and
at D = 96 and 192: two warpgroups with roles, one computes dV, the other dK (BWD_SHAPES).
q, k, dq, dk have head dim D; v, do, dv have Dv.

  * dK/dV kernel, one CTA per (64-key tile, query head, batch), loop over the live q tiles
    (spec bwd: "dK/dV per kv tile with an inner loop over q tiles"). It works on transposed
    tiles so that P and dS come out of the accumulator already as the register A operand:
    S^T = K Q^T, dP^T = V dO^T, dV += P_r^T dO, dK += dS_r^T Q.
  * dQ kernel, one CTA per (64-query tile, query head, batch), loop over the live kv tiles in
    increasing kv order (spec bwd: "dQ accumulated in fp32 across kv tiles in kv-tile order"):
    S = Q K^T, dP = dO V^T, dQ += dS_r K. It recomputes S and dP instead of using atomics, so
    the accumulation order is fixed and the result deterministic.
The MN-major B operands (dO and Q for the dK/dV kernel, K for the dQ kernel) are transposed
views of the K-major swizzled shared-memory tiles: no second copy.

Inputs from the host (spec bwd 1, computed with torch in api.py): L2 = lse * log2(e) (+inf on
fully masked rows) and Delta = rowsum(fp32(dO) * fp32(O)). Outputs are fp32 and per query
head: dQ, and dK/dV before the GQA sum; api.py sums each GQA group in fp32 and rounds once.
"""

from __future__ import annotations

from dataclasses import dataclass

import cutlass
import cutlass.cute as cute
import cutlass.memory
import cutlass.pipeline as pipeline
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.nvgpu import warpgroup
from cutlass.tensor_utils import LayoutEnum

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
    q_block_range,
    rowcol,
    wg_gemm,
)

HAVE_BWD = True
TILE = 64  # q rows and kv rows per tile
STAGES = 2  # for the tiles streamed by the inner loop


@dataclass(frozen=True)
class BwdShape:
    """How the dK/dV kernel spreads its accumulators over warpgroups, per (D, Dv).

    ``cols``: each of ``wgs`` warpgroups owns D / wgs columns of dK and Dv / wgs of dV and all
    compute the same S^T and dP^T tiles. ``roles``: two warpgroups, one computes S^T and
    dV (Dv wide), the other S^T, dP^T and dK (D wide). A column slice must be a whole number
    of the smem swizzle atoms the transposed (MN-major) operand views are made of (64
    elements at D = 128 and 192, 32 at D = 96), so 96- or 48-wide slices are not possible.
    """

    wgs: int = 1
    roles: bool = False


# Registers (one warpgroup, 255 at most) hold per thread S^T and dP^T (32 each), P_r and
# dS_r (16 each) and D / 2 of dK plus Dv / 2 of dV per warpgroup.
BWD_SHAPES = {
    (64, 64): BwdShape(),
    (128, 128): BwdShape(wgs=2),  # one warpgroup: 255 registers and spills
    (96, 96): BwdShape(wgs=2, roles=True),  # one warpgroup: 255 registers and spills
    (192, 192): BwdShape(wgs=2, roles=True),
    (192, 128): BwdShape(wgs=2, roles=True),
}


def _transposed(t: cute.Tensor) -> cute.Tensor:
    """(rows, D, stage) smem tile as (D, rows, stage): the MN-major view of a K-major tile."""
    return cute.make_tensor(t.iterator, cute.select(t.layout, mode=[1, 0, 2]))


class BwdSm90:
    """Backward kernels for one compile-time :class:`Variant`.

    Call (under ``cute.compile``) with q, k (torch layout (B, H, S, D)), v, do (B, H, S, Dv),
    l2 and delta (B, Hq, Sq) fp32, dq (B, Hq, Sq, D), dk (B, Hq, Sk, D) and dv (B, Hq, Sk, Dv)
    fp32 (dk, dv per query head),
    scalars scale, c, window, softcap, and the optional alibi / doc_q / doc_kv tensors.
    """

    def __init__(self, variant: Variant):
        self.variant = variant
        self.dtype = variant.cutlass_dtype
        self.d, self.dv = variant.shape
        self.threads = 128
        cfg = BWD_SHAPES[variant.shape]
        self.dkdv_wgs, self.roles = cfg.wgs, cfg.roles
        # dK / dV columns per warpgroup (all of them with roles: one warpgroup each)
        self.dn_k = self.d if cfg.roles else self.d // cfg.wgs
        self.dn_v = self.dv if cfg.roles else self.dv // cfg.wgs
        self.smem_bytes = 0  # the larger of the two kernels' requests, filled at trace time

    @cute.jit
    def __call__(self, q: cute.Tensor, k: cute.Tensor, v: cute.Tensor, do: cute.Tensor,
                 l2: cute.Tensor, delta: cute.Tensor, dq: cute.Tensor, dk: cute.Tensor,
                 dv: cute.Tensor, scale: cutlass.Float32, c: cutlass.Float32,
                 window: cutlass.Int32, softcap: cutlass.Float32, alibi: cute.Tensor,
                 doc_q: cute.Tensor, doc_kv: cute.Tensor, stream):
        d, d_v, dt = self.d, self.dv, self.dtype

        def rows_d(t: cute.Tensor) -> cute.Tensor:  # (B, H, S, D) -> (S, D, H, B)
            return cute.make_tensor(t.iterator, cute.select(t.layout, mode=[2, 3, 1, 0]))

        def rows(t: cute.Tensor) -> cute.Tensor:  # (B, H, S) -> (S, H, B)
            return cute.make_tensor(t.iterator, cute.select(t.layout, mode=[2, 1, 0]))

        mQ, mK, mV, mdO = rows_d(q), rows_d(k), rows_d(v), rows_d(do)
        mdQ, mdK, mdV = rows_d(dq), rows_d(dk), rows_d(dv)
        mL2, mDelta = rows(l2), rows(delta)

        km, mn = cute.nvgpu.OperandMajorMode.K, cute.nvgpu.OperandMajorMode.MN
        f32, rmem = cutlass.Float32, warpgroup.OperandSource.RMEM
        ss_mma = [sm90_utils.make_trivial_tiled_mma(dt, dt, km, km, f32, (1, 1, 1), (TILE, TILE))
                  for _ in range(4)]  # S^T, dP^T (dK/dV kernel); S, dP (dQ kernel)
        rs_mma = [sm90_utils.make_trivial_tiled_mma(dt, dt, km, mn, f32, (1, 1, 1), (TILE, n),
                                                    rmem)
                  for n in (self.dn_v, self.dn_k, d)]  # dV, dK (dK/dV kernel); dQ (dQ kernel)
        row = LayoutEnum.ROW_MAJOR
        # sA, sC hold D-wide tiles (K, Q), sB, sD Dv-wide ones (V, dO)
        one = sm90_utils.make_smem_layout_a(row, (TILE, TILE, d), dt, 1)
        staged = sm90_utils.make_smem_layout_a(row, (TILE, TILE, d), dt, STAGES)
        one_v = sm90_utils.make_smem_layout_a(row, (TILE, TILE, d_v), dt, 1)
        staged_v = sm90_utils.make_smem_layout_a(row, (TILE, TILE, d_v), dt, STAGES)
        g2s = cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp()
        tmas = [cute.nvgpu.cpasync.make_tiled_tma_atom(g2s, m, cute.slice_(lay, (None, None, 0)),
                                                       (TILE, w))
                for m, lay, w in ((mQ, one, d), (mK, one, d), (mV, one_v, d_v),
                                  (mdO, one_v, d_v))]
        lays = (one, one_v, staged, staged_v)

        @cute.struct
        class Storage:
            fixed_bar: cute.struct.MemRange[cutlass.Int64, 2]
            stream_bar: cute.struct.MemRange[cutlass.Int64, 2 * STAGES]
            sA: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(one)], 1024]
            sB: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(one_v)], 1024]
            sC: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(staged)], 1024]
            sD: cute.struct.Align[cute.struct.MemRange[dt, cute.cosize(staged_v)], 1024]

        self.storage = Storage
        self.smem_bytes = Storage.size_in_bytes()
        sq, hq, b = mQ.shape[0], mQ.shape[2], mQ.shape[3]
        sk = mK.shape[0]
        (tma_q, tQ), (tma_k, tK), (tma_v, tV), (tma_do, tdO) = tmas
        aux = (scale, c, window, softcap, alibi, doc_q, doc_kv)
        # dK/dV: fixed K, V (sA, sB); streamed Q, dO (sC, sD).
        self.kernel_dkdv(ss_mma[0], ss_mma[1], rs_mma[0], rs_mma[1], tma_k, tK, tma_v, tV,
                         tma_q, tQ, tma_do, tdO, mL2, mDelta, mdK, mdV, *lays, *aux).launch(
            grid=(cute.ceil_div(sk, TILE), hq, b), block=[self.threads * self.dkdv_wgs, 1, 1],
            smem=self.smem_bytes, stream=stream)
        # dQ: fixed Q, dO (sA, sB); streamed K, V (sC, sD).
        self.kernel_dq(ss_mma[2], ss_mma[3], rs_mma[2], tma_q, tQ, tma_do, tdO, tma_k, tK,
                       tma_v, tV, mL2, mDelta, mdQ, *lays, *aux).launch(
            grid=(cute.ceil_div(sq, TILE), hq, b), block=[self.threads, 1, 1],
            smem=self.smem_bytes, stream=stream)

    # ------------------------------------------------------------------ shared pieces
    @cute.jit
    def setup(self, one: cute.ComposedLayout, one_v: cute.ComposedLayout,
              staged: cute.ComposedLayout, staged_v: cute.ComposedLayout,
              n_warps: cutlass.Constexpr):
        """Shared memory tiles and the two TMA pipelines (fixed tiles: 1 stage, streamed: 2).

        sA, sC: D-wide tiles; sB, sD: Dv-wide tiles.
        """
        st = cutlass.memory.SmemAllocator().allocate(self.storage)
        sA = st.sA.get_tensor(one.outer, swizzle=one.inner)
        sB = st.sB.get_tensor(one_v.outer, swizzle=one_v.inner)
        sC = st.sC.get_tensor(staged.outer, swizzle=staged.inner)
        sD = st.sD.get_tensor(staged_v.outer, swizzle=staged_v.inner)
        tile_bytes = (cute.size_in_bytes(self.dtype, cute.slice_(one, (None, None, 0)))
                      + cute.size_in_bytes(self.dtype, cute.slice_(one_v, (None, None, 0))))
        producer = pipeline.CooperativeGroup(pipeline.Agent.Thread, 1)
        consumers = pipeline.CooperativeGroup(pipeline.Agent.Thread, n_warps)  # arrive per warp
        fixed = pipeline.PipelineTmaAsync.create(
            barrier_storage=st.fixed_bar.data_ptr(), num_stages=1, producer_group=producer,
            consumer_group=consumers, tx_count=tile_bytes, defer_sync=True)
        streamed = pipeline.PipelineTmaAsync.create(
            barrier_storage=st.stream_bar.data_ptr(), num_stages=STAGES,
            producer_group=producer, consumer_group=consumers, tx_count=tile_bytes,
            defer_sync=True)
        cute.arch.mbarrier_init_fence()
        cute.arch.sync_threads()
        return sA, sB, sC, sD, fixed, streamed

    @cute.jit
    def load_pair(self, pipe, state, tma_x, tma_y, gx: cute.Tensor, gy: cute.Tensor,
                  sx: cute.Tensor, sy: cute.Tensor, blk: cutlass.Int32):
        """TMA-load tile ``blk`` of two (S, D) tensors into one pipeline stage (warp 0)."""
        pipe.producer_acquire(state)
        for tma, g, s in ((tma_x, gx, sx), (tma_y, gy, sy)):
            ts, tg = cute.nvgpu.cpasync.tma_partition(
                tma, 0, cute.make_layout(1), cute.group_modes(s, 0, 2),
                cute.group_modes(g, 0, 2))
            cute.copy(tma, tg[None, blk], ts[None, state.index],
                      tma_bar_ptr=pipe.producer_get_barrier(state))

    @cute.jit
    def grad_scores(self, s_rc: cute.Tensor, dp_rc: cute.Tensor, c_rc: cute.Tensor,
                    q0: cutlass.Int32, kv0: cutlass.Int32, sq: cutlass.Int32,
                    sk: cutlass.Int32, head: cutlass.Int32, batch: cutlass.Int32,
                    mL2: cute.Tensor, mDelta: cute.Tensor, aux: cutlass.Constexpr,
                    transposed: cutlass.Constexpr):
        """Spec bwd 2 and 4 in place: s_rc <- P = exp2(fma(x, c, -L2)), dp_rc <- dS (fp32).

        With dp_rc None (the dV warpgroup of the ``roles`` split) only P.
        """
        scale, c, window, softcap, alibi, doc_q, doc_kv = aux
        var = self.variant
        apply_mods(var, s_rc, c_rc, q0, kv0, sq, sk, head, scale, window, softcap, alibi,
                   doc_q, doc_kv, transposed)
        for r in cutlass.range_constexpr(cute.size(s_rc, mode=[0])):
            for j in cutlass.range_constexpr(cute.size(s_rc, mode=[1])):
                q = q0 + c_rc[r, j][0]
                if cutlass.const_expr(transposed):
                    q = q0 + c_rc[r, j][1]
                qc = cutlass.min(q, sq - 1)
                x = s_rc[r, j]
                p = ex2(fma_rn(x, c, -mL2[qc, head, batch]))
                if cutlass.const_expr(dp_rc is None):
                    s_rc[r, j] = p
                else:
                    ds = p * (dp_rc[r, j] - mDelta[qc, head, batch])
                    if cutlass.const_expr(var.score_mod == "softcap"):
                        t = x / softcap  # x = cap * tanh(u): d x / d u = 1 - tanh(u)^2
                        ds = ds * add_rn(cutlass.Float32(1.0), -mul_rn(t, t))
                    if x == NEG_INF:
                        ds = cutlass.Float32(0.0)
                    s_rc[r, j] = p
                    dp_rc[r, j] = ds

    @cute.jit
    def store_rows(self, acc_rc: cute.Tensor, g_rc: cute.Tensor, c_rc: cute.Tensor,
                   r0: cutlass.Int32, limit: cutlass.Int32, factor: cutlass.Float32):
        """g = acc * factor (fp32) for the tile rows r0 + i < limit."""
        for r in cutlass.range_constexpr(cute.size(acc_rc, mode=[0])):
            if r0 + c_rc[r, 0][0] < limit:
                for j in cutlass.range_constexpr(cute.size(acc_rc, mode=[1])):
                    g_rc[r, j] = acc_rc[r, j] * factor

    # ------------------------------------------------------------------ dK / dV kernel
    @cute.kernel
    def kernel_dkdv(self, st_mma: cute.TiledMma, dpt_mma: cute.TiledMma, dv_mma: cute.TiledMma,
                    dk_mma: cute.TiledMma, tma_k: cute.CopyAtom, mK: cute.Tensor,
                    tma_v: cute.CopyAtom, mV: cute.Tensor, tma_q: cute.CopyAtom,
                    mQ: cute.Tensor, tma_do: cute.CopyAtom, mdO: cute.Tensor, mL2: cute.Tensor,
                    mDelta: cute.Tensor, mdK: cute.Tensor, mdV: cute.Tensor,
                    one: cute.ComposedLayout, one_v: cute.ComposedLayout,
                    staged: cute.ComposedLayout, staged_v: cute.ComposedLayout,
                    scale: cutlass.Float32, c: cutlass.Float32, window: cutlass.Int32,
                    softcap: cutlass.Float32, alibi: cute.Tensor, doc_q: cute.Tensor,
                    doc_kv: cute.Tensor):
        d, dv, var = self.d, self.dv, self.variant
        aux = (scale, c, window, softcap, alibi, doc_q, doc_kv)
        tidx, _, _ = cute.arch.thread_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        n_blk, head, batch = cute.arch.block_idx()
        sq, sk = mQ.shape[0], mK.shape[0]
        head_kv = head // (mQ.shape[2] // mK.shape[2])
        sK, sV, sQ, sdO, fixed, streamed = self.setup(one, one_v, staged, staged_v,
                                                      4 * self.dkdv_wgs)

        kv0 = n_blk * TILE
        lo, hi = q_block_range(var, kv0, cutlass.min(kv0 + TILE, sk) - 1, sq, sk, window, TILE)
        n = cutlass.max(hi - lo, 0)
        gK = cute.local_tile(mK[None, None, head_kv, batch], (TILE, d), (None, 0))
        gV = cute.local_tile(mV[None, None, head_kv, batch], (TILE, dv), (None, 0))
        gQ = cute.local_tile(mQ[None, None, head, batch], (TILE, d), (None, 0))
        gdO = cute.local_tile(mdO[None, None, head, batch], (TILE, dv), (None, 0))
        prod = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
        if warp == 0 and n > 0:
            fixed_prod = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 1)
            self.load_pair(fixed, fixed_prod, tma_k, tma_v, gK, gV, sK, sV, n_blk)
            self.load_pair(streamed, prod, tma_q, tma_do, gQ, gdO, sQ, sdO, lo)
            prod.advance()

        # wg: which D / Dv columns of dK / dV (cols), or which gradient (roles)
        wg, t = tidx // 128, tidx % 128
        mmas = (st_mma, dpt_mma, dv_mma, dk_mma)
        tiles = (sK, sV, sQ, sdO, fixed, streamed, prod, tma_q, tma_do, gQ, gdO)
        pos = (warp, n, lo, kv0, n_blk, head, batch, sq, sk, mL2, mDelta, mdK, mdV)
        if cutlass.const_expr(self.roles):
            if wg == 0:
                self.dkdv_loop("dv", 0, t, mmas, tiles, pos, aux)
            else:
                self.dkdv_loop("dk", 0, t, mmas, tiles, pos, aux)
        else:
            self.dkdv_loop("both", wg, t, mmas, tiles, pos, aux)

    @cute.jit
    def dkdv_loop(self, role: cutlass.Constexpr, wg: cutlass.Int32, t: cutlass.Int32,
                  mmas: cutlass.Constexpr, tiles: cutlass.Constexpr, pos: cutlass.Constexpr,
                  aux: cutlass.Constexpr):
        """The q-tile loop of one warpgroup: role "both" (dV and dK columns ``wg``), "dv" or
        "dk" (all columns of one gradient)."""
        st_mma, dpt_mma, dv_mma, dk_mma = mmas
        sK, sV, sQ, sdO, fixed, streamed, prod, tma_q, tma_do, gQ, gdO = tiles
        warp, n, lo, kv0, n_blk, head, batch, sq, sk, mL2, mDelta, mdK, mdV = pos
        scale = aux[0]
        want_dv, want_dk = role != "dk", role != "dv"
        dn_k, dn_v = self.dn_k, self.dn_v
        thr_st, thr_dpt = st_mma.get_slice(t), dpt_mma.get_slice(t)
        thr_dv, thr_dk = dv_mma.get_slice(t), dk_mma.get_slice(t)
        tSrK = thr_st.make_fragment_A(thr_st.partition_A(sK))
        tSrQ = thr_st.make_fragment_B(thr_st.partition_B(sQ))
        if cutlass.const_expr(want_dk):
            tPrV = thr_dpt.make_fragment_A(thr_dpt.partition_A(sV))
            tPrdO = thr_dpt.make_fragment_B(thr_dpt.partition_B(sdO))
        # this warpgroup's columns: whole swizzle atoms (64 elements at D = 128)
        if cutlass.const_expr(want_dv):
            sdOt = cute.local_tile(_transposed(sdO), (dn_v, TILE, STAGES), (wg, 0, 0))
            tVrdOt = thr_dv.make_fragment_B(thr_dv.partition_B(sdOt))
        if cutlass.const_expr(want_dk):
            sQt = cute.local_tile(_transposed(sQ), (dn_k, TILE, STAGES), (wg, 0, 0))
            tKrQt = thr_dk.make_fragment_B(thr_dk.partition_B(sQt))
        acc_st = thr_st.make_fragment_C(thr_st.partition_shape_C((TILE, TILE)))
        acc_dpt = None
        if cutlass.const_expr(want_dk):
            acc_dpt = thr_dpt.make_fragment_C(thr_dpt.partition_shape_C((TILE, TILE)))
        if cutlass.const_expr(want_dv):
            acc_dv = thr_dv.make_fragment_C(thr_dv.partition_shape_C((TILE, dn_v)))
        if cutlass.const_expr(want_dk):
            acc_dk = thr_dk.make_fragment_C(thr_dk.partition_shape_C((TILE, dn_k)))
        if cutlass.const_expr(want_dv):
            rP = thr_dv.make_fragment_A(thr_dv.partition_shape_A((TILE, TILE)))
        if cutlass.const_expr(want_dk):
            rdS = thr_dk.make_fragment_A(thr_dk.partition_shape_A((TILE, TILE)))
        c_rc = rowcol(thr_st.partition_C(cute.make_identity_tensor((TILE, TILE))))
        # Output partitions before the loop (tiled_mma.set() restages the MMAs); only the row
        # coordinate of tOc is used, the same for dK and dV.
        thr_out, dn_out = (thr_dk, dn_k) if want_dk else (thr_dv, dn_v)
        tOc = rowcol(thr_out.partition_C(cute.make_identity_tensor((TILE, dn_out))))
        if cutlass.const_expr(want_dk):
            gdK = rowcol(thr_dk.partition_C(
                cute.local_tile(mdK[None, None, head, batch], (TILE, dn_k), (n_blk, wg))))
        if cutlass.const_expr(want_dv):
            gdV = rowcol(thr_dv.partition_C(
                cute.local_tile(mdV[None, None, head, batch], (TILE, dn_v), (n_blk, wg))))
            acc_dv.fill(0.0)
        if cutlass.const_expr(want_dk):
            acc_dk.fill(0.0)

        cons = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        if n > 0:
            fixed.consumer_wait(pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer,
                                                             1))
            for i in cutlass.range(n, unroll=1):
                if warp == 0 and i + 1 < n:  # prefetch the next q tile
                    self.load_pair(streamed, prod, tma_q, tma_do, gQ, gdO, sQ, sdO,
                                   lo + i + 1)
                    prod.advance()
                streamed.consumer_wait(cons)
                st_mma = wg_gemm(st_mma, acc_st, tSrK[None, None, None, 0],
                                 tSrQ[None, None, None, cons.index], True)  # S^T (spec bwd 2)
                if cutlass.const_expr(want_dk):
                    dpt_mma = wg_gemm(dpt_mma, acc_dpt, tPrV[None, None, None, 0],
                                      tPrdO[None, None, None, cons.index], True)  # dP^T (bwd 4)
                cute.nvgpu.warpgroup.commit_group()
                cute.nvgpu.warpgroup.wait_group(0)
                self.grad_scores(rowcol(acc_st), rowcol(acc_dpt) if want_dk else None, c_rc,
                                 (lo + i) * TILE, kv0, sq, sk, head, batch, mL2, mDelta, aux,
                                 True)
                if cutlass.const_expr(want_dv):
                    rP.store(acc_to_a_operand(acc_st, rP, self.dtype))  # P_r (spec bwd 3)
                if cutlass.const_expr(want_dk):
                    rdS.store(acc_to_a_operand(acc_dpt, rdS, self.dtype))  # dS_r (spec bwd 4)
                if cutlass.const_expr(want_dv):
                    dv_mma = wg_gemm(dv_mma, acc_dv, rP, tVrdOt[None, None, None, cons.index],
                                     False)  # dV += P_r^T dO
                if cutlass.const_expr(want_dk):
                    dk_mma = wg_gemm(dk_mma, acc_dk, rdS, tKrQt[None, None, None, cons.index],
                                     False)  # dK += dS_r^T Q (spec bwd 5)
                cute.nvgpu.warpgroup.commit_group()
                cute.nvgpu.warpgroup.wait_group(0)
                streamed.consumer_release(cons)
                cons.advance()
        if cutlass.const_expr(want_dk):
            self.store_rows(rowcol(acc_dk), gdK, tOc, kv0, sk, scale)  # dK *= scale (bwd 5)
        if cutlass.const_expr(want_dv):
            self.store_rows(rowcol(acc_dv), gdV, tOc, kv0, sk, cutlass.Float32(1.0))

    # ----------------------------------------------------------------------- dQ kernel
    @cute.kernel
    def kernel_dq(self, s_mma: cute.TiledMma, dp_mma: cute.TiledMma, dq_mma: cute.TiledMma,
                  tma_q: cute.CopyAtom, mQ: cute.Tensor, tma_do: cute.CopyAtom,
                  mdO: cute.Tensor, tma_k: cute.CopyAtom, mK: cute.Tensor,
                  tma_v: cute.CopyAtom, mV: cute.Tensor, mL2: cute.Tensor, mDelta: cute.Tensor,
                  mdQ: cute.Tensor, one: cute.ComposedLayout, one_v: cute.ComposedLayout,
                  staged: cute.ComposedLayout, staged_v: cute.ComposedLayout,
                  scale: cutlass.Float32,
                  c: cutlass.Float32, window: cutlass.Int32, softcap: cutlass.Float32,
                  alibi: cute.Tensor, doc_q: cute.Tensor, doc_kv: cute.Tensor):
        d, dv, var = self.d, self.dv, self.variant
        aux = (scale, c, window, softcap, alibi, doc_q, doc_kv)
        tidx, _, _ = cute.arch.thread_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        m_blk, head, batch = cute.arch.block_idx()
        sq, sk = mQ.shape[0], mK.shape[0]
        head_kv = head // (mQ.shape[2] // mK.shape[2])
        sQ, sdO, sK, sV, fixed, streamed = self.setup(one, one_v, staged, staged_v, 4)

        q0 = m_blk * TILE
        lo, hi = kv_block_range(var, q0, cutlass.min(q0 + TILE, sq) - 1, sq, sk, window, TILE)
        n = cutlass.max(hi - lo, 0)
        gQ = cute.local_tile(mQ[None, None, head, batch], (TILE, d), (None, 0))
        gdO = cute.local_tile(mdO[None, None, head, batch], (TILE, dv), (None, 0))
        gK = cute.local_tile(mK[None, None, head_kv, batch], (TILE, d), (None, 0))
        gV = cute.local_tile(mV[None, None, head_kv, batch], (TILE, dv), (None, 0))
        prod = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, STAGES)
        if warp == 0 and n > 0:
            fixed_prod = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, 1)
            self.load_pair(fixed, fixed_prod, tma_q, tma_do, gQ, gdO, sQ, sdO, m_blk)
            self.load_pair(streamed, prod, tma_k, tma_v, gK, gV, sK, sV, lo)
            prod.advance()

        thr_s, thr_dp, thr_dq = s_mma.get_slice(tidx), dp_mma.get_slice(tidx), \
            dq_mma.get_slice(tidx)
        tSrQ = thr_s.make_fragment_A(thr_s.partition_A(sQ))
        tSrK = thr_s.make_fragment_B(thr_s.partition_B(sK))
        tPrdO = thr_dp.make_fragment_A(thr_dp.partition_A(sdO))
        tPrV = thr_dp.make_fragment_B(thr_dp.partition_B(sV))
        tQrKt = thr_dq.make_fragment_B(thr_dq.partition_B(_transposed(sK)))
        acc_s = thr_s.make_fragment_C(thr_s.partition_shape_C((TILE, TILE)))
        acc_dp = thr_dp.make_fragment_C(thr_dp.partition_shape_C((TILE, TILE)))
        acc_dq = thr_dq.make_fragment_C(thr_dq.partition_shape_C((TILE, d)))
        rdS = thr_dq.make_fragment_A(thr_dq.partition_shape_A((TILE, TILE)))
        c_rc = rowcol(thr_s.partition_C(cute.make_identity_tensor((TILE, TILE))))
        tOc = rowcol(thr_dq.partition_C(cute.make_identity_tensor((TILE, d))))
        gdQ = rowcol(thr_dq.partition_C(
            cute.local_tile(mdQ[None, None, head, batch], (TILE, d), (m_blk, 0))))
        acc_dq.fill(0.0)

        cons = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, STAGES)
        if n > 0:
            fixed.consumer_wait(pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer,
                                                             1))
            for i in cutlass.range(n, unroll=1):  # kv tiles in increasing order
                if warp == 0 and i + 1 < n:
                    self.load_pair(streamed, prod, tma_k, tma_v, gK, gV, sK, sV,
                                   lo + i + 1)
                    prod.advance()
                streamed.consumer_wait(cons)
                s_mma = wg_gemm(s_mma, acc_s, tSrQ[None, None, None, 0],
                                tSrK[None, None, None, cons.index], True)  # S (spec bwd 2)
                dp_mma = wg_gemm(dp_mma, acc_dp, tPrdO[None, None, None, 0],
                                 tPrV[None, None, None, cons.index], True)  # dP (spec bwd 4)
                cute.nvgpu.warpgroup.commit_group()
                cute.nvgpu.warpgroup.wait_group(0)
                self.grad_scores(rowcol(acc_s), rowcol(acc_dp), c_rc, q0, (lo + i) * TILE, sq,
                                 sk, head, batch, mL2, mDelta, aux, False)
                rdS.store(acc_to_a_operand(acc_dp, rdS, self.dtype))  # dS_r (spec bwd 4)
                dq_mma = wg_gemm(dq_mma, acc_dq, rdS, tQrKt[None, None, None, cons.index],
                                 False)  # dQ += dS_r K (spec bwd 5)
                cute.nvgpu.warpgroup.commit_group()
                cute.nvgpu.warpgroup.wait_group(0)
                streamed.consumer_release(cons)
                cons.advance()
        self.store_rows(rowcol(acc_dq), gdQ, tOc, q0, sq, scale)  # dQ *= scale (spec bwd 5)
