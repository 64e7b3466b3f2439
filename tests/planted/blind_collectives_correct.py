"""Blind outside implementations of three differentiable collectives
(``--impl collectives.<op>=tests.planted.blind_collectives_correct:<attr>``).

Written WITHOUT reading how the suite checks collectives: only from the contract in
``impls/collectives.py`` (the semantics of ``torch.distributed._functional_collectives``,
``group`` last, ``src`` a rank WITHIN the group) and torch's own sources
(``distributed_c10d.py``: ``src`` / ``dst`` of the c10d calls are GLOBAL ranks, converted
here with ``dist.get_global_rank``).

None of them uses torch's functional collectives: each is a ``torch.autograd.Function``
over plain c10d calls (``dist.all_reduce``, ``dist.all_gather``, ``dist.broadcast``) on
contiguous copies, so a non-contiguous or offset input is never sent from its storage.
Half-precision sums are reduced in float32 and rounded once to the input's dtype (at least
as accurate as a reduction in the dtype itself). Min / max gradients (tie-free inputs) go
to the rank holding the extremum: the mask ``x == result`` is local, the cotangent sum is
one more all-reduce that every rank joins, whatever its cotangent.

``CORRECT`` lists them: ``all_reduce`` (sum, avg, min, max), ``reduce_scatter_tensor``
(sum, avg, min, max) and ``broadcast``. The small helpers (``_pg``, ``_reduce``,
``_gather_cat``) are reused by ``tests.planted.blind_collectives`` as the correct base its
faults depart from.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

Tensor = torch.Tensor
HALF = (torch.float16, torch.bfloat16)
_C10D_OP = {"sum": "SUM", "avg": "SUM", "min": "MIN", "max": "MAX", "product": "PRODUCT"}


# --------------------------------------------------------------------------- plumbing


def _pg(group: Any) -> Any:
    """The ProcessGroup meant by ``group``: a ProcessGroup, None (WORLD), a 1-D DeviceMesh
    or a ``(DeviceMesh, dim)`` pair (as the functional collectives accept)."""
    if group is None:
        return dist.group.WORLD
    if isinstance(group, tuple) and len(group) == 2 and hasattr(group[0], "get_group"):
        return group[0].get_group(group[1])
    if hasattr(group, "get_group") and not isinstance(group, dist.ProcessGroup):
        return group.get_group()
    return group


def _size(pg: Any) -> int:
    return dist.get_world_size(pg)


def _rank(pg: Any) -> int:
    """This process's rank WITHIN ``pg``."""
    return dist.get_rank(pg)


def _copy(t: Tensor) -> Tensor:
    """A detached contiguous copy that owns its storage (offset 0)."""
    return t.detach().clone(memory_format=torch.contiguous_format)


def _reduce(t: Tensor, op: str, pg: Any) -> Tensor:
    """All-reduce of a copy of ``t`` over ``pg``: half sums in float32, avg = sum / W."""
    if op not in _C10D_OP:
        raise ValueError(f"unsupported reduceOp {op!r}")
    buf = _copy(t)
    if buf.dtype in HALF and op in ("sum", "avg", "product"):
        buf = buf.float()
    dist.all_reduce(buf, op=getattr(dist.ReduceOp, _C10D_OP[op]), group=pg)
    if op == "avg":
        buf = buf / _size(pg)
    return buf.to(t.dtype)


def _gather_cat(t: Tensor, dim: int, pg: Any) -> Tensor:
    """The group's tensors concatenated on ``dim`` in group-rank order."""
    buf = _copy(t)
    parts = [torch.empty_like(buf) for _ in range(_size(pg))]
    dist.all_gather(parts, buf, group=pg)
    return torch.cat(parts, dim=dim)


def _chunk(t: Tensor, dim: int, k: int, w: int) -> Tensor:
    """Chunk ``k`` of ``w`` equal chunks of ``t`` along ``dim``."""
    n = t.shape[dim]
    if n % w:
        raise ValueError(f"dim {dim} of size {n} does not split into {w} equal chunks")
    return t.narrow(dim, k * (n // w), n // w).contiguous()


# --------------------------------------------------------------------------- all_reduce


class _AllReduce(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, op: str, pg: Any) -> Tensor:
        y = _reduce(x, op, pg)
        ctx.op, ctx.pg = op, pg
        if op in ("min", "max"):
            ctx.save_for_backward(x.detach() == y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, None, None]:
        total = _reduce(g, "sum", ctx.pg)  # every rank joins, zero cotangent or not
        if ctx.op == "avg":
            total = total / _size(ctx.pg)
        elif ctx.op in ("min", "max"):
            (mask,) = ctx.saved_tensors
            total = total * mask
        elif ctx.op == "product":
            raise NotImplementedError("product gradient not implemented")
        return total, None, None


def all_reduce(x: Tensor, reduceOp: str, group: Any) -> Tensor:
    return _AllReduce.apply(x, reduceOp, _pg(group))


# --------------------------------------------------------------------------- reduce_scatter


class _ReduceScatter(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, op: str, dim: int, pg: Any) -> Tensor:
        dim = dim % max(x.dim(), 1)
        full = _reduce(x, op, pg)
        ctx.op, ctx.dim, ctx.pg = op, dim, pg
        if op in ("min", "max"):
            ctx.save_for_backward(x.detach() == full)
        return _chunk(full, dim, _rank(pg), _size(pg))

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, None, None, None]:
        grad = _gather_cat(g, ctx.dim, ctx.pg)  # chunk s of the input feeds rank s's output
        if ctx.op == "avg":
            grad = grad / _size(ctx.pg)
        elif ctx.op in ("min", "max"):
            (mask,) = ctx.saved_tensors
            grad = grad * mask
        elif ctx.op == "product":
            raise NotImplementedError("product gradient not implemented")
        return grad, None, None, None


def reduce_scatter_tensor(x: Tensor, reduceOp: str, scatter_dim: int, group: Any) -> Tensor:
    return _ReduceScatter.apply(x, reduceOp, scatter_dim, _pg(group))


# --------------------------------------------------------------------------- broadcast


class _Broadcast(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, src: int, pg: Any) -> Tensor:
        buf = _copy(x)
        dist.broadcast(buf, src=dist.get_global_rank(pg, src), group=pg)
        ctx.is_src, ctx.pg = _rank(pg) == src, pg
        return buf

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, None, None]:
        total = _reduce(g, "sum", ctx.pg)  # every rank joins; only the source keeps it
        return (total if ctx.is_src else torch.zeros_like(total)), None, None


def broadcast(x: Tensor, src: int, group: Any) -> Tensor:
    return _Broadcast.apply(x, src, _pg(group))


# --------------------------------------------------------------------------- declarations

all_reduce.conformance_features = ["backward", "op.sum", "op.avg", "op.min", "op.max"]
reduce_scatter_tensor.conformance_features = ["backward", "op.sum", "op.avg", "op.min",
                                              "op.max"]
broadcast.conformance_features = ["backward"]

CORRECT = ("all_reduce", "reduce_scatter_tensor", "broadcast")
for _name in CORRECT:
    globals()[_name].conformance_name = f"blind_correct.{_name}"
