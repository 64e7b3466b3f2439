"""TopK implementations that break the run rather than a check: a segfault, a hang, a
slow device. Each is ``torch.topk`` until it breaks, and names itself ``torch.topk`` (as a
faulty driver would). The breaking call is the ``BREAK_AT``-th of the process and happens
once per run: the first process to reach it leaves a file in ``$CONFORMANCE_PLANTED_DIR``,
so a replacement worker runs clean (one crash, one hang, a deterministic count)."""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

import torch

BREAK_AT = 30
_calls = {"n": 0}


def _breaks_now(what: str) -> bool:
    _calls["n"] += 1
    if _calls["n"] != BREAK_AT:
        return False
    marker = Path(os.environ["CONFORMANCE_PLANTED_DIR"]) / f"{what}.done"
    try:
        marker.open("x").close()  # exactly one process breaks
    except FileExistsError:
        return False
    return True


def segfault(x, k, dim=-1, largest=True, sorted=True):
    if _breaks_now("segfault"):
        ctypes.string_at(0)  # SIGSEGV: a read of address 0
    return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)


def hang(x, k, dim=-1, largest=True, sorted=True):
    if _breaks_now("hang"):
        time.sleep(10**6)  # a kernel that never returns
    return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)


def slow(x, k, dim=-1, largest=True, sorted=True):
    time.sleep(0.02)
    return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)


def poison(x, k, dim=-1, largest=True, sorted=True):
    """Answers correctly, but leaves its process's device unusable once (a stand-in for a
    sticky CUDA error on a machine without one: the health probe's torch.ones raises)."""
    if _breaks_now("poison"):
        def broken(*args, **kwargs):
            raise RuntimeError("planted: CUDA error: an illegal memory access was encountered")

        torch.ones = broken
    return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)


for _fn in (segfault, hang, slow, poison):
    _fn.conformance_name = "torch.topk"
