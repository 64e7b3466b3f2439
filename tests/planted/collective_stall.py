"""A planted all_reduce that stalls rank 1 once (its first call on a 3 x 4 input, as
test_quiet_ranks has):
under torchrun the stalled case must name rank 1 and later cases must not be failed for
it (``tests/test_torchrun.py``)."""

from __future__ import annotations

import os
import time

import torch.distributed as dist
import torch.distributed._functional_collectives as fc

STALL_S = float(os.environ.get("CONFORMANCE_STALL_S", "8"))
_STALLED: list[bool] = []


def all_reduce_stalls_rank1_once(x, reduceOp, group):
    if dist.get_rank() == 1 and not _STALLED and x.numel() == 12:
        _STALLED.append(True)
        time.sleep(STALL_S)  # the others wait in their all_reduce meanwhile
    return fc.all_reduce(x, reduceOp, group)


all_reduce_stalls_rank1_once.conformance_features = ["backward", "op.sum"]
all_reduce_stalls_rank1_once.conformance_name = "planted.all_reduce_stalls_rank1_once"
