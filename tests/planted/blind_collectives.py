"""Blind collective faults (``--impl collectives.<op>=tests.planted.blind_collectives:<attr>``).

Written WITHOUT reading how the suite checks collectives: only from the contract in
``impls/collectives.py`` (the semantics of ``torch.distributed._functional_collectives``,
``group`` last and possibly a subgroup of non-adjacent global ranks, ``src`` a rank WITHIN
the group, gradients of sum / avg / min / max), torch's sources (``distributed_c10d.py``:
the c10d ``src`` is a GLOBAL rank; ``nn/functional.py``'s ``_Broadcast``;
``_functional_collectives.py``'s backward formulas) and upstream reports.

Each fault is a small autograd Function over c10d calls that a real engineer could ship: it
is the correct collective (the helpers of ``tests.planted.blind_collectives_correct``:
contiguous copies, half sums in float32, min / max gradients to the extremum's holder)
everywhere outside its trigger, and wrong -- or hung -- inside it. The triggers:

- rank spaces: a group rank used as a global one or the reverse (visible only on a subgroup
  whose group ranks differ from its global ranks, e.g. ranks {1, 3} of 4);
- sizes: a chunked transfer's last chunk (numel > 2**16, odd), a 4 MiB staging buffer
  (per-rank numel > 2**20 float32 elements);
- a zero cotangent on some (not all) ranks; a zero split in an uneven all_to_all;
- dtypes: bfloat16 sent as float16 (range), float16 sent as bfloat16 (mantissa), float32
  buckets compressed to bfloat16;
- layouts: a non-contiguous input read from its storage; coalesced lists (several tensors,
  different scatter dims);
- state: a plan cache keyed by shape and dtype, reused on a group of another size.

Sources (cited in the docstrings): pytorch#130515 (``nn.functional._Broadcast`` compares a
group rank with the global ``src``: zero gradients on subgroups), pytorch#79264 / PR #118593
/ torchrec#4601 (c10d ``src`` / ``dst`` are global ranks, callers pass group ranks),
flash-attention#1244 (an all_reduce whose backward communicates nothing), NVIDIA/nccl#1950
(last elements of the buffer not reduced), jax-ml/jax#40830 (reduce-scatter wrong at the
tail of large chunks), facebookresearch/optimizers#149 and vllm#43547 (ranks without
gradients skip a collective: hangs), pytorch#101380 and facebookresearch/param#25 (zero
split sizes in all_to_all), pytorch#120386 / PR #120582 (nn.functional all_gather mishandling
a non-contiguous buffer), pytorch#65403 (coalesced all_gather implemented by flattening),
ColossalAI#5515 and tenstorrent/tt-metal#48668 (cache keys missing a parameter), torch's
DDP communication hooks documentation (``fp16_compress_hook`` / ``bf16_compress_hook``) and
DeepEP#176 / Megatron-LM#502 (reductions in bfloat16).

``FAULTS`` lists the attributes.
"""

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


FAULTS = (
    "broadcast_src_as_global",
    "broadcast_grad_global_rank",
    "reduce_scatter_global_chunk",
    "all_gather_grad_global_slice",
    "all_reduce_minmax_owner_global",
    "all_reduce_chunked_odd_tail",
    "all_gather_staging_4mib",
    "all_reduce_skip_zero_cotangent",
    "all_reduce_identity_backward",
    "reduce_scatter_minmax_grad_everyone",
    "all_to_all_zero_split_pad",
    "all_gather_storage_view",
    "all_gather_coalesced_flat_layout",
    "reduce_scatter_coalesced_first_dim",
    "all_reduce_bf16_via_fp16",
    "reduce_scatter_fp16_via_bf16",
    "all_reduce_coalesced_bf16_bucket",
    "all_reduce_plan_cache",
)
