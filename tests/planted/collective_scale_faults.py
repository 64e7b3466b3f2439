"""Planted collective faults that only subgroups, large sizes and ranks with zero
cotangents show (issue 43), plugged in through
``--impl collectives.<op>=tests.planted.collective_scale_faults:<name>``, with their correct
twins. Each passed every test of the suite at 1577076 (WORLD only, at most 4 x 5 elements,
random contiguous cotangents on every rank), except all_reduce_backward_skips_zero_grad,
which its test_gradcheck already killed (the ranks not perturbed give zero cotangents)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc

TAIL = 2**16  # elements: the planted transport reduces only this many


class _AllReduceSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, group, fault):
        ctx.group, ctx.fault = group, fault
        y = fc.wait_tensor(fc.all_reduce(x.detach().contiguous(), "sum", group)).clone()
        if fault == "tail" and x.numel() > TAIL:  # past one buffer: this rank's own values
            y.view(-1)[TAIL:] = x.detach().reshape(-1)[TAIL:]
        return y

    @staticmethod
    def backward(ctx, g):
        if ctx.fault == "skip_zero" and not bool(g.any()):  # "nothing to send": the other
            return torch.zeros_like(g), None, None          # ranks wait in their all_reduce
        if ctx.fault == "expanded" and g.dim() and all(st == 0 for st in g.stride()):
            # "a cotangent broadcast from a scalar (y.sum()) is the same on every rank"
            return g * dist.get_world_size(ctx.group), None, None
        return fc.wait_tensor(fc.all_reduce(g.contiguous(), "sum", ctx.group)), None, None


def all_reduce_tail_unreduced_past_64k(x, reduceOp, group):
    """Sums the first 2^16 elements only (a transport that stops after its first buffer)."""
    return _AllReduceSum.apply(x, group, "tail")


def all_reduce_backward_skips_zero_grad(x, reduceOp, group):
    """The backward skips its all_reduce on a rank whose cotangent is all zeros."""
    return _AllReduceSum.apply(x, group, "skip_zero")


def all_reduce_backward_local_for_expanded_grad(x, reduceOp, group):
    """A stride-0 cotangent (what y.sum() gives) is taken as every rank's: W g locally, no
    all_reduce (wrong where ranks differ; the ranks that do reduce wait)."""
    return _AllReduceSum.apply(x, group, "expanded")


def correct_all_reduce_sum(x, reduceOp, group):
    return _AllReduceSum.apply(x, group, "")


def reduce_scatter_global_rank_chunk(x, reduceOp, scatter_dim, group):
    """Keeps chunk (global rank mod W): right on WORLD, wrong on a subgroup."""
    w = dist.get_world_size(group)
    full = fc.all_reduce(x, reduceOp, group)
    return full.chunk(w, dim=scatter_dim)[dist.get_rank() % w]


def correct_reduce_scatter_group_rank(x, reduceOp, scatter_dim, group):
    w = dist.get_world_size(group)
    full = fc.all_reduce(x, reduceOp, group)
    return full.chunk(w, dim=scatter_dim)[dist.get_rank(group)]


def broadcast_src_as_global(x, src, group):
    """Passes the group rank ``src`` to c10d's broadcast, which takes a global rank."""
    out = x.detach().clone().contiguous()
    dist.broadcast(out, src, group=group)
    return out


def correct_broadcast_forward(x, src, group):
    out = x.detach().clone().contiguous()
    dist.broadcast(out, dist.get_global_rank(group, src) if group is not dist.group.WORLD
                   else src, group=group)
    return out


def checked_all_to_all(x, output_split_sizes, input_split_sizes, group):
    """A correct all_to_all_single (forward) that first checks the ranks' split tables
    agree (an all_gather of them) and raises on every rank where they do not."""
    w = dist.get_world_size(group)
    ins = list(input_split_sizes) if input_split_sizes is not None else [x.shape[0] // w] * w
    outs = list(output_split_sizes) if output_split_sizes is not None else \
        [x.shape[0] // w] * w
    mine = torch.tensor([ins, outs], dtype=torch.int64, device=x.device)
    tables = [torch.empty_like(mine) for _ in range(w)]
    dist.all_gather(tables, mine, group=group)
    for r in range(w):
        for s in range(w):  # rank s sends ins_s[r] rows to rank r, which expects outs_r[s]
            if int(tables[s][0][r]) != int(tables[r][1][s]):
                raise ValueError(f"all_to_all_single: rank {s} sends {int(tables[s][0][r])} "
                                 f"rows to rank {r}, which expects {int(tables[r][1][s])}")
    return fc.wait_tensor(fc.all_to_all_single(x.detach().contiguous(), outs, ins, group))


for _f in (all_reduce_tail_unreduced_past_64k, all_reduce_backward_skips_zero_grad,
           all_reduce_backward_local_for_expanded_grad, correct_all_reduce_sum,
           reduce_scatter_global_rank_chunk, correct_reduce_scatter_group_rank):
    _f.conformance_features = ["backward", "op.sum"]
for _f in (broadcast_src_as_global, correct_broadcast_forward, checked_all_to_all):
    _f.conformance_features: list[str] = []  # forward only

_ALL: dict[str, Any] = {n: f for n, f in list(globals().items())
                        if callable(f) and getattr(f, "__module__", "") == __name__
                        and not n.startswith("_") and not isinstance(f, type)}
for _name, _f in _ALL.items():
    _f.conformance_name = f"planted.{_name}"
