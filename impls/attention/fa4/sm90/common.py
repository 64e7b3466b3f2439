"""Shared pieces of the sm90 kernels: the compile-time variant, PTX helpers, accumulator views
and the mask / score_mod step (spec fwd 2-3, bwd 2) used by the forward and the backward.

Everything here runs at trace time inside ``@cute.jit`` / ``@cute.kernel`` functions.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import cutlass
import cutlass.cute as cute
from cutlass._mlir.dialects import llvm
from cutlass.cutlass_dsl import T, dsl_user_op

from impls.attention.fa4 import spec

MASKS = ("none", "causal", "sliding_window", "document")
SCORE_MODS = ("none", "softcap", "alibi")
NEG_INF = -math.inf


# (D, Dv) pairs the kernels compile: q, k have head dim D, v and out Dv (MLA-style 192/128).
SHAPES = ((64, 64), (128, 128), (96, 96), (192, 192), (192, 128))


@dataclass(frozen=True)
class Variant:
    """One compiled kernel: everything that is a compile-time constant.

    GQA ratio, sequence lengths, batch, heads, the window size, softcap value, ALiBi slopes and
    document ids are runtime arguments.
    """

    dtype: str  # "float16" | "bfloat16"
    head_dim: int  # D of q and k
    mask: str = "none"  # one of MASKS; "causal" is bottom-right aligned (q + Sk - Sq >= kv)
    score_mod: str = "none"  # one of SCORE_MODS
    head_dim_v: int = 0  # Dv of v and out; 0 means Dv = D

    def __post_init__(self) -> None:
        if self.head_dim_v == 0:
            object.__setattr__(self, "head_dim_v", self.head_dim)
        if self.dtype not in ("float16", "bfloat16"):
            raise ValueError(f"dtype {self.dtype!r}")
        if (self.head_dim, self.head_dim_v) not in SHAPES:
            raise ValueError(f"(D, Dv) = ({self.head_dim}, {self.head_dim_v}) not in {SHAPES}")
        if self.mask not in MASKS or self.score_mod not in SCORE_MODS:
            raise ValueError(f"mask {self.mask!r} / score_mod {self.score_mod!r}")

    @property
    def shape(self) -> tuple[int, int]:
        return self.head_dim, self.head_dim_v

    @property
    def shape_tag(self) -> str:
        """'d128' when Dv = D, else 'd192v128'."""
        d, dv = self.shape
        return f"d{d}" if d == dv else f"d{d}v{dv}"

    @property
    def name(self) -> str:
        return f"{self.dtype}-{self.shape_tag}-{self.mask}-{self.score_mod}"

    @classmethod
    def parse(cls, name: str) -> Variant:
        """'float16-d128-causal-softcap' or 'bfloat16-d192v128-none-none' -> Variant."""
        m = re.fullmatch(r"(\w+?)-d(\d+)(?:v(\d+))?-(\w+)-(\w+)", name)
        if m is None:
            raise ValueError(f"not a variant name: {name!r}")
        dtype, d, dv, mask, mod = m.groups()
        if dv is not None and int(dv) == int(d):
            raise ValueError(f"{name!r}: write d{d}, not d{d}v{dv}")
        return cls(dtype, int(d), mask, mod, int(dv or 0))

    @property
    def cutlass_dtype(self) -> type[cutlass.Numeric]:
        return cutlass.Float16 if self.dtype == "float16" else cutlass.BFloat16


def exponent_scale(scale: float, score_mod: str) -> float:
    """Spec fwd 2: c = scale * log2(e) without a score_mod, log2(e) with one (host, double)."""
    return scale * spec.LOG2E if score_mod == "none" else spec.LOG2E


# ------------------------------------------------------------------------------ PTX helpers
def _asm_f32(ptx: str, *args: cutlass.Float32, loc=None, ip=None) -> cutlass.Float32:
    operands = [cutlass.Float32(a).ir_value(loc=loc, ip=ip) for a in args]
    constraints = "=f," + ",".join("f" for _ in args)
    return cutlass.Float32(llvm.inline_asm(T.f32(), operands, ptx, constraints,
                                           has_side_effects=False, is_align_stack=False,
                                           asm_dialect=llvm.AsmDialect.AD_ATT))


@dsl_user_op
def fma_rn(a, b, c, *, loc=None, ip=None) -> cutlass.Float32:
    """fp32 fused multiply-add, round to nearest (spec fwd 5: y = fma(x, c, -mc))."""
    return _asm_f32("fma.rn.f32 $0, $1, $2, $3;", a, b, c, loc=loc, ip=ip)


@dsl_user_op
def mul_rn(a, b, *, loc=None, ip=None) -> cutlass.Float32:
    """fp32 a * b, rounded on its own (mul.rn is never contracted into an fma by ptxas)."""
    return _asm_f32("mul.rn.f32 $0, $1, $2;", a, b, loc=loc, ip=ip)


@dsl_user_op
def add_rn(a, b, *, loc=None, ip=None) -> cutlass.Float32:
    """fp32 a + b, rounded on its own (add.rn is never contracted into an fma by ptxas)."""
    return _asm_f32("add.rn.f32 $0, $1, $2;", a, b, loc=loc, ip=ip)


@dsl_user_op
def ex2(a, *, loc=None, ip=None) -> cutlass.Float32:
    """Hardware exp2 (ex2.approx.f32, no flush-to-zero); sm90 uses it everywhere (spec fwd 5)."""
    return _asm_f32("ex2.approx.f32 $0, $1;", a, loc=loc, ip=ip)


@dsl_user_op
def tanh_approx(a, *, loc=None, ip=None) -> cutlass.Float32:
    """Hardware tanh (tanh.approx.f32, sm75+), used by the softcap score_mod."""
    return _asm_f32("tanh.approx.f32 $0, $1;", a, loc=loc, ip=ip)


# ------------------------------------------------------------------- accumulator views
def rowcol_layout(acc_layout: cute.Layout) -> cute.Layout:
    """View a wgmma accumulator fragment ((2, 2, N/8), MMA_M, MMA_N) as (rows, cols).

    In the m64nNk16 fragment a thread's value v sits at column pair element v % 2, row half
    (v // 2) % 2 (rows r and r + 8) and column group v // 4 (PTX ISA, wgmma D fragment).
    """
    v = acc_layout.shape[0]
    sv = acc_layout.stride[0]
    rows = cute.make_layout((v[1], acc_layout.shape[1]), stride=(sv[1], acc_layout.stride[1]))
    cols = cute.make_layout(((v[0], v[2]), acc_layout.shape[2]),
                            stride=((sv[0], sv[2]), acc_layout.stride[2]))
    return cute.make_layout((rows.shape, cols.shape), stride=(rows.stride, cols.stride))


def rowcol(t: cute.Tensor) -> cute.Tensor:
    return cute.make_tensor(t.iterator, rowcol_layout(t.layout))


@cute.jit
def quad_max(x: cutlass.Float32) -> cutlass.Float32:
    """Max over the 4 lanes that share an accumulator row."""
    return cute.arch.warp_reduction_max(x, threads_in_group=4)


@cute.jit
def quad_sum(x: cutlass.Float32) -> cutlass.Float32:
    return cute.arch.warp_reduction_sum(x, threads_in_group=4)


# --------------------------------------------------------------- mask and score_mod
@cute.jit
def apply_mods(
    variant: cutlass.Constexpr,
    s_rc: cute.Tensor,  # (rows, cols) fp32 accumulator view, overwritten with x
    c_rc: cute.Tensor,  # identity coordinates (row, col) of the same elements
    q0: cutlass.Int32,  # global query index of tile coordinate 0
    kv0: cutlass.Int32,  # global key index of tile coordinate 0
    seqlen_q: cutlass.Int32,
    seqlen_k: cutlass.Int32,
    head: cutlass.Int32,
    scale: cutlass.Float32,
    window: cutlass.Int32,
    softcap: cutlass.Float32,
    alibi: cute.Tensor,
    doc_q: cute.Tensor,
    doc_kv: cute.Tensor,
    transposed: cutlass.Constexpr = False,  # tile rows are keys, columns queries (S^T)
):
    """Spec fwd 2-3: x = S (no score_mod) or score_mod(fp32(S * scale)); -inf where masked.

    Masks: kv >= Sk and q >= Sq always; causal/sliding_window are bottom-right aligned
    (off = Sk - Sq): live iff q + off >= kv (and q + off - kv < window); document:
    doc_q[q] == doc_kv[kv].
    """
    off = seqlen_k - seqlen_q
    slope = cutlass.Float32(0.0)
    if cutlass.const_expr(variant.score_mod == "alibi"):
        slope = cutlass.Float32(alibi[head])
    n_rows, n_cols = cute.size(s_rc, mode=[0]), cute.size(s_rc, mode=[1])
    row_ids = cute.make_rmem_tensor((n_rows,), cutlass.Int32)
    col_ids = cute.make_rmem_tensor((n_cols // 8,), cutlass.Int32)
    if cutlass.const_expr(variant.mask == "document"):
        # Document ids: one load per row; the tile's 4 * n_cols column ids are loaded once
        # per warp (lane L holds columns L + 32 i) and fetched by shuffle where needed: the
        # thread's column j is 8 (j // 2) + 2 (lane % 4) + j % 2, i.e. register j // 8 of lane
        # column % 32 (wgmma accumulator layout). Keeps 64 id loads per tile out of registers.
        assert n_cols % 8 == 0
        row_src, row0, row_n = doc_q, q0, seqlen_q
        col_src, col0, col_n = doc_kv, kv0, seqlen_k  # col0: multiple of 32
        if cutlass.const_expr(transposed):
            row_src, row0, row_n = doc_kv, kv0, seqlen_k
            col_src, col0, col_n = doc_q, q0, seqlen_q
        lane = cute.arch.lane_idx()
        for i in cutlass.range_constexpr(n_cols // 8):
            col_ids[i] = col_src[cutlass.min(col0 + lane + 32 * i, col_n - 1)]
        for r in cutlass.range_constexpr(n_rows):
            row_ids[r] = row_src[cutlass.min(row0 + c_rc[r, 0][0], row_n - 1)]
    for j in cutlass.range_constexpr(n_cols):
        col_id = cutlass.Int32(0)
        if cutlass.const_expr(variant.mask == "document"):
            # (col0 + column) % 32 == column % 32 as col0 is a multiple of the tile width; the
            # tile-varying form stops the compiler from keeping 32 source lanes live.
            col_id = cute.arch.shuffle_sync(col_ids[j // 8], (col0 + c_rc[0, j][1]) % 32)
        for r in cutlass.range_constexpr(n_rows):
            q = q0 + c_rc[r, j][0]
            kv = kv0 + c_rc[r, j][1]
            if cutlass.const_expr(transposed):
                q = q0 + c_rc[r, j][1]
                kv = kv0 + c_rc[r, j][0]
            x = s_rc[r, j]
            if cutlass.const_expr(variant.score_mod != "none"):
                # each fp32 operation rounded on its own, as the catalogue's torch code
                x = mul_rn(x, scale)
                if cutlass.const_expr(variant.score_mod == "softcap"):
                    x = mul_rn(softcap, tanh_approx(x / softcap))
                else:  # alibi: score + slope[h] * (kv - q - off)
                    x = add_rn(x, mul_rn(slope, cutlass.Float32(kv - q - off)))
            live = (kv < seqlen_k) & (q < seqlen_q)
            if cutlass.const_expr(variant.mask in ("causal", "sliding_window")):
                live = live & (q + off >= kv)
            if cutlass.const_expr(variant.mask == "sliding_window"):
                live = live & (q + off - kv < window)
            if cutlass.const_expr(variant.mask == "document"):
                live = live & (row_ids[r] == col_id)
            if not live:
                x = cutlass.Float32(NEG_INF)
            s_rc[r, j] = x


@cute.jit
def kv_block_range(
    variant: cutlass.Constexpr,
    q_first: cutlass.Int32,  # first global row of the Q tile
    q_last: cutlass.Int32,  # last global row of the Q tile (clamped to Sq - 1)
    seqlen_q: cutlass.Int32,
    seqlen_k: cutlass.Int32,
    window: cutlass.Int32,
    block_n: cutlass.Constexpr,
):
    """kv tiles [lo, hi) that can hold a live entry for rows q_first..q_last (others skipped).

    Only the mask's static structure is used (causal / window bounds); document masks visit
    every tile: skipping a fully masked tile changes nothing (spec fwd 4 with t = -inf).
    """
    off = seqlen_k - seqlen_q
    lo = cutlass.Int32(0)
    hi = (seqlen_k + block_n - 1) // block_n
    if cutlass.const_expr(variant.mask in ("causal", "sliding_window")):
        last_col = q_last + off
        if last_col < 0:  # noqa: SIM108 - a staged branch, not a Python ternary
            hi = cutlass.Int32(0)
        else:
            hi = cutlass.min(hi, last_col // block_n + 1)
    if cutlass.const_expr(variant.mask == "sliding_window"):
        first_col = q_first + off - (window - 1)
        if first_col > 0:
            lo = first_col // block_n
    return lo, hi


@cute.jit
def q_block_range(
    variant: cutlass.Constexpr,
    kv_first: cutlass.Int32,
    kv_last: cutlass.Int32,  # clamped to Sk - 1
    seqlen_q: cutlass.Int32,
    seqlen_k: cutlass.Int32,
    window: cutlass.Int32,
    block_m: cutlass.Constexpr,
):
    """q tiles [lo, hi) that can hold a live entry for keys kv_first..kv_last (backward)."""
    off = seqlen_k - seqlen_q
    lo = cutlass.Int32(0)
    hi = (seqlen_q + block_m - 1) // block_m
    if cutlass.const_expr(variant.mask in ("causal", "sliding_window")):
        first_q = kv_first - off  # q + off >= kv
        if first_q > 0:
            lo = first_q // block_m
    if cutlass.const_expr(variant.mask == "sliding_window"):
        last_q = kv_last + window - 1 - off  # q + off - kv < window
        if last_q < 0:  # noqa: SIM108 - a staged branch, not a Python ternary
            hi = cutlass.Int32(0)
        else:
            hi = cutlass.min(hi, last_q // block_m + 1)
    return lo, hi


@cute.jit
def wg_gemm(tiled_mma: cute.TiledMma, acc: cute.Tensor, a: cute.Tensor, b: cute.Tensor,
            zero_init: cutlass.Constexpr) -> cute.TiledMma:
    """acc (+)= a · b over the K blocks of one tile with wgmma (async; caller commits).

    Returns the MMA: callers rebind it so the tracer carries the ACCUMULATE field across
    staged loops.
    """
    cute.nvgpu.warpgroup.fence()
    for kb in cutlass.range_constexpr(cute.size(a, mode=[2])):
        tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, not zero_init or kb != 0)
        cute.gemm(tiled_mma, acc, a[None, None, kb], b[None, None, kb], acc)
    return tiled_mma


@cute.jit
def acc_to_a_operand(acc: cute.Tensor, a_frag: cute.Tensor, dtype: cutlass.Constexpr):
    """acc rounded (RNE) to dtype, in the register A-operand layout of the next wgmma.

    For 16-bit types the m64nNk16 accumulator values of a thread, in order, are exactly its
    A-fragment values of a k16-blocked wgmma (k block kb = accumulator column groups 2kb and
    2kb + 1), so this is a conversion, not a shuffle.
    """
    assert cute.size(acc) == cute.size(a_frag)
    p = cute.make_rmem_tensor_like(a_frag, dtype)
    view = cute.make_tensor(p.iterator, acc.layout)
    view.store(acc.load().to(dtype))
    return p.load()
