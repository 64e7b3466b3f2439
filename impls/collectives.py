"""Collective implementations: torch's functional collectives and the older
``torch.distributed.nn.functional`` API, as the areas ``collectives.<op>`` call them.

Contract (``--impl collectives.<op>=module:attr``): a callable with the signature and the
semantics of ``torch.distributed._functional_collectives.<op>``, taking ``group`` last
(the case passes the process group of its ranks), differentiable where the area's
``backward`` feature is claimed:

- ``all_reduce(x, reduceOp, group)``; ``reduceOp`` in "sum", "avg", "min", "max", "product"
- ``all_gather_tensor(x, gather_dim, group)``: the ranks' tensors concatenated on gather_dim
- ``reduce_scatter_tensor(x, reduceOp, scatter_dim, group)``: reduce, then rank r keeps
  chunk r (of W equal chunks) along scatter_dim
- ``all_to_all_single(x, output_split_sizes, input_split_sizes, group)``: along dim 0;
  ``None`` splits mean equal ones
- ``all_reduce_coalesced(xs, reduceOp, group)``, ``all_gather_into_tensor_coalesced(xs,
  group)`` (dim 0), ``reduce_scatter_tensor_coalesced(xs, reduceOp, scatter_dims, group)``:
  lists in, lists out
- ``broadcast(x, src, group)``: ``src`` is the source's rank in ``group`` (as the functional
  collectives take it; ``torch.distributed.broadcast`` takes a global rank)

``group`` may be a subgroup of non-adjacent ranks or a DeviceMesh dimension's group: ranks,
chunks and sources are the group's, never the global ones. Inputs run from one element to
megabytes (odd counts, offset storage); some ranks' cotangents may be zero (each rank still
runs its backward).

The functional collectives return tensors that wait on first use; an implementation may
return plain tensors. Declared features (``conformance_features``): ``op.<reduceOp>``,
``backward`` (autograd through it), ``double_backward`` (its backward is differentiable:
``create_graph=True`` gives a gradient that autograd can differentiate again), ``complex``
(complex64 inputs: sum / avg and the moves), ``compile``
(``torch.compile(fullgraph=True)`` traces it).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as fc

REDUCE_OPS = ("sum", "avg", "min", "max", "product")
_ALL = ["backward", "double_backward", "complex", "compile",
        *(f"op.{op}" for op in REDUCE_OPS)]


def _declare(fn: Any, name: str, features: list[str]) -> Any:
    fn.conformance_name = name
    fn.conformance_features = features
    return fn


def all_reduce(x: torch.Tensor, reduceOp: str, group: Any) -> torch.Tensor:
    return fc.all_reduce(x, reduceOp, group)


def all_gather_tensor(x: torch.Tensor, gather_dim: int, group: Any) -> torch.Tensor:
    return fc.all_gather_tensor(x, gather_dim, group)


def reduce_scatter_tensor(x: torch.Tensor, reduceOp: str, scatter_dim: int,
                          group: Any) -> torch.Tensor:
    return fc.reduce_scatter_tensor(x, reduceOp, scatter_dim, group)


def all_to_all_single(x: torch.Tensor, output_split_sizes: list[int] | None,
                      input_split_sizes: list[int] | None, group: Any) -> torch.Tensor:
    return fc.all_to_all_single(x, output_split_sizes, input_split_sizes, group)


def all_reduce_coalesced(xs: list[torch.Tensor], reduceOp: str,
                         group: Any) -> list[torch.Tensor]:
    return fc.all_reduce_coalesced(xs, reduceOp, group)


def all_gather_into_tensor_coalesced(xs: list[torch.Tensor], group: Any) -> list[torch.Tensor]:
    return fc.all_gather_into_tensor_coalesced(xs, group)


def reduce_scatter_tensor_coalesced(xs: list[torch.Tensor], reduceOp: str,
                                    scatter_dims: list[int], group: Any) -> list[torch.Tensor]:
    return fc.reduce_scatter_tensor_coalesced(xs, reduceOp, scatter_dims, group)


def broadcast(x: torch.Tensor, src: int, group: Any) -> torch.Tensor:
    return fc.broadcast(x, src, group)


for _fn in (all_reduce, all_gather_tensor, reduce_scatter_tensor, all_to_all_single,
            all_reduce_coalesced, all_gather_into_tensor_coalesced,
            reduce_scatter_tensor_coalesced, broadcast):
    _declare(_fn, f"functional.{_fn.__name__}", _ALL)


# the older API (torch.distributed.nn.functional): autograd Functions over c10d calls
def _legacy_op(name: str) -> Any:
    return {"sum": dist.ReduceOp.SUM, "avg": dist.ReduceOp.AVG, "min": dist.ReduceOp.MIN,
            "max": dist.ReduceOp.MAX, "product": dist.ReduceOp.PRODUCT}[name]


def nn_all_reduce(x: torch.Tensor, reduceOp: str, group: Any) -> torch.Tensor:
    from torch.distributed.nn import functional as nnf

    return nnf.all_reduce(x, op=_legacy_op(reduceOp), group=group)


def nn_all_gather_tensor(x: torch.Tensor, gather_dim: int, group: Any) -> torch.Tensor:
    from torch.distributed.nn import functional as nnf

    return torch.cat(nnf.all_gather(x, group=group), dim=gather_dim)


def nn_reduce_scatter_tensor(x: torch.Tensor, reduceOp: str, scatter_dim: int,
                             group: Any) -> torch.Tensor:
    from torch.distributed.nn import functional as nnf

    world = dist.get_world_size(group)
    chunks = [c.contiguous() for c in x.chunk(world, dim=scatter_dim)]
    out = torch.empty_like(chunks[0])
    return nnf.reduce_scatter(out, chunks, op=_legacy_op(reduceOp), group=group)


def nn_all_to_all_single(x: torch.Tensor, output_split_sizes: list[int] | None,
                         input_split_sizes: list[int] | None, group: Any) -> torch.Tensor:
    from torch.distributed.nn import functional as nnf

    rows = sum(output_split_sizes) if output_split_sizes is not None else x.shape[0]
    out = x.new_empty((rows, *x.shape[1:]))
    x = x.contiguous()  # c10d's all_to_all_single rejects non-contiguous tensors (by design)
    return nnf.all_to_all_single(out, x, output_split_sizes, input_split_sizes, group=group)


def global_rank(group: Any, group_rank: int) -> int:
    """The global rank of ``group_rank`` in ``group`` (WORLD: the same)."""
    if group is None or group is dist.group.WORLD:
        return group_rank
    return dist.get_global_rank(group, group_rank)


def nn_broadcast(x: torch.Tensor, src: int, group: Any) -> torch.Tensor:
    from torch.distributed.nn import functional as nnf

    # the contract's src is the group rank (the functional API's); c10d takes a global one
    return nnf.broadcast(x, global_rank(group, src), group=group)


_LEGACY = ["backward", "double_backward", "complex",  # graph breaks: no compile
           *(f"op.{op}" for op in REDUCE_OPS)]
for _fn in (nn_all_reduce, nn_all_gather_tensor, nn_reduce_scatter_tensor,
            nn_all_to_all_single, nn_broadcast):
    _declare(_fn, f"nn.{_fn.__name__.removeprefix('nn_')}", _LEGACY)


# a composition: a sequence- and tensor-parallel MLP (area collectives.tp_mlp)
def _tp_mlp(gather: Any, scatter: Any, x: torch.Tensor, w1: torch.Tensor,
            w2: torch.Tensor, group: Any) -> torch.Tensor:
    full = gather(x, 0, group)  # the whole sequence from every rank's rows
    hidden = torch.relu(full @ w1)  # this rank's columns of the hidden layer
    return scatter(hidden @ w2, "sum", 0, group)  # partial outputs summed, rows scattered


def tp_mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, group: Any) -> torch.Tensor:
    """Contract of ``collectives.tp_mlp``: rank r holds rows r of x (n/W, d), columns r
    of w1 (d, h/W) and rows r of w2 (h/W, d); returns rows r of relu(x w1) w2."""
    return _tp_mlp(all_gather_tensor, reduce_scatter_tensor, x, w1, w2, group)


def nn_tp_mlp(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, group: Any) -> torch.Tensor:
    return _tp_mlp(nn_all_gather_tensor, nn_reduce_scatter_tensor, x, w1, w2, group)


tp_mlp.conformance_name = "functional.tp_mlp"
nn_tp_mlp.conformance_name = "nn.tp_mlp"
