"""Input generators for TopK: value mixes that stress selection (ties, NaN, ±inf, ±0)."""

from __future__ import annotations

import numpy as np
import torch

KINDS = ("random", "ties", "special", "all_equal", "sorted", "reversed")
# ROCm radix select caches a slice in 3 KB of shared memory: 3072 / sizeof(element).
ROCM_SMEM_CAPACITY = {"float64": 384, "int64": 384, "float32": 768, "int32": 768,
                      "float16": 1536, "bfloat16": 1536, "int8": 3072, "uint8": 3072}
ROCM_SWEEP = sorted({c + d for c in (384, 768, 1536, 3072) for d in (-1, 0, 1)})
# (number of slices, slice length) on both sides of CUDA's single/multi-block switch
# (aten/src/ATen/native/cuda/TensorTopK.cu, should_use_multiblock) and long slices.
MULTIBLOCK_SWEEP = [
    (1, 19999), (1, 20000), (20, 20000), (21, 9999), (21, 10000), (41, 8000), (81, 5000),
    (200, 2999), (200, 3000), (800, 799), (800, 800), (4001, 399), (4001, 400), (1, 100001),
]


def _int_range(dtype: torch.dtype) -> tuple[int, int]:
    info = torch.iinfo(dtype)
    return int(info.min), int(info.max)


def make_values(rng: np.random.Generator, shape: tuple[int, ...], dtype: torch.dtype,
                kind: str) -> np.ndarray:
    """float64 (or int64) values of ``kind``; they are rounded to ``dtype`` by the caller."""
    size = int(np.prod(shape)) if shape else 1
    floating = dtype.is_floating_point
    if floating:
        pool = np.array([-2.5, -1.0, -0.0, 0.0, 0.5, 1.0, 3.0])
        special = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1.0])
    else:
        lo, hi = _int_range(dtype)
        pool = np.array([lo, lo + 1, -1 if lo < 0 else 1, 0, 7, hi - 1, hi], dtype=np.int64)
        special = np.array([lo, hi, 0, lo + 1, hi - 1], dtype=np.int64)
    if kind == "random":
        if floating:
            flat = rng.standard_normal(size) * 2.0 ** rng.integers(-4, 5, size)
        else:
            flat = rng.integers(*_int_range(dtype), size=size, endpoint=True)
    elif kind == "ties":
        flat = rng.choice(pool, size)
    elif kind == "special":
        flat = make_values(rng, (size,), dtype, "random")
        mask = rng.random(size) < 0.3
        flat[mask] = rng.choice(special, int(mask.sum()))
    elif kind == "all_equal":
        flat = np.full(size, rng.choice(pool))
    elif kind in ("sorted", "reversed"):
        flat = np.sort(make_values(rng, (size,), dtype, "ties" if size > 64 else "random"))
        flat = flat[::-1] if kind == "reversed" else flat
    else:
        raise ValueError(f"unknown kind {kind!r}")
    return np.asarray(flat).reshape(shape)


# NaN bit patterns per format: quiet and signalling, with the sign bit set (x86's 0/0 gives
# the negative quiet NaN 0xFFC00000 in float32) and with payloads. Conversions from float64
# canonicalise NaNs (bfloat16 loses the sign), so they are written as bits.
NAN_BITS = {
    torch.float16: [0xFE00, 0xFC01, 0xFFFF, 0x7C01, 0x7E2A],
    torch.bfloat16: [0xFFC0, 0xFF81, 0xFFFF, 0x7F81, 0x7FD5],
    torch.float32: [0xFFC00000, 0xFF800001, 0xFFFFFFFF, 0x7F800001, 0x7FC0BEEF],
    torch.float64: [0xFFF8000000000000, 0xFFF0000000000001, 0xFFFFFFFFFFFFFFFF,
                    0x7FF0000000000001, 0x7FF8DEADBEEF0000],
}
_INT_OF = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def nan_variants(dtype: torch.dtype) -> torch.Tensor:
    """Every NaN pattern of NAN_BITS for ``dtype`` (CPU tensor of that dtype)."""
    width = torch.finfo(dtype).bits
    signed = [b - 2 ** width if b >= 2 ** (width - 1) else b for b in NAN_BITS[dtype]]
    return torch.tensor(signed, dtype=_INT_OF[width // 8]).view(dtype)


def diversify_nans(x: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """Replace each NaN of a CPU floating tensor by a random pattern of NAN_BITS."""
    if x.dtype not in NAN_BITS:
        return x
    where = torch.isnan(x)
    count = int(where.sum())
    if count:
        variants = nan_variants(x.dtype)
        x = x.clone()
        x[where] = variants[torch.from_numpy(rng.integers(0, len(variants), count))]
    return x


def make_input(rng: np.random.Generator, shape: tuple[int, ...], dtype: torch.dtype,
               kind: str, device: torch.device) -> torch.Tensor:
    values = make_values(rng, shape, dtype, kind)
    if dtype.is_floating_point:
        x = torch.from_numpy(values.astype(np.float64)).to(dtype)
        return diversify_nans(x, rng).to(device)
    return torch.from_numpy(values.astype(np.int64)).to(dtype).to(device)
