"""What the collectives areas run beyond the small WORLD cases, per profile: subgroups,
sizes that cross the transports' thresholds, ranks with zero cotangents, world size 1.

Subgroups (``SUBGROUPS``; global ranks per group, every group running its own case at
once): "mesh", dimension 0 of a 2-D DeviceMesh of shape (2, W/2) (groups {j, j + W/2}:
two or more groups of non-adjacent ranks, made by ``init_device_mesh``); "gap", ranks 0
and W - 1 (the others idle); "skip2", every rank but rank 2 (size W - 1, not adjacent).
The broadcast source is the last rank of each group, whose group rank differs from its
global rank (a rank mix-up shows).

Size classes (``SIZES``; elements per rank's input, odd where it matters, in the "offset"
layout: storage starting one element in): "one" (fewer elements than ranks: empty ring
chunks), "odd-4k" (1031: odd, past a 4 KiB page in float32), "64k" (past 64 KiB:
NCCL's low-latency protocol class ends about there), "1m" (past 1 MiB), "4m" (past
4 MiB, NCCL_BUFFSIZE's default: a transfer in several steps). The parent holds every
rank's inputs and outputs in float64 for the oracle, so the sweep stops at 4 MiB per rank
(docs/areas/collectives.md: the classes, NCCL's thresholds, what is left out).
"""

from __future__ import annotations

SIZES = {"one": 1, "odd-4k": 1031, "64k": 16411, "1m": 262147, "4m": 1048583}
PROFILE_SIZES = {"ci": ("one", "odd-4k", "64k", "1m"),
                 "dev": ("one", "odd-4k", "64k", "1m", "4m"),
                 "thorough": ("one", "odd-4k", "64k", "1m", "4m")}
PROFILE_SIZE_WORLDS = {"ci": (3,), "dev": (2, 3, 4), "thorough": (2, 3, 4, 8)}
PROFILE_SIZE_DTYPES = {"ci": ("float32",), "dev": ("float32", "bfloat16"),
                       "thorough": ("float32", "float16", "bfloat16")}
PROFILE_SUBGROUPS = {"ci": ("mesh",), "dev": ("mesh", "gap", "skip2"),
                     "thorough": ("mesh", "gap", "skip2")}


# thorough on NCCL: each size class again under forced algorithms and protocols (each a
# pool of its own: the environment is part of a pool's key); "default" is NCCL's choice
NCCL_VARIANTS = {
    "default": {},
    "ring-ll": {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"},
    "ring-ll128": {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL128"},
    "ring-simple": {"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"},
    "tree-ll": {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL"},
    "tree-simple": {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"},
}


def transports(backend: str, profile: str) -> tuple[str, ...]:
    """The transport variants test_sizes runs for ``backend`` in ``profile``."""
    return tuple(NCCL_VARIANTS) if backend == "nccl" and profile == "thorough" else \
        ("default",)


def subgroups(kind: str, world: int) -> tuple[tuple[int, ...], ...] | None:
    """The groups of layout ``kind`` at ``world`` ranks (global ranks), or None where the
    layout needs more ranks (or an even count, for the mesh)."""
    if kind == "mesh":
        if world < 4 or world % 2:
            return None
        half = world // 2
        return tuple((j, j + half) for j in range(half))
    if kind == "gap":
        return ((0, world - 1),) if world >= 3 else None
    if kind == "skip2":
        return (tuple(r for r in range(world) if r != 2),) if world >= 4 else None
    raise ValueError(f"unknown subgroup layout {kind!r}")


def size_shape(op: str, elements: int) -> dict[str, int]:
    """``build``'s rows / cols for about ``elements`` per rank's input (one column: the
    count stays odd; all_to_all's uneven splits draw up to ``rows`` + 1 per pair; the
    coalesced ops' two tensors, (rows, 1) and (rows + 1, 2), share the count)."""
    if op.endswith("coalesced"):
        return {"rows": max(1, elements // 3) | 1, "cols": 1, "count": 2}
    return {"rows": elements, "cols": 1}
