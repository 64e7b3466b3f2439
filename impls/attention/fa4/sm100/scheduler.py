"""Work decomposition of the sm100 forward: which (Q rows, head, batch) work tile a CTA does.

Schedules (a compile-time option of ``Fa4Sm100Forward``):

- ``single``: one CTA per work tile, grid ``(ceil(Sq / rows), Hq, B)`` (the original kernel).
- ``persistent``: grid ``min(num_sms, tiles)``; CTA ``c`` does work tiles ``c, c + grid,
  c + 2 grid, ...`` (static stride) and keeps its TMEM allocation and pipelines across them.
- ``pingpong`` / ``pingpong_persistent``: the same two, with a work tile of two 128-row Q
  tiles (256 query rows) handled by two softmax warpgroups.

Order of the persistent work tiles (``tile_coords``): longest first (FA4's LPT idea): the Q
tile index runs from the last to the first in the outer position, heads then batches inside.
Under a causal mask the last Q tiles have the most kv tiles, so the heaviest work goes out
first and the short tiles fill in at the end; without a mask all tiles weigh the same and the
order is only a permutation. Which CTA computes a tile never changes its arithmetic.

The SM count is a runtime argument of the launch (the adapter reads
``torch.cuda.get_device_properties(dev).multi_processor_count``). Compiling needs no driver:
``FakeHardwareInfo`` gives constants for the fake compile arguments.
"""

from __future__ import annotations

import cutlass
from cutlass.cute.typing import Int32

SCHEDULES = ("single", "persistent", "pingpong", "pingpong_persistent")
B200_SMS = 148  # SMs of a B200 (sm_100a); only used for compile-time fake arguments


class FakeHardwareInfo:
    """Compile-time stand-in for ``cutlass.utils.HardwareInfo``: constants, no CUDA driver
    call (the real one calls cuDeviceGetCount while tracing, which fails without a GPU)."""

    def __init__(self, sms: int = B200_SMS) -> None:
        self.sms = sms

    def get_device_multiprocessor_count(self) -> int:
        return self.sms

    def get_max_active_clusters(self, cluster_size: int) -> int:
        return self.sms // cluster_size


def is_persistent(schedule: str) -> bool:
    return schedule in ("persistent", "pingpong_persistent")


def is_pingpong(schedule: str) -> bool:
    return schedule in ("pingpong", "pingpong_persistent")


def tile_count(sq: Int32, hq: Int32, b: Int32, rows: int) -> Int32:
    """Number of work tiles of ``rows`` query rows (128 single, 256 ping-pong)."""
    return (sq + rows - 1) // rows * hq * b


def tile_coords(idx: Int32, sq: Int32, hq: Int32, b: Int32, rows: int):
    """Work tile ``idx`` -> (work-tile row block, head, batch), longest first: the row block
    is the slowest index and runs from the last to the first."""
    n_m = (sq + rows - 1) // rows
    per_m = hq * b
    m_rev = idx // per_m
    rest = idx - m_rev * per_m
    head = rest % hq
    return n_m - 1 - m_rev, head, rest // hq


def grid_size(num_sms: Int32, tiles: Int32) -> Int32:
    """Persistent grid: one CTA per SM, never more CTAs than work tiles."""
    return cutlass.min(num_sms, tiles)
