"""Wrong GEMM implementations (each a bug seen in real GEMM kernels)."""

from __future__ import annotations

import torch


def fp16_accumulation(a, b):
    """Keeps the accumulator in the input precision between K tiles of 64 (each tile's
    partial product is exact in float32, then added to a float16/bfloat16 accumulator)."""
    if a.dtype not in (torch.float16, torch.bfloat16):
        return torch.matmul(a, b)
    k = a.shape[-1]
    acc = torch.zeros(torch.matmul(a[..., :0], b[..., :0, :]).shape, dtype=a.dtype,
                      device=a.device)
    for s in range(0, k, 64):
        part = torch.matmul(a[..., s:s + 64].float(), b[..., s:s + 64, :].float())
        acc = (acc.float() + part).to(a.dtype)
    return acc


def ignores_strides(a, b):
    """Reads operands as if they were contiguous row-major (ignores their strides)."""
    def as_row_major(t):
        if t.is_contiguous():
            return t
        flat = torch.as_strided(t, (t.numel(),), (1,), t.storage_offset())
        return flat.reshape(t.shape)
    return torch.matmul(as_row_major(a), as_row_major(b))


def drops_last_k(a, b):
    """Loses the last element of the inner dimension (an off-by-one tile bound)."""
    k = a.shape[-1]
    if k <= 1 or b.dim() < 2 or a.dim() < 2:
        return torch.matmul(a, b)
    return torch.matmul(a[..., : k - 1], b[..., : k - 1, :])


def truncating_output(a, b):
    """Accumulates in float32 but converts the result by truncation, not rounding."""
    c = torch.matmul(a.float(), b.float())
    if a.dtype == torch.bfloat16:
        bits = c.view(torch.int32) & ~0xFFFF
        return bits.view(torch.float32).to(torch.bfloat16)
    if a.dtype == torch.float16:
        rounded = c.to(torch.float16)
        too_big = rounded.float().abs() > c.abs()
        return torch.where(too_big, torch.nextafter(rounded, torch.zeros_like(rounded)),
                           rounded)
    return torch.matmul(a, b)


def first_batch_only(a, b):
    """Broadcasts batch 0 of each operand to every batch (a wrong batch stride of 0)."""
    if (a.dim() < 3 and b.dim() < 3) or 0 in a.shape[:-2] or 0 in b.shape[:-2]:
        return torch.matmul(a, b)
    a0 = a[(0,) * (a.dim() - 2)].expand(a.shape) if a.dim() >= 3 else a
    b0 = b[(0,) * (b.dim() - 2)].expand(b.shape) if b.dim() >= 3 else b
    return torch.matmul(a0, b0)


for _fn in (fp16_accumulation, ignores_strides, drops_last_k, truncating_output,
            first_batch_only):
    _fn.conformance_name = f"planted.{_fn.__name__}"


def ragged_split_k(a, b):
    """Split-K over panels of 256 for K > 2048 whose last, partial panel is cut to a
    multiple of 16 (the ragged tail of a long reduction is dropped); exact otherwise."""
    k = a.shape[-1]
    if k <= 2048 or k % 16 == 0 or a.dim() < 2 or b.dim() < 2:
        return torch.matmul(a, b)
    acc = torch.promote_types(a.dtype, torch.float32)  # float32, or float64 for float64
    panels = [torch.matmul(a[..., s:s + 256].to(acc), b[..., s:s + 256, :].to(acc))
              for s in range(0, k - k % 256, 256)]
    tail = k % 256 - k % 16
    if tail:
        s = k - k % 256
        panels.append(torch.matmul(a[..., s:s + tail].to(acc), b[..., s:s + tail, :].to(acc)))
    return torch.stack(panels).sum(0).to(a.dtype)


ragged_split_k.conformance_name = "planted.ragged_split_k"

SELFTEST = [  # torch-conformance selftest (conformance/cli/selftest.py)
    {"area": "gemm", "impl": name, "path": "gemm", "expect": "killed",
     "select": f"planted.{name}"}
    for name in ("fp16_accumulation", "ignores_strides", "drops_last_k", "truncating_output",
                 "first_batch_only", "ragged_split_k")
]
