"""The blind collective faults of layout, staging, wire dtype and caching: all_to_all's
zero splits, storage views, coalesced layouts, bf16/fp16 on the wire, plan caches (the
catalogue: ``blind_collectives.py``)."""

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
from .blind_collectives_ranks import OPS4, Tensor, _declare

# =========================================================================== all_to_all


def _a2a_pad_zero_splits(x: Tensor, out_splits: list[int] | None,
                         in_splits: list[int] | None, pg: Any) -> Tensor:
    """all_to_all along dim 0; zero splits padded with one dummy row (the transport rejects
    empty messages), dummy rows then dropped by truncating the received rows."""
    w = _size(pg)
    xc = _copy(x)
    if in_splits is None:
        in_splits = [xc.shape[0] // w] * w
    if out_splits is None:
        out_splits = [xc.shape[0] // w] * w
    in_splits, out_splits = [int(s) for s in in_splits], [int(s) for s in out_splits]
    pieces, start = [], 0
    for s in in_splits:
        pieces.append(xc[start:start + s] if s else xc.new_zeros((1, *xc.shape[1:])))
        start += s
    send = torch.cat(pieces, 0)
    pad_in = [max(s, 1) for s in in_splits]
    pad_out = [max(s, 1) for s in out_splits]
    recv = xc.new_empty((sum(pad_out), *xc.shape[1:]))
    dist.all_to_all_single(recv, send, pad_out, pad_in, group=pg)
    return recv[:sum(out_splits)].contiguous()  # drops the LAST rows, not the dummy ones


class _A2AZeroSplit(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, out_splits: Any, in_splits: Any, pg: Any) -> Tensor:
        ctx.out_splits, ctx.in_splits, ctx.pg = out_splits, in_splits, pg
        return _a2a_pad_zero_splits(x, out_splits, in_splits, pg)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None, None]:
        return _a2a_pad_zero_splits(g, ctx.in_splits, ctx.out_splits, ctx.pg), None, None, None


@_declare([])
def all_to_all_zero_split_pad(x: Tensor, output_split_sizes: list[int] | None,
                              input_split_sizes: list[int] | None, group: Any) -> Tensor:
    """all_to_all_single: zero splits padded to one dummy row, then the last rows dropped
    instead of the dummies (wrong whenever a zero split is not the last) -- pytorch#101380,
    facebookresearch/param#25."""
    return _A2AZeroSplit.apply(x, output_split_sizes, input_split_sizes, _pg(group))


# =========================================================================== layouts


def _storage_flat(x: Tensor) -> Tensor:
    """numel elements read in memory order from x's storage offset (a 'free' flatten that
    ignores the strides; falls back to a copy when the storage is too short)."""
    x = x.detach()
    n = x.numel()
    avail = x.untyped_storage().nbytes() // x.element_size() - x.storage_offset()
    if avail < n:
        return x.reshape(-1).clone()
    return x.new_empty(0).set_(x.untyped_storage(), x.storage_offset(), (n,), (1,)).clone()


class _AGStorageView(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, dim: int, pg: Any) -> Tensor:
        dim = dim % max(x.dim(), 1)
        ctx.dim, ctx.pg = dim, pg
        flat = _storage_flat(x)
        parts = [torch.empty_like(flat) for _ in range(_size(pg))]
        dist.all_gather(parts, flat, group=pg)
        return torch.cat([p.view(x.shape) for p in parts], dim=dim)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        total = _reduce(g, "sum", ctx.pg)
        return _chunk(total, ctx.dim, _rank(ctx.pg), _size(ctx.pg)), None, None


@_declare([])
def all_gather_storage_view(x: Tensor, gather_dim: int, group: Any) -> Tensor:
    """all_gather_tensor: sends the input as a flat view on its storage (memory order from
    the offset), wrong for transposed / strided inputs -- pytorch#120386, PR #120582."""
    return _AGStorageView.apply(x, gather_dim, _pg(group))


class _AGCoalescedFlat(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, pg: Any, *xs: Tensor) -> tuple[Tensor, ...]:
        ctx.pg = pg
        w = _size(pg)
        flat = torch.cat([_copy(x).reshape(-1) for x in xs])
        gathered = _gather_cat(flat, 0, pg)  # rank-major: [r0: x0 x1 ..][r1: x0 x1 ..]..
        outs, start = [], 0
        for x in xs:  # read back as if tensor-major: [x0: r0 r1 ..][x1: r0 r1 ..]..
            n = x.numel() * w
            outs.append(gathered[start:start + n].view(w * x.shape[0], *x.shape[1:]).clone())
            start += n
        return tuple(outs)

    @staticmethod
    def backward(ctx: Any, *gs: Tensor) -> tuple[Any, ...]:
        w, k = _size(ctx.pg), _rank(ctx.pg)
        return (None, *(_chunk(_reduce(g, "sum", ctx.pg), 0, k, w) for g in gs))


@_declare([])
def all_gather_coalesced_flat_layout(xs: list[Tensor], group: Any) -> list[Tensor]:
    """all_gather_into_tensor_coalesced: gathers one flat bucket and splits it tensor-major
    although it arrives rank-major (wrong with two or more tensors) -- pytorch#65403."""
    return list(_AGCoalescedFlat.apply(_pg(group), *xs))


class _RSCoalescedFirstDim(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, op: str, dims: list[int], pg: Any, *xs: Tensor) -> tuple[Tensor, ...]:
        dim = dims[0]  # one scatter dim for the whole bucket
        ctx.op, ctx.pg = op, pg
        ctx.dims = [dim % max(x.dim(), 1) for x in xs]
        fulls = [_reduce(x, op, pg) for x in xs]
        ctx.save_for_backward(*(x.detach() == f for x, f in zip(xs, fulls, strict=True)))
        return tuple(_chunk(f, d, _rank(pg), _size(pg)) for f, d in
                     zip(fulls, ctx.dims, strict=True))

    @staticmethod
    def backward(ctx: Any, *gs: Tensor) -> tuple[Any, ...]:
        grads = []
        for g, d, mask in zip(gs, ctx.dims, ctx.saved_tensors, strict=True):
            grad = _gather_cat(g, d, ctx.pg)
            if ctx.op == "avg":
                grad = grad / _size(ctx.pg)
            elif ctx.op in ("min", "max"):
                grad = grad * mask
            grads.append(grad)
        return (None, None, None, *grads)


@_declare(OPS4)
def reduce_scatter_coalesced_first_dim(xs: list[Tensor], reduceOp: str,
                                       scatter_dims: list[int], group: Any) -> list[Tensor]:
    """reduce_scatter_tensor_coalesced: scatters every tensor along scatter_dims[0] (the
    per-tensor dims ignored) -- documentation (one scatter dim per tensor)."""
    return list(_RSCoalescedFirstDim.apply(reduceOp, list(scatter_dims), _pg(group), *xs))


# =========================================================================== dtypes


class _ARWireDtype(torch.autograd.Function):
    """All-reduce (sum / avg; min / max exact) whose payload travels as ``wire`` when the
    input has dtype ``when``, summed on the wire and cast back."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, op: str, pg: Any, when: torch.dtype,
                wire: torch.dtype) -> Tensor:
        ctx.op, ctx.pg, ctx.when, ctx.wire = op, pg, when, wire
        y = _ARWireDtype.wire_reduce(x, op, pg, when, wire)
        ctx.save_for_backward(x.detach() == y)
        return y

    @staticmethod
    def wire_reduce(t: Tensor, op: str, pg: Any, when: torch.dtype, wire: torch.dtype) -> Tensor:
        if t.dtype != when or op not in ("sum", "avg"):
            return _reduce(t, op, pg)
        buf = _copy(t).to(wire)
        dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=pg)
        if op == "avg":
            buf = buf / _size(pg)
        return buf.to(t.dtype)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Any, ...]:
        total = _ARWireDtype.wire_reduce(g, "sum", ctx.pg, ctx.when, ctx.wire)
        if ctx.op == "avg":
            total = total / _size(ctx.pg)
        elif ctx.op in ("min", "max"):
            total = total * ctx.saved_tensors[0]
        return total, None, None, None, None


@_declare(OPS4)
def all_reduce_bf16_via_fp16(x: Tensor, reduceOp: str, group: Any) -> Tensor:
    """all_reduce: bfloat16 sums sent and summed as float16 (inf above 65504, tiny values
    flushed) -- documentation (fp16_compress_hook; torch.finfo ranges)."""
    return _ARWireDtype.apply(x, reduceOp, _pg(group), torch.bfloat16, torch.float16)


class _RSFp16ViaBf16(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, op: str, dim: int, pg: Any) -> Tensor:
        dim = dim % max(x.dim(), 1)
        ctx.op, ctx.dim, ctx.pg = op, dim, pg
        full = _ARWireDtype.wire_reduce(x, op, pg, torch.float16, torch.bfloat16)
        ctx.save_for_backward(x.detach() == full)
        return _chunk(full, dim, _rank(pg), _size(pg))

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None, None]:
        grad = _gather_cat(g, ctx.dim, ctx.pg)
        if ctx.op == "avg":
            grad = grad / _size(ctx.pg)
        elif ctx.op in ("min", "max"):
            grad = grad * ctx.saved_tensors[0]
        return grad, None, None, None


@_declare(OPS4)
def reduce_scatter_fp16_via_bf16(x: Tensor, reduceOp: str, scatter_dim: int,
                                 group: Any) -> Tensor:
    """reduce_scatter_tensor: float16 sums sent and summed as bfloat16 ("safer range", 3
    mantissa bits lost) -- documentation (bf16_compress_hook), DeepEP#176."""
    return _RSFp16ViaBf16.apply(x, reduceOp, scatter_dim, _pg(group))


class _ARCoalescedBf16Bucket(torch.autograd.Function):
    @staticmethod
    def bucket_reduce(ts: tuple[Tensor, ...], pg: Any) -> list[Tensor]:
        flat = torch.cat([_copy(t).reshape(-1) for t in ts])
        if flat.dtype in (torch.float32, torch.float64):
            wire = flat.to(torch.bfloat16)  # the bucket compressed for the wire
            dist.all_reduce(wire, op=dist.ReduceOp.SUM, group=pg)
            flat = wire.to(flat.dtype)
        else:
            flat = _reduce(flat, "sum", pg)
        outs, start = [], 0
        for t in ts:
            outs.append(flat[start:start + t.numel()].view(t.shape).clone())
            start += t.numel()
        return outs

    @staticmethod
    def forward(ctx: Any, op: str, pg: Any, *xs: Tensor) -> tuple[Tensor, ...]:
        ctx.op, ctx.pg = op, pg
        if op not in ("sum", "avg") or len({x.dtype for x in xs}) > 1:
            return tuple(_reduce(x, op, pg) for x in xs)
        outs = _ARCoalescedBf16Bucket.bucket_reduce(xs, pg)
        return tuple(o / _size(pg) if op == "avg" else o for o in outs)

    @staticmethod
    def backward(ctx: Any, *gs: Tensor) -> tuple[Any, ...]:
        if len({g.dtype for g in gs}) > 1:
            outs = [_reduce(g, "sum", ctx.pg) for g in gs]
        else:
            outs = _ARCoalescedBf16Bucket.bucket_reduce(gs, ctx.pg)
        if ctx.op == "avg":
            outs = [o / _size(ctx.pg) for o in outs]
        return (None, None, *outs)


@_declare(["op.sum", "op.avg"])
def all_reduce_coalesced_bf16_bucket(xs: list[Tensor], reduceOp: str,
                                     group: Any) -> list[Tensor]:
    """all_reduce_coalesced: float32/float64 tensors flattened into one bucket sent and
    summed in bfloat16 -- documentation (DDP bf16_compress_hook applied unasked)."""
    return list(_ARCoalescedBf16Bucket.apply(reduceOp, _pg(group), *xs))


# =========================================================================== state

_PLANS: dict[tuple[Any, ...], dict[str, Any]] = {}


def _plan(t: Tensor, pg: Any) -> dict[str, Any]:
    """A per-(shape, dtype) plan: the avg scale and the scratch layout, computed once."""
    key = (tuple(t.shape), t.dtype)  # the group is not part of the key
    if key not in _PLANS:
        _PLANS[key] = {"scale": 1.0 / _size(pg), "numel": t.numel()}
    return _PLANS[key]


class _ARPlanCache(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, op: str, pg: Any) -> Tensor:
        ctx.op, ctx.pg = op, pg
        ctx.scale = _plan(x, pg)["scale"]
        y = _reduce(x, "sum", pg) * ctx.scale if op == "avg" else _reduce(x, op, pg)
        ctx.save_for_backward(x.detach() == y)
        return y

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None, None]:
        total = _reduce(g, "sum", ctx.pg)
        if ctx.op == "avg":
            total = total * ctx.scale
        elif ctx.op in ("min", "max"):
            total = total * ctx.saved_tensors[0]
        return total, None, None


@_declare(OPS4)
def all_reduce_plan_cache(x: Tensor, reduceOp: str, group: Any) -> Tensor:
    """all_reduce: a module-level plan cache keyed by (shape, dtype) only keeps the first
    group's 1/W for avg, reused on a group of another size -- ColossalAI#5515,
    tenstorrent/tt-metal#48668 (cache keys missing a parameter)."""
    return _ARPlanCache.apply(x, reduceOp, _pg(group))
