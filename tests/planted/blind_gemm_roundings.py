"""The blind GEMM faults' plumbing and roundings: exact products, TF32 / bfloat16 roundings
and splits, split-K partials (the catalogue and how it was written:
``blind_gemm_faults.py``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

Tensor = torch.Tensor
HALF = (torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------- plumbing


@contextmanager
def _highest() -> Iterator[None]:
    """float32 matmuls in full float32 (no TF32 / bf16x3) for the duration."""
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old)


def _mm(a: Tensor, b: Tensor) -> Tensor:
    """torch.matmul at full precision in the operands' dtype."""
    with _highest():
        return torch.matmul(a, b)


def _exact(a: Tensor, b: Tensor) -> Tensor:
    """The correct product: half inputs accumulated in float32 and rounded once; float32 and
    float64 at their own precision."""
    if a.dtype in HALF:
        return _mm(a.float(), b.float()).to(a.dtype)
    return _mm(a, b)


def _mat(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor, Callable[[Tensor], Tensor]]:
    """1-D operands promoted as torch.matmul does ((k,) -> (1, k) on the left, (k, 1) on the
    right) and a function taking the (..., m, n) result back to torch.matmul's shape."""
    va, vb = a.dim() == 1, b.dim() == 1
    if va:
        a = a.unsqueeze(0)
    if vb:
        b = b.unsqueeze(-1)

    def back(c: Tensor) -> Tensor:
        if vb:
            c = c.squeeze(-1)
        if va:
            c = c.squeeze(-1) if vb else c.squeeze(-2)
        return c

    return a, b, back


def _k(a: Tensor) -> int:
    return a.shape[-1]


def _is_vector_product(a: Tensor, b: Tensor) -> bool:
    """A GEMV-shaped product: an operand is 1-D, or m == 1 or n == 1."""
    return a.dim() == 1 or b.dim() == 1 or a.shape[-2] == 1 or b.shape[-1] == 1


# --------------------------------------------------------------------------- roundings


def _bits(x: Tensor) -> Tensor:
    """float32 -> its bit pattern as a non-negative int64."""
    return x.contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def _from_bits(u: Tensor) -> Tensor:
    u = u & 0xFFFFFFFF
    u = torch.where(u >= 2**31, u - 2**32, u)
    return u.to(torch.int32).view(torch.float32)


def _tf32_rna(x: Tensor) -> Tensor:
    """float32 -> TF32 (10 explicit mantissa bits), round to nearest, ties away from zero:
    PTX ``cvt.rna.tf32.f32``, what CUTLASS / cuBLAS apply to float32 operands."""
    return _from_bits((_bits(x) + 0x1000) & ~0x1FFF)


def _tf32_rz(x: Tensor) -> Tensor:
    """float32 -> TF32 by truncation: what the tensor core does to a raw float32 register (it
    reads the top 19 bits) when the kernel skips the ``cvt``."""
    return _from_bits(_bits(x) & ~0x1FFF)


def _bf16(x: Tensor) -> Tensor:
    """float32 -> bfloat16 (round to nearest even) -> float32."""
    return x.to(torch.bfloat16).float()


def _split_bf16(x: Tensor) -> tuple[Tensor, Tensor]:
    """x ~ hi + lo, both bfloat16 values (as float32): Henry et al.'s bfloat16x3 split."""
    hi = _bf16(x)
    return hi, _bf16(x - hi)


def _split_tf32(x: Tensor) -> tuple[Tensor, Tensor]:
    """CUTLASS 3xTF32: big = tf32(x), small = tf32(x - big)."""
    big = _tf32_rna(x)
    return big, _tf32_rna(x - big)


def _rounded_inputs(a: Tensor, b: Tensor, ra: Callable[[Tensor], Tensor],
                    rb: Callable[[Tensor], Tensor] | None = None) -> Tensor:
    """Operands rounded elementwise (rounding commutes with broadcasting), then an exact
    float32-accumulated product: a tensor-core GEMM with a float32 accumulator."""
    rb = ra if rb is None else rb
    return _mm(ra(a), rb(b))


def _three_term(a: Tensor, b: Tensor, split: Callable[[Tensor], tuple[Tensor, Tensor]],
                terms: str) -> Tensor:
    """sum over ``terms`` (a subset of "hh", "hl", "lh", "ll") of the split products, all in
    ONE accumulator of a's dtype (the products concatenated along K)."""
    a2, b2, back = _mat(a, b)
    ah, al = split(a2)
    bh, bl = split(b2)
    pick = {"h": (ah, bh), "l": (al, bl)}
    lhs = [pick[t[0]][0] for t in terms]
    rhs = [pick[t[1]][1] for t in terms]
    return back(_mm(torch.cat(lhs, dim=-1), torch.cat(rhs, dim=-2)))


def _split_k_partials(a: Tensor, b: Tensor, slices: list[tuple[int, int]],
                      partial_dtype: torch.dtype, reduce_dtype: torch.dtype) -> Tensor:
    """Split-K: each K slice accumulated in float32 and written to the workspace in
    ``partial_dtype``; the partials reduced in order in ``reduce_dtype`` (each addition
    rounded to it); the result rounded to a's dtype."""
    a2, b2, back = _mat(a, b)
    acc = None
    for k0, k1 in slices:
        part = _mm(a2[..., :, k0:k1].float(), b2[..., k0:k1, :].float()).to(partial_dtype)
        acc = part.to(reduce_dtype) if acc is None else (acc.float() + part.float()).to(
            reduce_dtype)
    assert acc is not None
    return back(acc).to(a.dtype)


def _chunks(k: int, width: int) -> list[tuple[int, int]]:
    return [(k0, min(k0 + width, k)) for k0 in range(0, k, width)]


def _even_slices(k: int, n: int) -> list[tuple[int, int]]:
    """n slices of (nearly) equal length, as a split-K kernel cuts K."""
    n = max(1, min(n, k))
    edges = [round(i * k / n) for i in range(n + 1)]
    return [(edges[i], edges[i + 1]) for i in range(n)]
