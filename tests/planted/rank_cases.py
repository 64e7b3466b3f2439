"""Cases for tests/test_ranks.py: well-behaved collectives and ranks that misbehave (hang,
die, raise, disagree on shapes)."""

from __future__ import annotations

import os
import signal
import time

import torch
import torch.distributed as dist

from conformance.processes import current_rank as here


def rank_sum() -> dict[str, float]:
    """all_reduce(rank + 1) on every rank: W (W + 1) / 2."""
    x = torch.tensor([here.rank() + 1.0])
    dist.all_reduce(x)
    return {"rank": here.rank(), "sum": float(x.item()), "pid": os.getpid()}


def skip_on_rank(skipper: int) -> float:
    """Every rank but ``skipper`` joins an all_reduce: the others hang."""
    x = torch.ones(2)
    if here.rank() != skipper:
        dist.all_reduce(x)
    return float(x.sum())


def die_on_rank(victim: int) -> int:
    """``victim`` dies by SIGSEGV in the middle of a collective the others wait in."""
    if here.rank() == victim:
        os.kill(os.getpid(), signal.SIGSEGV)
    x = torch.ones(2)
    dist.all_reduce(x)
    return here.rank()


def raise_on_rank(victim: int) -> int:
    """``victim`` raises before any collective; the others return: the group is fine."""
    if here.rank() == victim:
        raise ValueError(f"planted error on rank {victim}")
    return here.rank()


def mismatched_shapes() -> float:
    """Ranks all_reduce tensors of different sizes."""
    x = torch.ones(2 + here.rank())
    dist.all_reduce(x)
    return float(x.sum())


def sleep_then_barrier(seconds: float) -> dict[str, float]:
    """When this rank started and left a barrier held ``seconds`` (the concurrency test)."""
    start = time.time()
    time.sleep(seconds)
    dist.barrier()
    return {"start": start, "end": time.time(), "rank": here.rank()}


def raise_then_block(victim: int) -> float:
    """``victim`` raises; the others enter an all_reduce that waits for it forever."""
    if here.rank() == victim:
        raise ValueError(f"planted error on rank {victim}")
    x = torch.ones(2)
    dist.all_reduce(x)
    return float(x.sum())


def return_then_block(victim: int) -> int:
    """``victim`` returns at once; the others enter an all_reduce that waits for it."""
    if here.rank() != victim:
        dist.all_reduce(torch.ones(2))
    return here.rank()


def extra_empty_collective(extra: int) -> float:
    """Rank ``extra`` alone runs an all_reduce of an empty tensor (gloo completes it
    without its peers), then every rank returns: the ranks leave the case out of step."""
    if here.rank() == extra:
        dist.all_reduce(torch.ones(0))
    return float(here.rank())
