"""Planted collective faults (the issue's list), plugged in through
``--impl collectives.<op>=planted.collective_faults:<name>``, and their correct twins.
Each is an autograd Function over the functional collectives, so only the planted step
differs from its twin."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc


def _w(group: Any) -> int:
    return dist.get_world_size(group)


def _r(group: Any) -> int:
    return dist.get_rank(group)


def _wait(t: torch.Tensor) -> torch.Tensor:
    return fc.wait_tensor(t)


class _AllReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, op, group, fault):
        ctx.op, ctx.group, ctx.fault = op, group, fault
        return _wait(fc.all_reduce(x.detach(), op, group)).clone()

    @staticmethod
    def backward(ctx, g):
        if ctx.fault == "unreduced":  # the local cotangent, never summed across ranks
            return g.clone(), None, None, None
        if ctx.fault == "avg_no_scale":  # avg's adjoint without its 1/W
            return _wait(fc.all_reduce(g.contiguous(), "sum", ctx.group)), None, None, None
        return _wait(fc.all_reduce(g.contiguous(), ctx.op, ctx.group)), None, None, None


def unreduced_backward(x, reduceOp, group):
    return _AllReduce.apply(x, reduceOp, group, "unreduced")


def avg_backward_without_1_over_w(x, reduceOp, group):
    return _AllReduce.apply(x, reduceOp, group, "avg_no_scale")


def correct_all_reduce(x, reduceOp, group):
    return _AllReduce.apply(x, reduceOp, group, "")


for _f in (unreduced_backward, avg_backward_without_1_over_w, correct_all_reduce):
    _f.conformance_features = ["backward", "op.sum", "op.avg"]


class _AllGather(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, dim, group, fault):
        ctx.dim, ctx.group, ctx.fault = dim, group, fault
        return _wait(fc.all_gather_tensor(x.detach().contiguous(), dim, group)).clone()

    @staticmethod
    def backward(ctx, g):
        if ctx.fault == "own_slice":  # this rank's block of its own cotangent, unsummed
            own = g.chunk(_w(ctx.group), dim=ctx.dim)[_r(ctx.group)].contiguous()
            return own, None, None, None
        return _wait(fc.reduce_scatter_tensor(g.contiguous(), "sum", ctx.dim, ctx.group)), \
            None, None, None


def gather_backward_own_slice(x, gather_dim, group):
    return _AllGather.apply(x, gather_dim, group, "own_slice")


def correct_all_gather(x, gather_dim, group):
    return _AllGather.apply(x, gather_dim, group, "")


def reduce_scatter_reversed(x, reduceOp, scatter_dim, group):
    """Reduce, then rank r keeps chunk W - 1 - r (the ranks' order reversed)."""
    full = fc.all_reduce(x, reduceOp, group)
    return full.chunk(_w(group), dim=scatter_dim)[_w(group) - 1 - _r(group)]


def correct_reduce_scatter(x, reduceOp, scatter_dim, group):
    full = fc.all_reduce(x, reduceOp, group)
    return full.chunk(_w(group), dim=scatter_dim)[_r(group)]


for _f in (reduce_scatter_reversed, correct_reduce_scatter):
    _f.conformance_features = ["backward", "op.sum"]


class _AllToAll(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, out_splits, in_splits, group, fault):
        ctx.splits, ctx.group, ctx.fault = (out_splits, in_splits), group, fault
        if fault == "even_only":  # ignores the split sizes: right for even splits only
            out_splits = in_splits = None
        return _wait(fc.all_to_all_single(x.detach().contiguous(), out_splits, in_splits,
                                          group)).clone()

    @staticmethod
    def backward(ctx, g):
        out_splits, in_splits = ctx.splits
        if ctx.fault == "same_splits":  # the forward's split sizes, not swapped
            gx = fc.all_to_all_single(g.contiguous(), out_splits, in_splits, ctx.group)
        elif ctx.fault == "even_only":
            gx = fc.all_to_all_single(g.contiguous(), None, None, ctx.group)
        else:
            gx = fc.all_to_all_single(g.contiguous(), in_splits, out_splits, ctx.group)
        return _wait(gx), None, None, None, None


def all_to_all_backward_same_splits(x, output_split_sizes, input_split_sizes, group):
    return _AllToAll.apply(x, output_split_sizes, input_split_sizes, group, "same_splits")


def all_to_all_even_splits_only(x, output_split_sizes, input_split_sizes, group):
    return _AllToAll.apply(x, output_split_sizes, input_split_sizes, group, "even_only")


def correct_all_to_all(x, output_split_sizes, input_split_sizes, group):
    return _AllToAll.apply(x, output_split_sizes, input_split_sizes, group, "")


for _f in (gather_backward_own_slice, correct_all_gather, all_to_all_backward_same_splits,
           all_to_all_even_splits_only, correct_all_to_all):
    _f.conformance_features = ["backward"]


for _name, _f in list(globals().items()):
    if callable(_f) and getattr(_f, "__module__", "") == __name__ and not _name.startswith("_") \
            and not isinstance(_f, type):
        _f.conformance_name = f"planted.{_name}"


# the selection of tests/test_collective_faults.py: world size 3, float32, sum / avg (none for
# the non-reducing collectives)
_COLLECTIVE = "test_collective and w3 and float32 and (sum or avg or none)"
SELFTEST = [  # torch-conformance selftest (conformance/cli/selftest.py)
    *({"area": f"collectives.{area}", "impl": name, "path": "collectives/test_collectives.py",
       "expect": expect, "select": f"planted.{name} and {_COLLECTIVE}"}
      for area, name, expect in (
          ("all_reduce", "unreduced_backward", "killed"),
          ("all_reduce", "avg_backward_without_1_over_w", "killed"),
          ("all_gather_tensor", "gather_backward_own_slice", "killed"),
          ("reduce_scatter_tensor", "reduce_scatter_reversed", "killed"),
          ("all_to_all_single", "all_to_all_backward_same_splits", "killed"),
          ("all_to_all_single", "all_to_all_even_splits_only", "killed"),
          ("all_reduce", "correct_all_reduce", "passes"),
          ("all_gather_tensor", "correct_all_gather", "passes"),
          ("reduce_scatter_tensor", "correct_reduce_scatter", "passes"),
          ("all_to_all_single", "correct_all_to_all", "passes"))),
]
