"""Bounds checking for the Triton interpreter, which does not check loads or stores.

Every tensor a kernel touches lives inside a larger buffer whose guard regions, before and
after it, hold NaN (floats) or a fixed pattern (integers). A load past a tensor's end reads
NaN into the result; a store past it changes a guard, which ``check`` reports by tensor
name. Used on the CPU (interpreter) only.
"""

from __future__ import annotations

import torch

GUARD = 257  # elements on each side: more than one block row of the widest tile


class Guarded:
    def __init__(self) -> None:
        self._buffers: list[tuple[str, torch.Tensor, int]] = []

    def _fill(self, dtype: torch.dtype) -> float | int:
        return float("nan") if dtype.is_floating_point else -12345

    def empty(self, name: str, shape: tuple[int, ...], dtype: torch.dtype,
              device: torch.device) -> torch.Tensor:
        n = 1
        for s in shape:
            n *= s
        buf = torch.full((n + 2 * GUARD,), self._fill(dtype), dtype=dtype, device=device)
        self._buffers.append((name, buf, n))
        return buf[GUARD:GUARD + n].view(shape)

    def copy(self, name: str, t: torch.Tensor) -> torch.Tensor:
        out = self.empty(name, tuple(t.shape), t.dtype, t.device)
        out.copy_(t)
        return out

    def check(self) -> None:
        for name, buf, n in self._buffers:
            for side, region in (("before", buf[:GUARD]), ("after", buf[GUARD + n:])):
                if buf.dtype.is_floating_point:
                    intact = bool(torch.isnan(region).all())
                else:
                    intact = bool((region == self._fill(buf.dtype)).all())
                if not intact:
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
