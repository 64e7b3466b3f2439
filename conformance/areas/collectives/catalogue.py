"""The collectives areas' cases, built in the parent: per-rank inputs and cotangents (drawn
in float64, rounded to the case's dtype), per-rank arguments, and the float64 oracle's
forward and adjoint (oracles/collectives.py) with the rounding bound of each.

Bounds (the accumulation precision they certify is the input dtype's, with any reduction
order): an output element that is a sum of n terms c_i x_i with c_i in {1, 1/W} carries at
most n - 1 roundings per term, "avg" two more (the reciprocal 1/W rounded, then the
scaling: NCCL's way; a division after the sum takes one), so |fl(y) - y| <= gamma_k(u) *
y(|x|), k = n - 1 (sum) or n + 1 (avg), where y(|x|) is the same
linear collective applied to |x| (Higham, Accuracy and Stability, 2nd ed., Lemma 3.1 and
section 4.2; round to nearest, no underflow or overflow: the inputs are O(1)). "product"
uses gamma_{W-1} |prod x|; min, max, gather, all-to-all and broadcast move values: exact.
The adjoint of each linear collective is again such a sum, bounded the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from conformance.harness.tensors import rounded
from oracles import collectives as oracle

OPS = ("all_reduce", "all_gather_tensor", "reduce_scatter_tensor", "all_to_all_single",
       "all_reduce_coalesced", "all_gather_into_tensor_coalesced",
       "reduce_scatter_tensor_coalesced", "broadcast")
REDUCING = {"all_reduce", "reduce_scatter_tensor", "all_reduce_coalesced",
            "reduce_scatter_tensor_coalesced"}
COALESCED = {"all_reduce_coalesced", "all_gather_into_tensor_coalesced",
             "reduce_scatter_tensor_coalesced"}
LINEAR = ("sum", "avg")  # the reductions with a gradient
SPLITS = ("even", "uneven", "zero", "none")  # all_to_all_single split kinds


# input magnitudes: 2^e times N(0, 1) values, far from 1 yet clear of overflow (W <= 8
# ranks of |x| < 8 * 2^e) and, for "small", where sums stay exact-or-normal: a kernel that
# reduces in a narrower type (bfloat16 through float16, say) overflows or flushes there
SCALES = {"float16": {"unit": 0, "large": 10, "small": -12},
          "bfloat16": {"unit": 0, "large": 100, "small": -100},
          "float32": {"unit": 0, "large": 100, "small": -100},
          "float64": {"unit": 0, "large": 900, "small": -900}}


def scaled(op: str, reduce_op: str, scale: str) -> bool:
    """Whether inputs of ``scale`` keep the case's bounds: moves, sums, min / max any; avg
    not "small" (1/W of a value near underflow is not within its relative bound); product
    "unit" only (W factors of 2^e overflow)."""
    if scale == "unit" or op not in REDUCING:
        return True
    if reduce_op == "product":
        return False
    return not (reduce_op == "avg" and scale == "small")


@dataclass
class Case:
    """One collective case: what the ranks get (``payload``) and what they must return."""

    op: str
    world: int
    dtype: str
    params: dict[str, Any]
    inputs: list[Any]  # per rank: an array (a list of arrays when coalesced)
    args: list[tuple[Any, ...]]  # per rank
    forward: Callable[[list[Any]], list[list[np.ndarray]]]
    adjoint: Callable[[list[Any], list[Any]], list[list[np.ndarray]]]
    terms: tuple[int, int]  # summands per output element: forward, adjoint
    reduce_op: str = ""
    cotangents: list[Any] | None = field(default=None)

    def payload(self, spec: str, layout: str = "contiguous", backward: bool = True
                ) -> dict[str, Any]:
        return {"spec": spec, "op": self.op, "args": self.args, "inputs": self.inputs,
                "cotangents": self.cotangents if backward else None, "dtype": self.dtype,
                "layout": layout}


def _listed(fn: Callable[..., Any], coalesced: bool) -> Callable[..., list[list[np.ndarray]]]:
    """An oracle function's per-rank results as lists (one array per output)."""
    def run(*a: Any, **k: Any) -> list[list[np.ndarray]]:
        out = fn(*a, **k)
        return [list(o) for o in out] if coalesced else [[o] for o in out]
    return run


def build(op: str, world: int, dtype: str, rng: np.random.Generator, *,
          reduce_op: str = "sum", dim: int = 0, rows: int = 2, cols: int = 3,
          splits: str = "even", count: int = 2, src: int = 0, scale: str = "unit") -> Case:
    """A case of ``op`` over ``world`` ranks: ``rows`` x ``cols`` inputs (``rows`` per
    rank for all_to_all, ``rows`` * W for the scattering ops), ``dim`` the gather/scatter
    dim, ``count`` tensors for the coalesced ops; ``scale`` ("unit", "large", "small"):
    the inputs times 2^SCALES[dtype][scale] (see ``scaled``)."""
    w = world
    shift = SCALES[dtype][scale]

    def draw(shape: tuple[int, ...]) -> np.ndarray:
        return rounded(rng.standard_normal(shape), dtype)

    def draw_x(shape: tuple[int, ...]) -> np.ndarray:  # scaled, then rounded
        return rounded(np.ldexp(rng.standard_normal(shape), shift), dtype)

    if shift and not scaled(op, reduce_op, scale):
        raise ValueError(f"scale {scale!r} does not apply to {op} {reduce_op}")
    draw_in = _distinct_across_ranks(rng, w, shift) if reduce_op in ("min", "max") and \
        op in REDUCING else draw_x

    params: dict[str, Any] = {"world": w, "rows": rows, "cols": cols}
    if op == "all_reduce":
        inputs = [draw_in((rows, cols)) for _ in range(w)]
        args = [(reduce_op,)] * w
        fwd = _listed(lambda xs: oracle.all_reduce(xs, reduce_op), False)
        adj = _listed(lambda xs, gs: oracle.all_reduce_adjoint(xs, gs,
                                                               reduce_op), False)
        terms = (w, w)
    elif op == "all_gather_tensor":
        inputs = [draw_in((rows, cols)) for _ in range(w)]
        args = [(dim,)] * w
        fwd = _listed(lambda xs: oracle.all_gather(xs, gather_dim=dim), False)
        adj = _listed(lambda xs, gs: oracle.all_gather_adjoint(xs, gs,
                                                               gather_dim=dim), False)
        terms = (1, w)
    elif op == "reduce_scatter_tensor":
        shape = (rows * w, cols) if dim == 0 else (rows, cols * w)
        inputs = [draw_in(shape) for _ in range(w)]
        args = [(reduce_op, dim)] * w
        fwd = _listed(lambda xs: oracle.reduce_scatter(xs, reduce_op, scatter_dim=dim), False)
        adj = _listed(lambda xs, gs: oracle.reduce_scatter_adjoint(
            xs, gs, reduce_op, scatter_dim=dim), False)
        terms = (w, 1)
    elif op == "all_to_all_single":
        send = _split_table(rng, w, rows, splits)
        inputs = [draw_in((sum(send[s]), cols)) for s in range(w)]
        if splits == "none":
            args = [(None, None)] * w
            out_sizes = in_sizes = None
        else:
            in_sizes = [list(send[s]) for s in range(w)]
            out_sizes = [[send[s][r] for s in range(w)] for r in range(w)]
            args = [(out_sizes[r], in_sizes[r]) for r in range(w)]
        params["splits"] = splits if splits == "none" else [list(s) for s in send]
        fwd = _listed(lambda xs: oracle.all_to_all_single(xs, out_sizes, in_sizes), False)
        adj = _listed(lambda xs, gs: oracle.all_to_all_single_adjoint(
            xs, gs, out_sizes, in_sizes), False)
        terms = (1, 1)
    elif op == "broadcast":
        inputs = [draw_in((rows, cols)) for _ in range(w)]
        args = [(src,)] * w
        fwd = _listed(lambda xs: oracle.broadcast(xs, src=src), False)
        adj = _listed(lambda xs, gs: oracle.broadcast_adjoint(xs, gs,
                                                              src=src), False)
        terms = (1, w)
        params["src"] = src
    elif op in COALESCED:
        case = _coalesced(op, w, dtype, rng, reduce_op, rows, cols, count, draw, draw_in)
        if scale != "unit":
            case.params["scale"] = scale
        return case
    else:
        raise ValueError(f"unknown collective {op!r}")
    if op in ("all_gather_tensor", "reduce_scatter_tensor"):
        params["dim"] = dim
    if op in REDUCING:
        params["reduce_op"] = reduce_op
    if scale != "unit":
        params["scale"] = scale
    case = Case(op, w, dtype, params, inputs, args, fwd, adj, terms,
                reduce_op if op in REDUCING else "")
    case.cotangents = [draw(y[0].shape) for y in fwd(inputs)]
    return case


def from_seed(op: str, world: int, dtype: str, seed: int, **kwargs: Any) -> Case:
    """``build`` with a generator seeded by ``seed``: the same case wherever it is built
    (the parent, and each rank of a size case, whose inputs are too large to send)."""
    return build(op, world, dtype, np.random.default_rng(seed), **kwargs)


def _coalesced(op: str, w: int, dtype: str, rng: np.random.Generator, reduce_op: str,
               rows: int, cols: int, count: int, draw: Callable[..., np.ndarray],
               draw_in: Callable[..., np.ndarray]) -> Case:
    """The coalesced ops: ``count`` tensors per rank of different shapes (dim 0)."""
    shapes = [(rows + i, cols + (i % 2)) for i in range(count)]
    if op == "all_reduce_coalesced":
        args = [(reduce_op,)] * w
        fwd = _listed(lambda xss: oracle.all_reduce_coalesced(xss, reduce_op), True)
        adj = _listed(lambda xss, gss: oracle.all_reduce_coalesced_adjoint(
            xss, gss, reduce_op), True)
        terms = (w, w)
    elif op == "all_gather_into_tensor_coalesced":
        args = [()] * w
        fwd = _listed(lambda xss: oracle.all_gather_coalesced(xss, gather_dim=0), True)
        adj = _listed(lambda xss, gss: oracle.all_gather_coalesced_adjoint(
            xss, gss, gather_dim=0), True)
        terms = (1, w)
    else:  # scatter dims alternate 1, 0, 1, ... (each tensor along its own dim)
        dims = [(i + 1) % 2 for i in range(count)]
        shapes = [(s[0] * w, s[1]) if d == 0 else (s[0], s[1] * w)
                  for s, d in zip(shapes, dims, strict=True)]
        args = [(reduce_op, dims)] * w
        fwd = _listed(lambda xss: _by_position(
            lambda i, xs: oracle.reduce_scatter(xs, reduce_op, dims[i]), xss), True)
        adj = _listed(lambda xss, gss: _by_position(
            lambda i, xs, gs: oracle.reduce_scatter_adjoint(xs, gs, reduce_op, dims[i]),
            xss, gss), True)
        terms = (w, 1)
    inputs = [[draw_in(s) for s in shapes] for _ in range(w)]
    params: dict[str, Any] = {"world": w, "shapes": [list(s) for s in shapes]}
    if op == "reduce_scatter_tensor_coalesced":
        params["scatter_dims"] = args[0][1]
    if op in REDUCING:
        params["reduce_op"] = reduce_op
    case = Case(op, w, dtype, params, inputs, args, fwd, adj, terms,
                reduce_op if op in REDUCING else "")
    case.cotangents = [[draw(y.shape) for y in ys] for ys in fwd(inputs)]
    return case


def _by_position(fn: Callable[..., list[np.ndarray]], xss: list[list[np.ndarray]],
                 *rest: list[list[np.ndarray]]) -> list[list[np.ndarray]]:
    """``fn(i, [xss[r][i] for r], ...)`` per tensor position i, regrouped per rank."""
    w, n = len(xss), len(xss[0])
    cols = [fn(i, [xss[r][i] for r in range(w)], *([g[r][i] for r in range(w)] for g in rest))
            for i in range(n)]
    return [[cols[i][r] for i in range(n)] for r in range(w)]


def _distinct_across_ranks(rng: np.random.Generator, w: int,
                           shift: int = 0) -> Callable[..., np.ndarray]:
    """For min / max: inputs whose ranks differ at every element (no tie: the gradient is
    unique), half-integers exact in every dtype; called once per rank and shape, in turn."""
    pending: dict[tuple[int, ...], list[np.ndarray]] = {}

    def draw(shape: tuple[int, ...]) -> np.ndarray:
        queue = pending.get(shape)
        if not queue:
            order = np.argsort(rng.random((w, *shape)), axis=0).astype(np.float64)
            queue = pending[shape] = [np.ldexp(order[r] - w / 2 + 0.5, shift)
                                      for r in range(w)]
        return queue.pop(0)

    return draw


def _split_table(rng: np.random.Generator, w: int, rows: int, kind: str) -> list[list[int]]:
    """send[s][r]: rows rank s sends rank r. even / none: ``rows`` each; uneven: random
    counts 0..rows+1 (at least one pair differs); zero: uneven with a whole rank empty."""
    if kind in ("even", "none"):
        return [[rows] * w for _ in range(w)]
    table = [[int(v) for v in rng.integers(0, rows + 2, size=w)] for _ in range(w)]
    if len({v for row in table for v in row}) == 1:
        table[0][w - 1] += 1
    if kind == "zero":
        table[int(rng.integers(0, w))] = [0] * w
    return table


def bound(case: Case, values: list[Any], which: str) -> list[list[np.ndarray]]:
    """Per rank and output: the elementwise bound on |computed - exact| for the forward
    (``values`` = the inputs) or the adjoint (``values`` = the cotangents)."""
    u = oracle.unit_roundoff(case.dtype)
    n = case.terms[0] if which == "forward" else case.terms[1]
    absolute = _abs(values)
    if which == "forward":
        if case.reduce_op in ("min", "max"):
            return [[np.zeros_like(y) for y in ys] for ys in case.forward(case.inputs)]
        if case.reduce_op == "product":
            # W - 1 roundings, and below the normal range each may err by eta absolutely,
            # then scaled by the factors left to multiply (at most prod max(1, |x_t|))
            exact = case.forward(case.inputs)
            grow = case.forward(_map(lambda a: np.maximum(1.0, a), absolute))
            eta = (n - 1) * oracle.ETA[case.dtype]
            return [[oracle.gamma(n - 1, u) * np.abs(y) + eta * m
                     for y, m in zip(ys, ms, strict=True)]
                    for ys, ms in zip(exact, grow, strict=True)]
        magnitude = case.forward(absolute)
    else:
        xs = _abs(case.inputs) if case.reduce_op == "product" else case.inputs
        magnitude = case.adjoint(xs, absolute)  # min / max: routed by the signed inputs
    # product's adjoint (sum_s g_s) prod_{t != r} x_t: n - 1 additions, W - 1 products
    k = {"avg": n + 1, "product": n + case.world}.get(case.reduce_op, n - 1)
    factor = oracle.gamma(k, u) if k > 0 else 0.0
    return [[factor * m for m in ms] for ms in magnitude]


def _map(fn: Callable[[np.ndarray], np.ndarray], values: list[Any]) -> list[Any]:
    return [[fn(v) for v in vs] if isinstance(vs, list) else fn(vs) for vs in values]


def _abs(values: list[Any]) -> list[Any]:
    return _map(np.abs, values)
