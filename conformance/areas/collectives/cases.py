"""What each rank runs (``conformance.processes.ranks`` sends these functions to every rank): build
this rank's inputs from the case, call the implementation, differentiate with this rank's
cotangents, and return exact float64 copies of everything for the parent to check.

A case is a dict: ``spec`` (the implementation, ``module:attr``), ``op`` (the area's op),
``args`` (per rank: the op's arguments between the input and ``group``), ``inputs`` (per
rank: an array, or a list of arrays for the coalesced ops), ``cotangents`` (per rank, the
outputs' structure; None: no backward), ``dtype`` and ``layout``.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from conformance.harness.registry import load_object
from conformance.harness.tensors import exact_numpy, from_numpy, relayout
from conformance.processes import current_rank as here

COALESCED = ("all_reduce_coalesced", "all_gather_into_tensor_coalesced",
             "reduce_scatter_tensor_coalesced")


@functools.cache
def _impl(spec: str) -> Callable[..., Any]:
    return load_object(spec, f"implementation {spec}")


def _tensors(values: list[np.ndarray], dtype: torch.dtype, layout: str,
             grad: bool) -> list[torch.Tensor]:
    out = []
    for v in values:
        t = relayout(from_numpy(v, dtype, here.device()), layout)
        if grad:
            t = t.detach().requires_grad_(True)  # a leaf, in the requested layout
        out.append(t)
    return out


def _cotangent(g: np.ndarray, dtype: torch.dtype, layout: str) -> torch.Tensor:
    """This rank's cotangent: contiguous, "transposed", or "expanded": one value broadcast
    with every stride 0 (what ``y.sum()`` gives; the case draws a constant cotangent)."""
    if layout == "expanded" and g.size:
        if not np.all(g == g.flat[0]):
            raise ValueError("an expanded cotangent needs one value")
        return from_numpy(g.reshape(-1)[:1], dtype, here.device()).reshape(
            (1,) * g.ndim).expand(g.shape)
    return relayout(from_numpy(g, dtype, here.device()), layout)


def _wire(t: torch.Tensor) -> np.ndarray:
    """A result's exact values, as small as they travel: float32 for float32 and the half
    types (exact), float64 otherwise (``check_case`` widens them to float64)."""
    if t.dtype in (torch.float32, torch.float16, torch.bfloat16):
        return t.detach().to("cpu", torch.float32).numpy()
    if t.is_complex():
        return t.detach().cpu().resolve_conj().numpy()
    return exact_numpy(t)


def _as_list(y: Any) -> list[torch.Tensor]:
    return list(y) if isinstance(y, (list, tuple)) else [y]


def _error(exc: BaseException) -> dict[str, str]:
    frames = traceback.extract_tb(exc.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    return {"type": f"{type(exc).__module__}.{type(exc).__qualname__}",
            "message": str(exc).split("\n")[0][:300], "where": where}


def _call(fn: Callable[..., Any], case: dict[str, Any], xs: list[torch.Tensor],
          rank: int | None = None, group: Any = None) -> Any:
    args = tuple(case["args"][here.rank() if rank is None else rank])
    x = xs if case["op"] in COALESCED else xs[0]
    return fn(x, *args, here.group() if group is None else group)


def eager(case: dict[str, Any]) -> dict[str, Any]:
    """Forward, then (when the case has cotangents) the gradients of Σ⟨g, y⟩."""
    return _run(_impl(case["spec"]), case)


def compiled(case: dict[str, Any], backend: str) -> dict[str, Any]:
    """``eager`` through ``torch.compile(fullgraph=True, backend=backend)``: a graph break
    raises (reported as the rank's error) instead of falling back to eager."""
    fn = _impl(case["spec"])

    def traced(x: Any, *args: Any) -> Any:
        return fn(x, *args)

    torch._dynamo.reset()  # every case compiles afresh: no cache from an earlier case
    return _run(torch.compile(traced, fullgraph=True, backend=backend), case)


def seeded(payload: dict[str, Any]) -> dict[str, Any]:
    """``eager`` of a case this rank builds itself (``payload["build"]``: the arguments of
    ``catalogue.from_seed``; ``spec``, ``layout``, ``backward``): a large case's inputs
    are made on every rank instead of being sent to each."""
    from conformance.areas.collectives.catalogue import from_seed

    case = from_seed(**payload["build"]).payload(payload["spec"], payload["layout"],
                                                  payload["backward"])
    return _run(_impl(case["spec"]), case)


def in_groups(payload: dict[str, Any]) -> dict[str, Any]:
    """A case per subgroup (``payload["groups"]``: global ranks per group, ``"mesh"``: the
    groups are a 2-D DeviceMesh's dimension 0, ``"cases"``: one ``eager`` case per group,
    indexed by group rank): this rank runs its group's case on that group, as the group's
    rank; a rank in no group returns at once (``idle``)."""
    groups = tuple(tuple(g) for g in payload["groups"])
    mine, group = here.subgroup(groups, payload.get("mesh", False))
    if mine is None:
        return {"rank": here.rank(), "idle": True}
    case = payload["cases"][mine]
    k = groups[mine].index(here.rank())
    out = _run(_impl(case["spec"]), case, rank=k, group=group)
    return {**out, "global_rank": here.rank(), "group": mine}


def _run(fn: Callable[..., Any], case: dict[str, Any], rank: int | None = None,
         group: Any = None) -> dict[str, Any]:
    dtype = getattr(torch, case["dtype"])
    rank = here.rank() if rank is None else rank
    inputs = case["inputs"][rank]
    values = inputs if case["op"] in COALESCED else [inputs]
    backward = case.get("cotangents") is not None
    xs = _tensors(values, dtype, case.get("layout", "contiguous"), backward)
    given = list(xs)  # the implementation gets its own list: we differentiate our leaves
    ys = _as_list(_call(fn, case, given, rank, group))
    out: dict[str, Any] = {
        "rank": rank, "y": [_wire(y) for y in ys],
        "y_dtype": [str(y.dtype).removeprefix("torch.") for y in ys],
        "y_device": [y.device.type for y in ys],
        "requires_grad": [bool(y.requires_grad) for y in ys],
        "list_changed": [i for i, (a, b) in enumerate(zip(given, xs, strict=True))
                         if a is not b] if case["op"] in COALESCED else [],
        "grad": None, "backward_error": None,
    }
    if backward:
        gs = [_cotangent(g, dtype, case.get("cotangent_layout", "contiguous"))
              for g in _as_list(case["cotangents"][rank])]
        try:
            grads = torch.autograd.grad(ys, xs, gs, allow_unused=True)
        except Exception as exc:  # reported: some ops have no backward by design
            out["backward_error"] = _error(exc)
        else:
            out["grad"] = [None if g is None else _wire(g) for g in grads]
    return out


def double_backward(case: dict[str, Any], hs: list[Any]) -> dict[str, Any]:
    """d/dg ⟨h, dL/dx⟩ for L = Σ⟨g, y⟩ (create_graph=True, then a second backward with this
    rank's ``hs``): the forward applied to h, for a linear collective."""
    dtype = getattr(torch, case["dtype"])
    rank = here.rank()
    values = case["inputs"][rank]
    values = values if case["op"] in COALESCED else [values]
    xs = _tensors(values, dtype, "contiguous", True)
    ys = _as_list(_call(_impl(case["spec"]), case, list(xs)))
    ys = [y.wait() if hasattr(y, "wait") else y for y in ys]
    gs = [from_numpy(g, dtype, here.device()).requires_grad_(True)
          for g in _as_list(case["cotangents"][rank])]
    gx = torch.autograd.grad(ys, xs, gs, create_graph=True)
    h = [from_numpy(v, dtype, here.device()) for v in _as_list(hs[rank])]
    used = [(g, hh) for g, hh in zip(gx, h, strict=True) if g.requires_grad]
    if len(used) != len(gx):
        raise RuntimeError("the gradient is not differentiable (create_graph=True gave a "
                           "gradient outside the graph)")
    gg = torch.autograd.grad([g for g, _ in used], gs, [hh for _, hh in used],
                             allow_unused=True)
    return {"rank": rank, "gg": [None if v is None else _wire(v) for v in gg]}


def mismatched(spec: str, ins: list[list[int]], outs: list[list[int]]) -> tuple[int, ...]:
    """all_to_all_single with this rank's split tables (inconsistent across ranks): the
    output's shape, if the implementation returns one."""
    rank = here.rank()
    x = torch.randn(sum(ins[rank]), 2, device=here.device())
    y = _impl(spec)(x, outs[rank], ins[rank], here.group())
    if hasattr(y, "wait"):
        y = y.wait()
    return tuple(y.shape)


def gradcheck(case: dict[str, Any], active: int) -> dict[str, Any]:
    """``torch.autograd.gradcheck`` (float64) of the ``active`` rank's block J_aa of the
    collective's Jacobian: rank ``active`` perturbs its input, the other ranks hold theirs
    constant and give their outputs a zero cotangent (so the backward still runs across
    the group, in lockstep, but only rank ``active``'s own output feeds its gradient)."""
    rank = here.rank()
    fn = _impl(case["spec"])
    values = case["inputs"][rank]
    values = values if case["op"] in COALESCED else [values]
    consts = [from_numpy(v, torch.float64, here.device()) for v in values]
    leaves = [c.clone().requires_grad_(True) for c in consts]
    active_here = rank == active

    def f(*zs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        xs = list(zs) if active_here else [c + 0 * z for c, z in zip(consts, zs, strict=True)]
        ys = _as_list(_call(fn, case, xs))
        return tuple(y if active_here else 0 * y for y in ys)

    try:
        ok = torch.autograd.gradcheck(f, tuple(leaves), eps=1e-6, atol=1e-10, rtol=1e-7)
    except Exception as exc:  # a GradcheckError names the mismatching Jacobian entries
        return {"rank": rank, "ok": False, "error": _error(exc)}
    return {"rank": rank, "ok": bool(ok), "error": None}


def tp_mlp(spec: str, x: np.ndarray, w1: np.ndarray, w2: np.ndarray, g: np.ndarray,
           dtype: str) -> dict[str, Any]:
    """The ``collectives.tp_mlp`` composition on this rank: its shards of x (rows), w1
    (columns), w2 (rows) and of the cotangent g (rows); returns its output rows and the
    gradients of its shards."""
    rank, w = here.rank(), here.world()
    dt = getattr(torch, dtype)
    n, h = x.shape[0] // w, w1.shape[1] // w

    def leaf(a: np.ndarray) -> torch.Tensor:
        return from_numpy(a, dt, here.device()).requires_grad_(True)

    xs = leaf(x[rank * n:(rank + 1) * n])
    w1s = leaf(w1[:, rank * h:(rank + 1) * h])
    w2s = leaf(w2[rank * h:(rank + 1) * h])
    y = _impl(spec)(xs, w1s, w2s, here.group())
    gs = from_numpy(g[rank * n:(rank + 1) * n], dt, here.device())
    dx, dw1, dw2 = torch.autograd.grad(y, (xs, w1s, w2s), gs)
    return {"rank": rank, "y": exact_numpy(y), "dx": exact_numpy(dx),
            "dw1": exact_numpy(dw1), "dw2": exact_numpy(dw2)}


def avg_backward(x: np.ndarray, g: np.ndarray, api: str) -> dict[str, Any]:
    """pytorch#190007: the gradient of an "avg" all_reduce (``api`` "functional" or "nn"),
    or the error its backward raises."""
    rank = here.rank()
    t = torch.from_numpy(x[rank]).to(here.device()).requires_grad_(True)
    if api == "functional":
        import torch.distributed._functional_collectives as fc

        y = fc.all_reduce(t, "avg", here.group())
    else:
        import torch.distributed as dist
        from torch.distributed.nn import functional as nnf

        y = nnf.all_reduce(t, op=dist.ReduceOp.AVG, group=here.group())
    try:
        (grad,) = torch.autograd.grad(y, t, torch.from_numpy(g[rank]).to(here.device()))
    except RuntimeError as exc:
        return {"rank": rank, "error": str(exc).splitlines()[0]}
    return {"rank": rank, "grad": exact_numpy(grad)}


def wait_keeps_grad(x: np.ndarray, g: np.ndarray) -> dict[str, Any]:
    """Waiting on a functional collective's result (``wait_tensor`` and the async
    tensor's ``.wait()``) must keep it in the autograd graph: both gradients."""
    import torch.distributed._functional_collectives as fc

    rank = here.rank()
    out: dict[str, Any] = {"rank": rank}
    for how in ("wait_tensor", "method"):
        t = torch.from_numpy(x[rank]).to(here.device()).requires_grad_(True)
        y = fc.all_reduce(t, "sum", here.group())
        waited = fc.wait_tensor(y) if how == "wait_tensor" else (
            y.wait() if hasattr(y, "wait") else y)
        out[f"{how}_requires_grad"] = bool(waited.requires_grad)
        if waited.requires_grad:
            (grad,) = torch.autograd.grad(waited, t, torch.from_numpy(g[rank]).to(here.device()))
            out[f"{how}_grad"] = exact_numpy(grad)
        else:
            fc.wait_tensor(y)
    return out


def empty_extremum_backward(reduce_op: str, repeats: int) -> dict[str, Any]:
    """``repeats`` times: the functional ``all_reduce_coalesced`` of one empty bfloat16
    tensor with ``reduce_op`` (max / min), then its backward; what each call's backward
    did on this rank ("ok" or the error's first line, numbers elided) and the group's
    collective count after it. Every rank must end each call alike."""
    import re

    import torch.distributed._functional_collectives as fc

    ends: list[str] = []
    for _ in range(repeats):
        x = torch.zeros(0, 1, dtype=torch.bfloat16, device=here.device()).requires_grad_(True)
        (y,) = fc.all_reduce_coalesced([x], reduce_op, here.group())
        y = fc.wait_tensor(y)
        try:
            torch.autograd.grad([y], [x], [torch.ones_like(y)])
        except RuntimeError as exc:
            ends.append(re.sub(r"\d+", "N", str(exc).splitlines()[0])[:120])
        else:
            ends.append("ok")
    return {"rank": here.rank(), "ends": ends, "sequence": here.sequence()}
