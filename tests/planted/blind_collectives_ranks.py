"""The blind collective faults in which ranks, chunks and gradients go: global ranks for
group ranks, odd tails, skipped or identity backwards (the catalogue and how it was
written: ``blind_collectives.py``)."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from .blind_collectives_correct import (
    _chunk,
    _copy,
    _gather_cat,
    _pg,
    _rank,
    _reduce,
    _size,
)

Tensor = torch.Tensor
OPS4 = ["op.sum", "op.avg", "op.min", "op.max"]


def _declare(features: list[str]) -> Any:
    def wrap(fn: Any) -> Any:
        fn.conformance_name = fn.__name__
        fn.conformance_features = ["backward", *features]
        return fn

    return wrap


def _ar_grad(ctx: Any, g: Tensor, x_eq_y: Tensor | None) -> Tensor:
    """The correct all_reduce cotangent: Σ g over the group (every rank joins), / W for
    avg, masked to the extremum's holder for min / max."""
    total = _reduce(g, "sum", ctx.pg)
    if ctx.op == "avg":
        total = total / _size(ctx.pg)
    elif ctx.op in ("min", "max"):
        total = total * x_eq_y
    return total


# =========================================================================== rank spaces


class _BcastSrcAsGlobal(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, src: int, pg: Any) -> Tensor:
        buf = _copy(x)
        dist.broadcast(buf, src=src, group=pg)  # src is a GROUP rank; c10d wants a global one
        ctx.is_src, ctx.pg = dist.get_rank() == src, pg
        return buf

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        total = _reduce(g, "sum", ctx.pg)
        return (total if ctx.is_src else torch.zeros_like(total)), None, None


@_declare([])
def broadcast_src_as_global(x: Tensor, src: int, group: Any) -> Tensor:
    """broadcast: the group-rank ``src`` passed straight to dist.broadcast, which takes a
    global rank (wrong source or 'not part of group' on a subgroup) -- pytorch#79264,
    PR #118593, torchrec#4601."""
    return _BcastSrcAsGlobal.apply(x, src, _pg(group))


class _BcastGradGlobalRank(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, src: int, pg: Any) -> Tensor:
        buf = _copy(x)
        dist.broadcast(buf, src=dist.get_global_rank(pg, src), group=pg)
        ctx.src, ctx.pg = src, pg
        return buf

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        total = _reduce(g, "sum", ctx.pg)
        keep = dist.get_rank() == ctx.src  # global rank compared with the group-rank src
        return (total if keep else torch.zeros_like(total)), None, None


@_declare([])
def broadcast_grad_global_rank(x: Tensor, src: int, group: Any) -> Tensor:
    """broadcast: forward right, backward keeps the gradient where the GLOBAL rank equals
    the group-rank src (zero or misplaced gradients on a subgroup) -- pytorch#130515."""
    return _BcastGradGlobalRank.apply(x, src, _pg(group))


class _RSGlobalChunk(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, op: str, dim: int, pg: Any) -> Tensor:
        dim = dim % max(x.dim(), 1)
        full = _reduce(x, op, pg)
        ctx.op, ctx.dim, ctx.pg = op, dim, pg
        ctx.save_for_backward(x.detach() == full)
        w = _size(pg)
        return _chunk(full, dim, dist.get_rank() % w, w)  # global rank picks the chunk

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None, None]:
        grad = _gather_cat(g, ctx.dim, ctx.pg)
        if ctx.op == "avg":
            grad = grad / _size(ctx.pg)
        elif ctx.op in ("min", "max"):
            grad = grad * ctx.saved_tensors[0]
        return grad, None, None, None


@_declare(OPS4)
def reduce_scatter_global_chunk(x: Tensor, reduceOp: str, scatter_dim: int,
                                group: Any) -> Tensor:
    """reduce_scatter_tensor: keeps chunk (global rank mod W) instead of chunk (group rank)
    -- rank-space mix-up as in pytorch#79264 / torchrec#4601."""
    return _RSGlobalChunk.apply(x, reduceOp, scatter_dim, _pg(group))


class _AGGradGlobalSlice(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, dim: int, pg: Any) -> Tensor:
        dim = dim % max(x.dim(), 1)
        ctx.dim, ctx.pg = dim, pg
        return _gather_cat(x, dim, pg)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        total = _reduce(g, "sum", ctx.pg)
        w = _size(ctx.pg)
        return _chunk(total, ctx.dim, dist.get_rank() % w, w), None, None  # global rank


@_declare([])
def all_gather_grad_global_slice(x: Tensor, gather_dim: int, group: Any) -> Tensor:
    """all_gather_tensor: backward returns the slice of the global rank (mod W), not of the
    group rank -- the rank-space mix-up of pytorch#130515."""
    return _AGGradGlobalSlice.apply(x, gather_dim, _pg(group))


class _ARMinMaxOwnerGlobal(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, op: str, pg: Any) -> Tensor:
        ctx.op, ctx.pg = op, pg
        if op in ("min", "max"):  # who holds the extremum, as a group index per element
            stacked = _gather_cat(x.unsqueeze(0), 0, pg)
            owner = (stacked.argmin(0) if op == "min" else stacked.argmax(0))
            ctx.save_for_backward(owner == dist.get_rank())  # global rank vs group index
            return stacked.amin(0) if op == "min" else stacked.amax(0)
        return _reduce(x, op, pg)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        mask = ctx.saved_tensors[0] if ctx.op in ("min", "max") else None
        return _ar_grad(ctx, g, mask), None, None


@_declare(OPS4)
def all_reduce_minmax_owner_global(x: Tensor, reduceOp: str, group: Any) -> Tensor:
    """all_reduce: min/max gradient routed to the rank whose GLOBAL rank equals the owner's
    group index (wrong rank on a subgroup) -- pytorch#130515's rank-space mix-up."""
    return _ARMinMaxOwnerGlobal.apply(x, reduceOp, _pg(group))


# =========================================================================== sizes

_CHUNK = 1 << 16


def _reduce_chunked_pairs(t: Tensor, op: str, pg: Any) -> Tensor:
    """All-reduce in 2**16-element chunks; the last partial chunk is sent in element pairs
    (a half2-style packed wire), so an odd count's last element is never reduced."""
    flat = _copy(t).reshape(-1)
    n = flat.numel()
    if n <= _CHUNK:
        return _reduce(t, op, pg)
    out = flat.clone()
    for start in range(0, n, _CHUNK):
        stop = min(start + _CHUNK, n)
        if stop - start < _CHUNK:
            stop = start + ((stop - start) & ~1)  # pairs only: drops the odd element
        if stop > start:
            out[start:stop] = _reduce(flat[start:stop], op, pg)
    return out.view(t.shape)


class _ARChunkedOddTail(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, op: str, pg: Any) -> Tensor:
        y = _reduce_chunked_pairs(x, op, pg)
        ctx.op, ctx.pg = op, pg
        ctx.save_for_backward(x.detach() == y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        total = _reduce_chunked_pairs(g, "sum", ctx.pg)
        if ctx.op == "avg":
            total = total / _size(ctx.pg)
        elif ctx.op in ("min", "max"):
            total = total * ctx.saved_tensors[0]
        return total, None, None


@_declare(OPS4)
def all_reduce_chunked_odd_tail(x: Tensor, reduceOp: str, group: Any) -> Tensor:
    """all_reduce: above 2**16 elements a chunked transfer sends the last chunk in pairs, so
    an odd count's last element keeps the local value -- NVIDIA/nccl#1950 (tail elements
    not reduced)."""
    return _ARChunkedOddTail.apply(x, reduceOp, _pg(group))


_STAGING_BYTES = 4 << 20  # 4 MiB: 2**20 float32 elements


class _AGStaging(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, dim: int, pg: Any) -> Tensor:
        dim = dim % max(x.dim(), 1)
        ctx.dim, ctx.pg = dim, pg
        flat = _copy(x).reshape(-1)
        cap = _STAGING_BYTES // flat.element_size()
        staged = torch.zeros_like(flat)
        staged[:cap] = flat[:cap]  # only what fits the staging buffer is sent
        parts = [torch.empty_like(staged) for _ in range(_size(pg))]
        dist.all_gather(parts, staged, group=pg)
        return torch.cat([p.view(x.shape) for p in parts], dim=dim)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        total = _reduce(g, "sum", ctx.pg)
        return _chunk(total, ctx.dim, _rank(ctx.pg), _size(ctx.pg)), None, None


@_declare([])
def all_gather_staging_4mib(x: Tensor, gather_dim: int, group: Any) -> Tensor:
    """all_gather_tensor: each rank's piece goes through a 4 MiB staging buffer; the elements
    past it (2**20 float32) arrive as zeros -- jax-ml/jax#40830, NVIDIA/nccl#1950."""
    return _AGStaging.apply(x, gather_dim, _pg(group))


# =========================================================================== zero cotangent


class _ARSkipZero(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, op: str, pg: Any) -> Tensor:
        y = _reduce(x, op, pg)
        ctx.op, ctx.pg = op, pg
        ctx.save_for_backward(x.detach() == y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        if not bool(g.any()):  # "nothing to send": the other ranks wait in all_reduce forever
            return torch.zeros_like(g), None, None
        mask = ctx.saved_tensors[0] if ctx.op in ("min", "max") else None
        return _ar_grad(ctx, g, mask), None, None


@_declare(OPS4)
def all_reduce_skip_zero_cotangent(x: Tensor, reduceOp: str, group: Any) -> Tensor:
    """all_reduce: backward skips its collective when the local cotangent is all zeros, so
    the other ranks hang -- facebookresearch/optimizers#149, vllm#43547."""
    return _ARSkipZero.apply(x, reduceOp, _pg(group))


# =========================================================================== reductions


class _ARIdentityBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, op: str, pg: Any) -> Tensor:
        return _reduce(x, op, pg)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        return g.clone(), None, None  # "the gradient is already reduced": no communication


@_declare(["op.sum"])
def all_reduce_identity_backward(x: Tensor, reduceOp: str, group: Any) -> Tensor:
    """all_reduce (sum): backward passes the local cotangent through without the all-reduce
    -- flash-attention#1244 (an all_reduce with a communication-free backward)."""
    return _ARIdentityBackward.apply(x, reduceOp, _pg(group))


class _RSMinMaxEveryone(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, op: str, dim: int, pg: Any) -> Tensor:
        dim = dim % max(x.dim(), 1)
        ctx.op, ctx.dim, ctx.pg = op, dim, pg
        return _chunk(_reduce(x, op, pg), dim, _rank(pg), _size(pg))

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None, None]:
        grad = _gather_cat(g, ctx.dim, ctx.pg)  # sum's rule used for min / max too
        if ctx.op == "avg":
            grad = grad / _size(ctx.pg)
        return grad, None, None, None


@_declare(OPS4)
def reduce_scatter_minmax_grad_everyone(x: Tensor, reduceOp: str, scatter_dim: int,
                                        group: Any) -> Tensor:
    """reduce_scatter_tensor: min/max backward gathers the cotangents to EVERY rank (sum's
    rule, no extremum mask) -- documentation (_functional_collectives.py: the backward is
    derived for sum only)."""
    return _RSMinMaxEveryone.apply(x, reduceOp, scatter_dim, _pg(group))
