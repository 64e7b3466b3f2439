"""Load (TMA) and MMA (tcgen05) roles of the sm100 forward, one work tile per call, and the
TMEM views they share with the softmax and correction roles.

Every role returns the pipeline participants it advanced: the persistent schedules call a
role once per work tile inside a dynamic loop, and the DSL carries only the names a loop
body assigns (or calls methods on) from one iteration to the next.

S-buffer parity: S_i goes to TMEM buffer ``s_buf(s_base, i)``; ``s_base`` is the number of
S tiles the CTA produced before this work tile (mod 2): 0 for a single-tile CTA, carried by
the persistent loops so that the buffer alternates across work tiles as the S pipeline's
stage does. Which buffer holds S_i never changes what is computed.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
from cutlass.cute.nvgpu import cpasync, tcgen05

from impls.attention.fa4.sm100.exp2 import tcgen05_fence_after

TMEM_S = (0, 128)  # S_0 / S_1 (P_i aliases the first 64 columns of its S buffer)
TMEM_O = 256


def s_buf(s_base, i):
    """TMEM S buffer (0/1) of the work tile's kv step ``i``; ``s_base`` 0 gives ``i % 2``
    (the single-tile kernel's code, unchanged)."""
    return i % 2 if isinstance(s_base, int) and s_base == 0 else (s_base + i) % 2


class LoadMmaRoles:
    """Mixin of ``Fa4Sm100Forward``: the TMA producer and the tcgen05 issuer."""

    @cute.jit
    def load_role(self, qk_thr, pv_thr, tma_q, gq, tma_k, gk, tma_v, gv, s_q, s_k, s_v,
                  q_prod, kv_prod, m_block, head, hkv_head, batch, hi, n):
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
            if cutlass.const_expr(self.pingpong):  # Q tile 1 of the work tile, second stage
                h = q_prod.acquire_and_advance()
                cute.copy(tma_q, t_gq[None, m_block + 1], t_sq[None, h.index],
                          tma_bar_ptr=h.barrier)
            h = kv_prod.acquire_and_advance()
            cute.copy(tma_k, t_gk[None, hi - 1], t_sk[None, h.index], tma_bar_ptr=h.barrier)
            for i in cutlass.range(n, unroll=1):
                if i + 1 < n:
                    h = kv_prod.acquire_and_advance()
                    cute.copy(tma_k, t_gk[None, hi - 2 - i], t_sk[None, h.index],
                              tma_bar_ptr=h.barrier)
                if cutlass.const_expr(self.head_dim_v == self.head_dim):
                    h = kv_prod.acquire_and_advance()
                else:  # a V tile is smaller than the K tile its stage is sized for
                    h = kv_prod.acquire_and_advance(expected_tx=self.v_bytes)
                cute.copy(tma_v, t_gv[None, hi - 1 - i], t_sv[None, h.index],
                          tma_bar_ptr=h.barrier)
        return q_prod, kv_prod

    @cute.jit
    def mma_role(self, qk_mma, pv_mma, qk_thr, pv_thr, s_q, s_k, s_v, p_tl, tmem_ptr,
                 q_cons, kv_cons, s_prod, p_cons, o_cons, pv_prod, n, s_base=0):
        """tcgen05 issue (spec fwd 1 and 6). S_{i+1} is issued before PV_i so that the
        softmax of tile i+1 overlaps PV_i. Reuse of an S buffer by S_{i+2} is safe because
        tcgen05.mma operations issued by one thread execute in issue order."""
        r_q = qk_thr.make_fragment_A(s_q)
        r_k = qk_thr.make_fragment_B(s_k)
        r_v = pv_thr.make_fragment_B(s_v)
        if n > 0:
            hq = q_cons.wait_and_advance()
            r_qi = r_q[None, None, None, hq.index]
            kv_cons, s_prod = self.issue_qk(
                qk_mma, r_qi, r_k, tmem_s(self, qk_thr, tmem_ptr, s_buf(s_base, 0)), kv_cons,
                s_prod)
            for i in cutlass.range(n, unroll=1):
                if i + 1 < n:  # S_{i+1} overlaps the softmax of tile i
                    kv_cons, s_prod = self.issue_qk(
                        qk_mma, r_qi, r_k,
                        tmem_s(self, qk_thr, tmem_ptr, s_buf(s_base, i + 1)), kv_cons, s_prod)
                hv = kv_cons.wait_and_advance()
                hp = p_cons.wait_and_advance()  # P_i written (spec fwd 6)
                ho = o_cons.wait_and_advance()  # O rescaled by alpha_i (spec fwd 4)
                hpv = pv_prod.acquire_and_advance()
                tcgen05_fence_after()  # order the PV MMA after the softmax/correction syncs
                self.issue_pv(pv_mma, tmem_p(self, pv_thr, p_tl, tmem_ptr, s_buf(s_base, i)),
                              r_v[None, None, None, hv.index], tmem_o(self, pv_thr, tmem_ptr),
                              i > 0)
                hpv.commit()
                hp.release()
                ho.release()
                hv.release()
            hq.release()
        return q_cons, kv_cons, s_prod, p_cons, o_cons, pv_prod

    @cute.jit
    def issue_qk(self, qk_mma, r_q, r_k, t_s, kv_cons, s_prod):
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
    def issue_pv(self, pv_mma, t_p, r_v, t_o, accumulate):
        """O += P V (spec fwd 6); returns the tiled MMA (its ACCUMULATE field changed)."""
        for kp in cutlass.range_constexpr(cute.size(t_p, mode=[2])):
            pv_mma.set(tcgen05.Field.ACCUMULATE, accumulate or kp != 0)
            cute.gemm(pv_mma, t_o, t_p[None, None, kp], r_v[None, None, kp], t_o)
        return pv_mma


def tmem_s(cfg, qk_thr, tmem_ptr, buf, base: int = 0) -> cute.Tensor:
    """S buffer ``buf`` (0/1, may be dynamic) as the QK MMA accumulator; ``base``: the first
    TMEM column of the Q tile's S buffers (ping-pong)."""
    layout = qk_thr.make_fragment_C(qk_thr.partition_shape_C(cfg.qk_tiler[:2])).layout
    if cutlass.const_expr(base == 0):
        return cute.make_tensor(tmem_ptr + TMEM_S[1] * buf, layout)
    return cute.make_tensor(tmem_ptr + base + TMEM_S[1] * buf, layout)


def tmem_o(cfg, pv_thr, tmem_ptr, col: int = TMEM_O) -> cute.Tensor:
    """The O accumulator (fp32, Dv columns) at TMEM column ``col``."""
    layout = pv_thr.make_fragment_C(pv_thr.partition_shape_C(cfg.pv_tiler[:2])).layout
    return cute.make_tensor(tmem_ptr + col, layout)


def tmem_p(cfg, pv_thr, p_tl, tmem_ptr, buf, base: int = 0) -> cute.Tensor:
    """P_i (16-bit) over S buffer ``buf``, as the PV MMA's A operand from TMEM."""
    frag = pv_thr.make_fragment_A(cute.make_tensor(tmem_ptr, p_tl.outer))[None, None, None, 0]
    if cutlass.const_expr(base == 0):
        ptr = cute.recast_ptr(tmem_ptr + TMEM_S[1] * buf, dtype=frag.element_type)
    else:
        ptr = cute.recast_ptr(tmem_ptr + base + TMEM_S[1] * buf, dtype=frag.element_type)
    return cute.make_tensor(ptr, frag.layout)
