"""Blind faults that leave the ranks of a process group OUT OF STEP
(``--impl collectives.<op>=tests.planted.blind_collectives_step:<attr>``).

Written blind: only from the contract in ``impls/collectives.py``, the helpers of
``tests.planted.blind_collectives_correct`` and torch's own sources. Every fault returns the
right numbers on every rank, but some rank issues a collective on the group that its peers
do not. The unmatched collective is always an all_reduce of an EMPTY tensor, which gloo
completes on one rank alone: nothing hangs inside the call, the group's sequence numbers
(``pg._get_sequence_number_for_group()``) differ afterwards and the next collective on the
group is the first to suffer. The faults, each with why real code does it:

- ``all_reduce_rank0_nonfinite_report``: a debug report of the result's non-finite entries,
  inside the ``if rank == 0:`` block that does the logging (collectives in rank-0-only
  logging code are a classic).
- ``all_reduce_lazy_init_rank0``: after the first reduction on a group, a one-time
  "register the group" all_reduce in the coordinator's branch of a lazy initialisation.
- ``all_reduce_zero_cotangent_skips_check``: a grad-scaler style overflow check in the
  backward, short-circuited on ranks whose own cotangent is zero ("nothing of ours can
  overflow"): those ranks skip a collective their peers run.
- ``all_reduce_coalesced_minmax_except``: min / max backward computes a statistic with
  ``max()`` that raises on ranks holding no extremum; the ``except`` falls back to a
  tie-aware path with a 'tie count' all_reduce those ranks alone run (as torch 2.15.0's
  coalesced MAX / MIN backward, where only some ranks raise and diverge).
- ``all_reduce_coalesced_drift_report``: ranks whose input differs from the reduced result
  report the drift's non-finite entries; a rank that already held the result (min / max
  won everywhere, or its peers contributed zeros) skips the report.

``correct_all_reduce_with_validation`` is the twin: a shape check, the non-finite report and
the overflow check, all on EVERY rank alike, so the ranks stay in step.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
import torch.distributed as dist

from .blind_collectives_correct import _pg, _rank, _reduce, _size
from .blind_collectives_ranks import _declare

Tensor = torch.Tensor
OPS4 = ["op.sum", "op.avg", "op.min", "op.max"]
_MAX = dist.ReduceOp.MAX


def _grad(op: str, total: Tensor, mask: Tensor | None, pg: Any) -> Tensor:
    """The all_reduce cotangent from the group's summed cotangent ``total``."""
    if op == "avg":
        return total / _size(pg)
    if op in ("min", "max"):
        return total * mask
    if op == "product":
        raise NotImplementedError("product gradient not implemented")
    return total


def _nonfinite_report(t: Tensor, pg: Any) -> None:
    """All-reduce the non-finite entries of ``t`` (empty when all are finite)."""
    bad = t.detach()[~torch.isfinite(t.detach())].float()
    dist.all_reduce(bad, op=_MAX, group=pg)
    if bad.numel():
        print(f"[rank {_rank(pg)}] {bad.numel()} non-finite entries")


# --------------------------------------------------------------------------- all_reduce


class _AllReduce(torch.autograd.Function):
    """The correct all_reduce with hooks: ``pre(x, pg)`` / ``post(y, pg)`` around the
    forward reduction, ``bwd(g, total, pg)`` after the backward one."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, op: str, pg: Any, hooks: dict) -> Tensor:
        if "pre" in hooks:
            hooks["pre"](x, pg)
        y = _reduce(x, op, pg)
        if "post" in hooks:
            hooks["post"](y, pg)
        ctx.op, ctx.pg, ctx.hooks = op, pg, hooks
        ctx.save_for_backward(x.detach() == y if op in ("min", "max") else None)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, None, None, None]:
        total = _reduce(g, "sum", ctx.pg)  # every rank joins, zero cotangent or not
        if "bwd" in ctx.hooks:
            ctx.hooks["bwd"](g, total, ctx.pg)
        return _grad(ctx.op, total, ctx.saved_tensors[0], ctx.pg), None, None, None


def _rank0_report(y: Tensor, pg: Any) -> None:
    if _rank(pg) == 0:  # the logging rank
        _nonfinite_report(y, pg)


@_declare(OPS4)
def all_reduce_rank0_nonfinite_report(x: Tensor, reduceOp: str, group: Any) -> Tensor:
    return _AllReduce.apply(x, reduceOp, _pg(group), {"post": _rank0_report})


_WARMED: weakref.WeakSet = weakref.WeakSet()


def _lazy_init(y: Tensor, pg: Any) -> None:
    if pg not in _WARMED:  # the group works: register it once
        if _rank(pg) == 0:  # the coordinator does the setup
            dist.all_reduce(y.new_empty(0), group=pg)
        _WARMED.add(pg)


@_declare(OPS4)
def all_reduce_lazy_init_rank0(x: Tensor, reduceOp: str, group: Any) -> Tensor:
    return _AllReduce.apply(x, reduceOp, _pg(group), {"post": _lazy_init})


def _overflow_check_unless_zero(g: Tensor, total: Tensor, pg: Any) -> None:
    if g.any():  # a zero cotangent cannot have overflowed: skip the check
        _nonfinite_report(total, pg)


@_declare(OPS4)
def all_reduce_zero_cotangent_skips_check(x: Tensor, reduceOp: str, group: Any) -> Tensor:
    return _AllReduce.apply(x, reduceOp, _pg(group), {"bwd": _overflow_check_unless_zero})


def _shape_check(x: Tensor, pg: Any) -> None:
    shape = torch.tensor([x.dim(), *x.shape, -x.dim(), *(-s for s in x.shape)])
    seen = shape.clone()
    dist.all_reduce(seen, op=_MAX, group=pg)  # max of (shape, -shape): equal iff all agree
    if not torch.equal(seen, shape):
        raise ValueError(f"all_reduce: shapes differ across ranks ({tuple(x.shape)})")


def _every_rank_checks(g: Tensor, total: Tensor, pg: Any) -> None:
    _nonfinite_report(total, pg)


@_declare(OPS4)
def correct_all_reduce_with_validation(x: Tensor, reduceOp: str, group: Any) -> Tensor:
    hooks = {"pre": _shape_check, "post": _nonfinite_report, "bwd": _every_rank_checks}
    return _AllReduce.apply(x, reduceOp, _pg(group), hooks)


# --------------------------------------------------------------------------- coalesced


class _AllReduceCoalesced(torch.autograd.Function):
    """all_reduce of each tensor of a list; ``post(xs, ys, pg)`` after the forward,
    ``grads(totals, masks, op, pg)`` turns the summed cotangents into gradients."""

    @staticmethod
    def forward(ctx: Any, op: str, pg: Any, hooks: dict, *xs: Tensor) -> tuple[Tensor, ...]:
        ys = [_reduce(x, op, pg) for x in xs]
        if "post" in hooks:
            hooks["post"](xs, ys, pg)
        ctx.op, ctx.pg, ctx.hooks = op, pg, hooks
        if op in ("min", "max"):
            ctx.save_for_backward(*(x.detach() == y for x, y in zip(xs, ys, strict=True)))
        return tuple(ys)

    @staticmethod
    def backward(ctx: Any, *gs: Tensor) -> tuple[Tensor | None, ...]:
        totals = [_reduce(g, "sum", ctx.pg) for g in gs]
        masks = list(ctx.saved_tensors) or [None] * len(totals)
        if "grads" in ctx.hooks and ctx.op in ("min", "max"):
            grads = ctx.hooks["grads"](totals, masks, ctx.pg)
        else:
            grads = [_grad(ctx.op, t, m, ctx.pg) for t, m in zip(totals, masks, strict=True)]
        return (None, None, None, *grads)


def _coalesced(xs: list[Tensor], op: str, group: Any, hooks: dict) -> list[Tensor]:
    return list(_AllReduceCoalesced.apply(op, _pg(group), hooks, *xs))


GRAD_PEAKS: list[float] = []  # gradient statistics for the training dashboard


def _grads_with_stats(totals: list[Tensor], masks: list[Tensor], pg: Any) -> list[Tensor]:
    grads = []
    for total, mask in zip(totals, masks, strict=True):
        try:
            GRAD_PEAKS.append(float(total[mask].abs().max()))  # raises if nothing is held
            grads.append(total * mask)
        except RuntimeError:  # "numel() == 0": fall back to the tie-aware path
            ties = mask[mask].to(total.dtype)  # the tie count of the held positions
            dist.all_reduce(ties, group=pg)
            grad = torch.zeros_like(total)
            grad[mask] = total[mask] / ties.clamp(min=1)
            grads.append(grad)
    return grads


@_declare(OPS4)
def all_reduce_coalesced_minmax_except(xs: list[Tensor], reduceOp: str,
                                       group: Any) -> list[Tensor]:
    return _coalesced(xs, reduceOp, group, {"grads": _grads_with_stats})


def _drift_report(xs: tuple[Tensor, ...], ys: list[Tensor], pg: Any) -> None:
    for x, y in zip(xs, ys, strict=True):
        if not torch.equal(x.detach().to(y.dtype), y):  # this rank did not hold the result
            _nonfinite_report(y - x.detach().to(y.dtype), pg)


@_declare(OPS4)
def all_reduce_coalesced_drift_report(xs: list[Tensor], reduceOp: str,
                                      group: Any) -> list[Tensor]:
    return _coalesced(xs, reduceOp, group, {"post": _drift_report})


FAULTS = (
    ("all_reduce", "all_reduce_rank0_nonfinite_report"),
    ("all_reduce", "all_reduce_lazy_init_rank0"),
    ("all_reduce", "all_reduce_zero_cotangent_skips_check"),
    ("all_reduce_coalesced", "all_reduce_coalesced_minmax_except"),
    ("all_reduce_coalesced", "all_reduce_coalesced_drift_report"),
)
TWINS = (("all_reduce", "correct_all_reduce_with_validation"),)

# the selections (ours, chosen after the faults were written): which tests show each fault.
# all_reduce_coalesced_drift_report is not listed: no test of the suite yet draws the inputs
# that trigger it (one rank holding every extremum of a tensor, or the other ranks
# contributing zeros), so it survives (issue 64's note; the argument-space work of issue 60)
_SELECT = {
    "all_reduce_rank0_nonfinite_report": "w3 and float32 and sum",
    "all_reduce_lazy_init_rank0": "w3 and float32 and sum",
    "all_reduce_zero_cotangent_skips_check": "test_quiet_ranks",
    "all_reduce_coalesced_minmax_except": "w3 and float32 and max",
    "correct_all_reduce_with_validation": "(w3 and float32 and (sum or max)) or test_quiet_ranks",
}
SELFTEST = [  # torch-conformance selftest (conformance/cli/selftest.py)
    *({"area": f"collectives.{area}", "impl": name, "path": "collectives/test_collectives.py",
       "expect": expect, "select": f"{name} and ({_SELECT[name]})"}
      for expect, pairs in (("killed", FAULTS), ("passes", TWINS)) for area, name in pairs
      if name in _SELECT),
]
