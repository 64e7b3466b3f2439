"""Bounds checking for the Triton interpreter, which does not check loads or stores.

Every tensor a kernel touches lives inside a larger buffer whose guard regions, before and
after it, hold a NaN with a payload unique to the buffer (floats) or a fixed pattern
(integers). A load past a tensor's end reads
NaN into the result; a store past it changes a guard, which ``check`` reports by tensor
name. Used on the CPU (interpreter) only.
"""

from __future__ import annotations

import torch

GUARD = 257  # elements on each side: more than one block row of the widest tile


_INT_VIEW = {torch.float16: (torch.int16, 0x7E00), torch.bfloat16: (torch.int16, 0x7FC0),
             torch.float32: (torch.int32, 0x7FC00000),
             torch.float64: (torch.int64, 0x7FF8000000000000)}


class Guarded:
    """Tensors in guarded buffers. Float guards hold a quiet NaN whose payload is unique to
    the buffer, so a store that copies another tensor's guard (or any value) is seen."""

    def __init__(self) -> None:
        self._buffers: list[tuple[str, torch.Tensor, int, int]] = []

    def _pattern(self, dtype: torch.dtype) -> int:
        base = _INT_VIEW[dtype][1] if dtype in _INT_VIEW else -12345
        return base + 1 + len(self._buffers) % 61

    def empty(self, name: str, shape: tuple[int, ...], dtype: torch.dtype,
              device: torch.device) -> torch.Tensor:
        n = 1
        for s in shape:
            n *= s
        pattern = self._pattern(dtype)
        view = _INT_VIEW.get(dtype, (dtype, 0))[0]
        buf = torch.full((n + 2 * GUARD,), pattern, dtype=view, device=device).view(dtype)
        self._buffers.append((name, buf, n, pattern))
        return buf[GUARD:GUARD + n].view(shape)

    def copy(self, name: str, t: torch.Tensor) -> torch.Tensor:
        out = self.empty(name, tuple(t.shape), t.dtype, t.device)
        out.copy_(t)
        return out

    def check(self) -> None:
        for name, buf, n, pattern in self._buffers:
            bits = buf.view(_INT_VIEW.get(buf.dtype, (buf.dtype, 0))[0])
            for side, region in (("before", bits[:GUARD]), ("after", bits[GUARD + n:])):
                if not bool((region == pattern).all()):
                    raise AssertionError(f"out-of-bounds store: the guard region {side} "
                                         f"tensor {name!r} was written")


class Unguarded(Guarded):
    """The same interface without guards (GPU runs)."""

    def empty(self, name, shape, dtype, device):
        return torch.empty(shape, dtype=dtype, device=device)

    def copy(self, name, t):
        return t.contiguous()

    def check(self) -> None:
        return None
