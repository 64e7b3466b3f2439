"""Blind GEMM faults and outside implementations
(``--impl gemm=planted.blind_gemm_faults:<attr>``).

Written WITHOUT reading how the suite checks GEMM: only from the contract
(``docs/contracts.md``, ``gemm``: ``f(a, b)`` behaves as ``torch.matmul(a, b)``, float32
accumulation certified for float16 / bfloat16, the input's own precision for float32 and
float64), torch's documentation of its reduced-precision matmul modes and upstream reports.

Each fault is a precision shortcut a fast kernel or a misconfigured backend takes silently;
everywhere outside its trigger (dtype, K range, shape class) it is the correct product
(``_exact``: torch.matmul at "highest" float32 precision). Shapes follow torch.matmul's rank
rules through ``_mat`` (1-D operands promoted, batch dimensions broadcast by torch.matmul on
the slices), so a fault changes only values, never the output's dtype, shape or device.

Sources (cited in the docstrings):

- torch docs, ``torch.set_float32_matmul_precision`` ("high": TF32 or bfloat16x3, "medium":
  bfloat16) and notes/cuda.rst "TensorFloat-32 (TF32) on Ampere" (``allow_tf32``);
  notes/cuda.rst "Reduced Precision Reduction in FP16 GEMMs" and "Full FP16 Accumulation"
  (``allow_fp16_reduced_precision_reduction``, ``allow_fp16_accumulation``).
- pytorch#53635, #61890, #66212, #67384 (float32 matmul silently in TF32 on Ampere);
  mlx#3860 (fp32 matmul defaulting to TF32 compute); FastNN#10 (cuBLAS handle left in
  ``CUBLAS_TF32_TENSOR_OP_MATH``).
- pytorch#107169 (bfloat16_3x, Henry et al. 2019); CUTLASS 3xTF32 (big/small split).
- pytorch#116870 (fp16 split-K partials truncated to fp16), pytorch#144441 (full fp16
  accumulation), modular#7165 (split-K partials reduced in the output dtype), NVIDIA/Fuser
  #1719 (half-precision split-K work buffer).
- pytorch#83863 / #95125 (CPU bfloat16 reference-path matmul accumulating in bfloat16:
  ones(1024) @ ones(1024) != 1024).

``FAULTS`` lists the faults, ``CORRECT`` the two outside implementations
(``numpy_float64_cast``, ``float32_accumulate``).
"""

from __future__ import annotations

import numpy as np
import torch

from .blind_gemm_roundings import (
    HALF,
    Tensor,
    _bf16,
    _chunks,
    _even_slices,
    _exact,
    _is_vector_product,
    _k,
    _mat,
    _mm,
    _rounded_inputs,
    _split_bf16,
    _split_k_partials,
    _split_tf32,
    _tf32_rna,
    _tf32_rz,
    _three_term,
)

# --------------------------------------------------------------------------- float32: TF32


def tf32_rna(a: Tensor, b: Tensor) -> Tensor:
    """float32: both operands rounded to TF32 (round to nearest, ties away), float32
    accumulation: ``torch.backends.cuda.matmul.allow_tf32 = True`` /
    ``set_float32_matmul_precision("high")`` on Ampere+ (notes/cuda.rst "TF32 on Ampere";
    pytorch#61890, #66212: ~3e-4 relative error where float32 gives ~1e-7)."""
    if a.dtype != torch.float32:
        return _exact(a, b)
    return _rounded_inputs(a, b, _tf32_rna)


def tf32_truncate(a: Tensor, b: Tensor) -> Tensor:
    """float32: both operands truncated to TF32 (the tensor core reading the top 19 bits of
    raw float32 registers: a kernel that drops ``cvt.rna.tf32.f32``); biased toward zero,
    pytorch#53635: 1024.5 * 1 -> 1024 (or 1025) on a 3090."""
    if a.dtype != torch.float32:
        return _exact(a, b)
    return _rounded_inputs(a, b, _tf32_rz)


def tf32_b_truncated(a: Tensor, b: Tensor) -> Tensor:
    """float32: A converted to TF32 with ``cvt.rna`` on its shared-memory path, B fed raw to
    the tensor core (truncated by the hardware): a mixed TF32 kernel (CUTLASS's
    ``kRound`` vs ``kNone`` operand conversion) with one side misconfigured."""
    if a.dtype != torch.float32:
        return _exact(a, b)
    return _rounded_inputs(a, b, _tf32_rna, _tf32_rz)


def tf32_a_only(a: Tensor, b: Tensor) -> Tensor:
    """float32: only A rounded to TF32 (RN), B kept in float32: a mixed-input kernel
    (A in TF32 for the tensor core, B promoted from a float32 weight cache)."""
    if a.dtype != torch.float32:
        return _exact(a, b)
    return _rounded_inputs(a, b, _tf32_rna, lambda x: x)


def tf32_small_k(a: Tensor, b: Tensor) -> Tensor:
    """float32: TF32 (RN) only when K <= 64: a short-K tensor-core kernel picked by the
    heuristic ignoring the handle's math mode (FastNN#10: ``CUBLAS_TF32_TENSOR_OP_MATH``
    left on), full float32 elsewhere. Shows only on small-K problems."""
    if a.dtype != torch.float32 or _k(a) > 64:
        return _exact(a, b)
    return _rounded_inputs(a, b, _tf32_rna)


def tf32_k_ge_64(a: Tensor, b: Tensor) -> Tensor:
    """float32: TF32 (RN) only when K >= 64: the tensor-core path taken once K fills a
    K-tile, a SIMT float32 kernel below (mlx#3860-like silent default on the fast path)."""
    if a.dtype != torch.float32 or _k(a) < 64:
        return _exact(a, b)
    return _rounded_inputs(a, b, _tf32_rna)


def tf32_k_ge_1024(a: Tensor, b: Tensor) -> Tensor:
    """float32: TF32 (RN) only when K >= 1024 (a split-K tensor-core kernel chosen for long
    K), where a float32 forward-error bound is loosest."""
    if a.dtype != torch.float32 or _k(a) < 1024:
        return _exact(a, b)
    return _rounded_inputs(a, b, _tf32_rna)


def tf32_first_ktile(a: Tensor, b: Tensor) -> Tensor:
    """float32: the first K tile (32) computed with TF32 MMA (a peeled prologue instantiated
    with the fast math op), the main loop in float32, one float32 accumulator."""
    if a.dtype != torch.float32:
        return _exact(a, b)
    a2, b2, back = _mat(a, b)
    t = min(32, _k(a2))
    lhs = torch.cat([_tf32_rna(a2[..., :, :t]), a2[..., :, t:]], dim=-1)
    rhs = torch.cat([_tf32_rna(b2[..., :t, :]), b2[..., t:, :]], dim=-2)
    return back(_mm(lhs, rhs))


def tf32_vector(a: Tensor, b: Tensor) -> Tensor:
    """float32: TF32 (RN) on GEMV-shaped products only (an operand 1-D or m == 1 or
    n == 1): the matrix-vector dispatch (pytorch#66212, ``A @ x`` at ~3e-4) going through a
    tensor-core kernel while the GEMM path respects ``allow_tf32 = False``."""
    if a.dtype != torch.float32 or not _is_vector_product(a, b):
        return _exact(a, b)
    return _rounded_inputs(a, b, _tf32_rna)


def tf32_batched(a: Tensor, b: Tensor) -> Tensor:
    """float32: TF32 (RN) only when a batch dimension is present (the strided-batched /
    bmm entry point using a handle whose math mode was set to TF32, the 2-D mm path not)."""
    if a.dtype != torch.float32 or max(a.dim(), b.dim()) < 3:
        return _exact(a, b)
    return _rounded_inputs(a, b, _tf32_rna)


def tf32x3_no_small_small(a: Tensor, b: Tensor) -> Tensor:
    """float32: CUTLASS 3xTF32 "fast accurate" emulation: big*big + big*small + small*big,
    small*small dropped, one float32 accumulator. The split keeps ~22 bits, so each product
    is off by ~2^-21 relative (float32: 2^-24): shows only on operands with the low mantissa
    bits set, and only where K is small enough for the bound to be tight."""
    if a.dtype != torch.float32:
        return _exact(a, b)
    return _three_term(a, b, _split_tf32, ("hh", "hl", "lh"))


def tf32_k_ge_2048(a: Tensor, b: Tensor) -> Tensor:
    """float32: TF32 (RN) only when K >= 2048: the long-K (split-K) tensor-core kernel, the
    regime where TF32's unbiased input rounding (~2^-12 sqrt(K) relative to sum |a b|) hides
    under a worst-case float32 bound that grows like K * 2^-24."""
    if a.dtype != torch.float32 or _k(a) < 2048:
        return _exact(a, b)
    return _rounded_inputs(a, b, _tf32_rna)


def tf32x3_k_ge_16(a: Tensor, b: Tensor) -> Tensor:
    """float32: CUTLASS 3xTF32 (small*small dropped) on the tensor-core path taken once
    K >= 16, exact float32 SIMT below: the emulation's ~2^-21 per-product error only where K
    already contributes a ~K * 2^-24 bound."""
    if a.dtype != torch.float32 or _k(a) < 16:
        return _exact(a, b)
    return tf32x3_no_small_small(a, b)


# --------------------------------------------------------------------------- float32: bfloat16


def bf16_medium(a: Tensor, b: Tensor) -> Tensor:
    """float32: ``set_float32_matmul_precision("medium")``: operands rounded to bfloat16 (8
    mantissa bits), float32 accumulation."""
    if a.dtype != torch.float32:
        return _exact(a, b)
    return _rounded_inputs(a, b, _bf16)


def bf16x3(a: Tensor, b: Tensor) -> Tensor:
    """float32: ``"high"`` via bfloat16x3 (pytorch#107169, Henry et al. 2019): x = hi + lo,
    hi*hi + hi*lo + lo*hi in one float32 accumulator, lo*lo dropped. ~16 mantissa bits."""
    if a.dtype != torch.float32:
        return _exact(a, b)
    return _three_term(a, b, _split_bf16, ("hh", "hl", "lh"))


def bf16x2_no_alo(a: Tensor, b: Tensor) -> Tensor:
    """float32: bfloat16x3 with the lo(A)*hi(B) GEMM missing (an epilogue wiring two of the
    three passes): A effectively in bfloat16, B in ~16 bits."""
    if a.dtype != torch.float32:
        return _exact(a, b)
    return _three_term(a, b, _split_bf16, ("hh", "hl"))


def bf16x6(a: Tensor, b: Tensor) -> Tensor:
    """float32: bfloat16 x3-term split (hi, mid, lo) as in torch's ``"bfx9"``, but only the
    six largest of the nine products kept (mid*lo, lo*mid, lo*lo dropped): ~2^-24 relative
    per product, visible only on operands with all 24 significant bits set."""
    if a.dtype != torch.float32:
        return _exact(a, b)

    def split3(x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        hi = _bf16(x)
        mid = _bf16(x - hi)
        return hi, mid, _bf16(x - hi - mid)

    a2, b2, back = _mat(a, b)
    ah, am, al = split3(a2)
    bh, bm, bl = split3(b2)
    pairs = [(ah, bh), (ah, bm), (am, bh), (ah, bl), (al, bh), (am, bm)]
    lhs = torch.cat([p[0] for p in pairs], dim=-1)
    return back(_mm(lhs, torch.cat([p[1] for p in pairs], dim=-2)))


# --------------------------------------------------------------------------- half inputs


def half_accumulator(a: Tensor, b: Tensor) -> Tensor:
    """float16 / bfloat16: the accumulator in the input dtype, one fused multiply-add per k
    (each step rounded to the half dtype): pytorch#83863 / #95125, the CPU bfloat16
    reference path where ones(1024) @ ones(1024) != 1024; pytorch#144441 "Full FP16
    accumulation"."""
    if a.dtype not in HALF or _k(a) == 0:
        return _exact(a, b)
    a2, b2, back = _mat(a, b)
    af, bf = a2.float(), b2.float()
    acc = None
    for i in range(_k(a2)):
        prod = torch.matmul(af[..., :, i:i + 1], bf[..., i:i + 1, :])  # exact in float32
        acc = prod.to(a.dtype) if acc is None else (acc.float() + prod).to(a.dtype)
    assert acc is not None
    return back(acc)


def half_acc_mma16(a: Tensor, b: Tensor) -> Tensor:
    """float16 / bfloat16: HMMA with a half accumulator register
    (``allow_fp16_accumulation``, pytorch#144441): each 16-wide K step is exact-ish inside
    the instruction (float32 here), the running accumulator rounded to the half dtype."""
    if a.dtype not in HALF or _k(a) == 0:
        return _exact(a, b)
    return _split_k_partials(a, b, _chunks(_k(a), 16), torch.float32, a.dtype)


def half_products(a: Tensor, b: Tensor) -> Tensor:
    """float16 / bfloat16: each product a_ik * b_kj rounded to the half dtype (HMUL) before
    a float32 accumulation (a SIMT kernel that multiplies in half2 and adds in float)."""
    if a.dtype not in HALF or _k(a) == 0:
        return _exact(a, b)
    a2, b2, back = _mat(a, b)
    af, bf = a2.float(), b2.float()
    acc = None
    for k0, k1 in _chunks(_k(a2), 256):
        # (..., m, w, 1) * (..., 1, w, n): products rounded, summed over w in float32
        prod = (af[..., :, k0:k1].unsqueeze(-1) * bf[..., k0:k1, :].unsqueeze(-3)).to(
            a.dtype).float().sum(dim=-2)
        acc = prod if acc is None else acc + prod
    assert acc is not None
    return back(acc).to(a.dtype)


def splitk4_half_partials(a: Tensor, b: Tensor) -> Tensor:
    """float16 / bfloat16, K >= 512: split-K into 4 slices, each float32-accumulated and
    written to the workspace in the half dtype, then reduced in float32
    (``allow_fp16_reduced_precision_reduction`` / ``allow_bf16_...``, notes/cuda.rst;
    pytorch#116870: "a handful of intermediate truncations for the params that require
    split-k"; NVIDIA/Fuser#1719)."""
    if a.dtype not in HALF or _k(a) < 512:
        return _exact(a, b)
    return _split_k_partials(a, b, _even_slices(_k(a), 4), a.dtype, torch.float32)


def splitk4_half_partials_k_ge_4096(a: Tensor, b: Tensor) -> Tensor:
    """float16 / bfloat16: ``splitk4_half_partials`` only when K >= 4096 (the heuristic
    choosing split-K for long K and few output tiles, pytorch#116870)."""
    if a.dtype not in HALF or _k(a) < 4096:
        return _exact(a, b)
    return _split_k_partials(a, b, _even_slices(_k(a), 4), a.dtype, torch.float32)


def half_products_k_ge_2048(a: Tensor, b: Tensor) -> Tensor:
    """float16 / bfloat16: ``half_products`` (HMUL products rounded to the half dtype, float32
    sum) only in a long-K kernel (K >= 2048)."""
    if a.dtype not in HALF or _k(a) < 2048:
        return _exact(a, b)
    return half_products(a, b)


def splitk_half_reduce(a: Tensor, b: Tensor) -> Tensor:
    """float16 / bfloat16, K >= 128: split-K with K slices of 128, partials written in the
    half dtype AND reduced in it (modular#7165: ``split_k_reduction_scheme`` defaulting to
    ``OUTPUT_PRECISION``)."""
    if a.dtype not in HALF or _k(a) < 128:
        return _exact(a, b)
    return _split_k_partials(a, b, _chunks(_k(a), 128), a.dtype, a.dtype)


def half_acc_small_k(a: Tensor, b: Tensor) -> Tensor:
    """float16 / bfloat16, K <= 64: a short dot-product kernel (GEMV / tiny-K) accumulating
    in the input dtype (iree#19347-like f16 x f16 -> f16 lowering), the GEMM path correct."""
    if a.dtype not in HALF or _k(a) > 64:
        return _exact(a, b)
    return half_accumulator(a, b)


def half_acc_bf16_for_fp16(a: Tensor, b: Tensor) -> Tensor:
    """float16: partial sums of 32-wide K tiles (float32 inside) carried between tiles in
    bfloat16 (a kernel instantiated with the bf16 accumulator type of its bf16 sibling):
    8 mantissa bits on the running sum. bfloat16 / float32 / float64 correct."""
    if a.dtype != torch.float16 or _k(a) == 0:
        return _exact(a, b)
    return _split_k_partials(a, b, _chunks(_k(a), 32), torch.float32, torch.bfloat16)


# --------------------------------------------------------------------------- float64


def f64_via_f32(a: Tensor, b: Tensor) -> Tensor:
    """float64: computed in float32 (operands cast down, SGEMM, cast back up): a backend
    without a DGEMM mapping double to the float kernel."""
    if a.dtype != torch.float64:
        return _exact(a, b)
    return _mm(a.float(), b.float()).double()


def f64_gemv_f32(a: Tensor, b: Tensor) -> Tensor:
    """float64: GEMV-shaped products (an operand 1-D, m == 1 or n == 1) through a float32
    matrix-vector kernel (a dispatch table whose double gemv entry points at the float one);
    GEMM shapes correct."""
    if a.dtype != torch.float64 or not _is_vector_product(a, b):
        return _exact(a, b)
    return _mm(a.float(), b.float()).double()


def f64_f32x2_emulated(a: Tensor, b: Tensor) -> Tensor:
    """float64: DGEMM emulated with float32 pieces (x = hi + lo, both float32; hi*hi + hi*lo +
    lo*hi exact in float64, lo*lo dropped): an emulation configured with too few slices
    (cuBLAS FP64 emulation / Ozaki scheme with a short mantissa budget). ~48 bits per
    operand: off by ~2^-47 relative per product where float64 gives 2^-53."""
    if a.dtype != torch.float64:
        return _exact(a, b)

    def split(x: Tensor) -> tuple[Tensor, Tensor]:
        hi = x.float().double()
        return hi, (x - hi).float().double()

    return _three_term(a, b, split, ("hh", "hl", "lh"))


def f64_f32x2_emulated_k_ge_16(a: Tensor, b: Tensor) -> Tensor:
    """float64: ``f64_f32x2_emulated`` only when K >= 16 (an emulated-DGEMM path enabled only
    where it pays off, native DGEMM for short K)."""
    if a.dtype != torch.float64 or _k(a) < 16:
        return _exact(a, b)
    return f64_f32x2_emulated(a, b)


def f64_f32_accumulate(a: Tensor, b: Tensor) -> Tensor:
    """float64: products exact (float64) but the K sum carried in float32 between 64-wide
    K tiles (a double kernel instantiated with a float accumulator)."""
    if a.dtype != torch.float64 or _k(a) == 0:
        return _exact(a, b)
    a2, b2, back = _mat(a, b)
    acc = None
    for k0, k1 in _chunks(_k(a2), 64):
        part = _mm(a2[..., :, k0:k1], b2[..., k0:k1, :])  # float64 inside the tile
        acc = part.float() if acc is None else (acc.double() + part).float()
    assert acc is not None
    return back(acc).double()


# --------------------------------------------------------------------------- correct


def numpy_float64_cast(a: Tensor, b: Tensor) -> Tensor:
    """Correct: numpy's matmul in float64 of the exact inputs (every half / float32 value is
    a float64), cast once to the input dtype."""
    an = a.detach().cpu().double().numpy()
    bn = b.detach().cpu().double().numpy()
    c = np.matmul(an, bn)
    return torch.from_numpy(np.asarray(c, dtype=np.float64)).to(dtype=a.dtype,
                                                                device=a.device)


def float32_accumulate(a: Tensor, b: Tensor) -> Tensor:
    """Correct: half inputs upcast to float32, torch.matmul in float32 (TF32 off), rounded
    once; float32 / float64 through torch.matmul at full precision."""
    return _exact(a, b)


FAULTS = (
    "tf32_rna", "tf32_truncate", "tf32_b_truncated", "tf32_a_only", "tf32_small_k",
    "tf32_k_ge_64", "tf32_k_ge_1024", "tf32_k_ge_2048", "tf32_first_ktile", "tf32_vector",
    "tf32_batched", "tf32x3_no_small_small", "tf32x3_k_ge_16", "bf16_medium", "bf16x3",
    "bf16x2_no_alo", "bf16x6", "half_accumulator", "half_acc_mma16", "half_products",
    "half_products_k_ge_2048", "splitk4_half_partials", "splitk4_half_partials_k_ge_4096",
    "splitk_half_reduce", "half_acc_small_k", "half_acc_bf16_for_fp16", "f64_via_f32",
    "f64_gemv_f32", "f64_f32x2_emulated", "f64_f32x2_emulated_k_ge_16", "f64_f32_accumulate",
)
CORRECT = ("numpy_float64_cast", "float32_accumulate")
for _name in FAULTS + CORRECT:
    _f = globals()[_name]
    _f.conformance_name = _f.__name__
