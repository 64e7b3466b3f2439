"""Functional-collective references (``torch.distributed._functional_collectives``) over W
ranks, in numpy float64, with adjoints and rigorous rounding bounds.

Conventions: every collective takes the per-rank inputs ``xs`` (``xs[r]`` = rank r's tensor,
cast to float64) and returns the per-rank outputs. ``*_adjoint(xs, gs, ...)`` takes per-rank
cotangents ``gs`` (shaped like the outputs) and returns, per rank, the gradient of
L = sum_r <g_r, y_r> with respect to that rank's input.

Reference accuracy: "sum" is computed exactly and rounded once to float64 (an error-free
TwoSum pass; ``math.fsum``, or integers, where that pass is inexact); "avg" divides that by
W; "product" multiplies in rank order; min / max / gather / scatter / all-to-all / broadcast
only move values. ``reference_error`` bounds |reference - exact|; add it to a ``*_bound``
when the backend under test is float64 itself.

Bounds (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., sections 2.2,
3.1, 4.2), with u the unit roundoff and gamma_n(u) = n u / (1 - n u): they assume round to
nearest, gradual underflow (additions are then exact in the subnormal range; the avg
bound adds eta = half a subnormal step per possibly-underflowing multiplication or
division), no overflow, and inputs representable in the format.
"""

from __future__ import annotations

import math

import numpy as np

U64 = 2.0**-53

UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "float16": 2.0**-11,
                 "bfloat16": 2.0**-8}
#: half the smallest subnormal: the largest absolute error of one rounding below the normals
ETA = {"float64": 2.0**-1075, "float32": 2.0**-150, "float16": 2.0**-25, "bfloat16": 2.0**-134}

OPS = ("sum", "avg", "min", "max", "product")


# ----------------------------------------------------------------------------- helpers

def _f64(xs: list[np.ndarray]) -> list[np.ndarray]:
    if len(xs) == 0:
        raise ValueError("need at least one rank")
    return [np.asarray(x, dtype=np.float64) for x in xs]


def _same_shape(xs: list[np.ndarray], what: str = "inputs") -> tuple[int, ...]:
    shape = xs[0].shape
    for r, x in enumerate(xs):
        if x.shape != shape:
            raise ValueError(f"{what}: rank {r} has shape {x.shape}, rank 0 has {shape}")
    return shape


def _check_cotangents(gs: list[np.ndarray], shapes: list[tuple[int, ...]]) -> list:
    gs = _f64(gs)
    if len(gs) != len(shapes):
        raise ValueError(f"{len(gs)} cotangents for {len(shapes)} ranks")
    for r, (g, s) in enumerate(zip(gs, shapes, strict=True)):
        if g.shape != s:
            raise ValueError(f"cotangent of rank {r} has shape {g.shape}, output has {s}")
    return gs


def _exact_sum(stack: np.ndarray) -> np.ndarray:
    """sum over axis 0, correctly rounded to float64: a vectorised TwoSum pass flags the
    elements where some partial sum was inexact; those are redone with math.fsum."""
    s = stack[0].copy()
    inexact = np.zeros(s.shape, dtype=bool)
    with np.errstate(invalid="ignore", over="ignore"):
        for x in stack[1:]:
            t = s + x
            bp = t - s
            err = (s - (t - bp)) + (x - bp)
            inexact |= err != 0
            s = t
    redo = inexact & np.all(np.isfinite(stack), axis=0)
    for idx in np.argwhere(redo):
        col = [float(v) for v in stack[(slice(None), *idx)]]
        try:
            s[tuple(idx)] = math.fsum(col)
        except OverflowError:  # intermediate overflow: exact integer arithmetic
            s[tuple(idx)] = _int_sum(col)
    return s


def _int_sum(col: list[float]) -> float:
    """sum of finite floats, exact in integers (denominators are powers of 2), rounded once
    (int / int is correctly rounded); +-inf where the result overflows."""
    ratios = [v.as_integer_ratio() for v in col]
    den = max(d for _, d in ratios)
    num = sum(n * (den // d) for n, d in ratios)
    try:
        return num / den
    except OverflowError:
        return math.copysign(math.inf, num)


def _reduce(xs: list[np.ndarray], op: str) -> np.ndarray:
    if op not in OPS:
        raise ValueError(f"unknown reduce op {op!r}; expected one of {OPS}")
    _same_shape(xs)
    stack = np.stack(xs)
    if op == "sum":
        return _exact_sum(stack)
    if op == "avg":
        return _exact_sum(stack) / len(xs)
    if op == "min":
        return np.min(stack, axis=0)
    if op == "max":
        return np.max(stack, axis=0)
    out = stack[0].copy()
    for x in stack[1:]:
        out = out * x
    return out


def _prod_except(xs: list[np.ndarray]) -> list[np.ndarray]:
    """[prod_{t != r} x_t for r] by prefix / suffix products (no division: zeros work)."""
    w = len(xs)
    pre = [np.ones_like(xs[0])]
    for x in xs[:-1]:
        pre.append(pre[-1] * x)
    suf = [np.ones_like(xs[0])] * w
    for r in range(w - 2, -1, -1):
        suf[r] = suf[r + 1] * xs[r + 1]
    return [pre[r] * suf[r] for r in range(w)]


def _axis(dim: int, ndim: int) -> int:
    if not -ndim <= dim < ndim:
        raise ValueError(f"dim {dim} out of range for {ndim}-d tensors")
    return dim % ndim


# ----------------------------------------------------------------------------- all_reduce

def all_reduce(xs: list[np.ndarray], op: str) -> list[np.ndarray]:
    """Every rank gets the elementwise reduction over ranks ("avg" = sum / W)."""
    xs = _f64(xs)
    y = _reduce(xs, op)
    return [y.copy() for _ in xs]


def all_reduce_adjoint(xs: list[np.ndarray], gs: list[np.ndarray], op: str
                       ) -> list[np.ndarray]:
    """y_s = sum_t x_t for all s, so dL/dx_r = sum_s g_s (/ W for avg); for product
    dy_s/dx_r = prod_{t != r} x_t, so dL/dx_r = (sum_s g_s) prod_{t != r} x_t. min / max:
    where one rank r holds the extremum, y = x_r there and dL/dx_r = sum_s g_s (0 on the
    other ranks); a ValueError where ranks tie (the subgradient is not unique)."""
    xs = _f64(xs)
    if op in ("min", "max"):
        stack = np.stack(xs)
        best = stack.min(axis=0) if op == "min" else stack.max(axis=0)
        holders = stack == best
        if np.any(holders.sum(axis=0) > 1):
            raise ValueError(f"all_reduce {op!r}: ranks tie, the gradient is not unique")
        total = np.sum(np.stack(_f64(gs)), axis=0)
        return [np.where(holders[r], total, 0.0) for r in range(len(xs))]
    if op not in OPS:
        raise ValueError(f"unknown reduce op {op!r}; expected one of {OPS}")
    shape = _same_shape(xs)
    gs = _check_cotangents(gs, [shape] * len(xs))
    gsum = _exact_sum(np.stack(gs))
    if op == "sum":
        return [gsum.copy() for _ in xs]
    if op == "avg":
        return [gsum / len(xs) for _ in xs]
    return [gsum * p for p in _prod_except(xs)]


# ----------------------------------------------------------------------------- all_gather

def all_gather(xs: list[np.ndarray], gather_dim: int = 0) -> list[np.ndarray]:
    """Every rank gets concatenate(xs, gather_dim) (all ranks' tensors share one shape)."""
    xs = _f64(xs)
    shape = _same_shape(xs)
    y = np.concatenate(xs, axis=_axis(gather_dim, len(shape)))
    return [y.copy() for _ in xs]


def all_gather_adjoint(xs: list[np.ndarray], gs: list[np.ndarray],
                       gather_dim: int = 0) -> list[np.ndarray]:
    """x_r is block r of every y_s, so dL/dx_r = sum_s (block r of g_s along gather_dim)."""
    xs = _f64(xs)
    shape = _same_shape(xs)
    ax = _axis(gather_dim, len(shape))
    out_shape = (*shape[:ax], shape[ax] * len(xs), *shape[ax + 1:])
    gs = _check_cotangents(gs, [out_shape] * len(xs))
    total = _exact_sum(np.stack(gs))
    return list(np.split(total, len(xs), axis=ax))


# ----------------------------------------------------------------------------- reduce_scatter

def _chunks(y: np.ndarray, w: int, ax: int) -> list[np.ndarray]:
    if y.shape[ax] % w:
        raise ValueError(f"dim {ax} of size {y.shape[ax]} is not divisible by {w} ranks")
    return list(np.split(y, w, axis=ax))


def reduce_scatter(xs: list[np.ndarray], op: str = "sum", scatter_dim: int = 0
                   ) -> list[np.ndarray]:
    """The reduction over ranks split into W equal chunks along scatter_dim; rank r gets
    chunk r (ValueError if that dim is not divisible by W)."""
    xs = _f64(xs)
    shape = _same_shape(xs)
    ax = _axis(scatter_dim, len(shape))
    if shape[ax] % len(xs):
        raise ValueError(f"dim {ax} of size {shape[ax]} is not divisible by {len(xs)} ranks")
    return _chunks(_reduce(xs, op), len(xs), ax)


def reduce_scatter_adjoint(xs: list[np.ndarray], gs: list[np.ndarray],
                           op: str = "sum", scatter_dim: int = 0) -> list[np.ndarray]:
    """y_r = chunk r of reduce_s x_s; G = concatenate(gs, scatter_dim). dL/dx_s: G for sum
    (G / W avg), G prod_{t != s} x_t for product; min / max route G to the rank holding the
    extremum at each element (0 elsewhere; ties: ValueError, no unique subgradient)."""
    if op not in OPS:
        raise ValueError(f"unknown reduce op {op!r}; expected one of {OPS}")
    xs = _f64(xs)
    shape = _same_shape(xs)
    w = len(xs)
    ax = _axis(scatter_dim, len(shape))
    if shape[ax] % w:
        raise ValueError(f"dim {ax} of size {shape[ax]} is not divisible by {w} ranks")
    chunk = (*shape[:ax], shape[ax] // w, *shape[ax + 1:])
    gs = _check_cotangents(gs, [chunk] * w)
    grad = np.concatenate(gs, axis=ax)
    if op == "sum":
        return [grad.copy() for _ in xs]
    if op == "avg":
        return [grad / w for _ in xs]
    if op == "product":
        return [grad * p for p in _prod_except(xs)]
    stack = np.stack(xs)
    best = stack.min(axis=0) if op == "min" else stack.max(axis=0)
    holders = stack == best
    if np.any(holders.sum(axis=0) > 1):
        raise ValueError(f"reduce_scatter {op!r}: ranks tie, the gradient is not unique")
    return [np.where(holders[s], grad, 0.0) for s in range(w)]


# ----------------------------------------------------------------------------- all_to_all_single

def _splits(xs: list[np.ndarray], output_split_sizes, input_split_sizes
            ) -> tuple[list[list[int]], list[list[int]]]:
    """Resolve (out, in) split tables: in[s][r] rows go from rank s to rank r; out[r][s] =
    in[s][r]. None means equal splits; one table given alone determines the other."""
    w = len(xs)
    if any(x.ndim == 0 for x in xs):
        raise ValueError("all_to_all_single needs tensors with a dim 0")
    tails = {x.shape[1:] for x in xs}
    if len(tails) > 1:
        raise ValueError(f"ranks disagree on the trailing shape: {sorted(tails)}")

    def table(t, name: str) -> list[list[int]]:
        t = [list(row) for row in t]
        if len(t) != w or any(len(row) != w for row in t):
            raise ValueError(f"{name} must be {w} lists of {w} sizes")
        if any(int(v) != v or v < 0 for row in t for v in row):
            raise ValueError(f"{name} must hold non-negative integers: {t}")
        return [[int(v) for v in row] for row in t]

    if input_split_sizes is None and output_split_sizes is None:
        for s, x in enumerate(xs):
            if x.shape[0] % w:
                raise ValueError(f"rank {s}: dim 0 of size {x.shape[0]} is not divisible by {w}")
        ins = [[x.shape[0] // w] * w for x in xs]
    elif input_split_sizes is None:
        outs = table(output_split_sizes, "output_split_sizes")
        ins = [[outs[r][s] for r in range(w)] for s in range(w)]
    else:
        ins = table(input_split_sizes, "input_split_sizes")
    outs_derived = [[ins[s][r] for s in range(w)] for r in range(w)]
    if output_split_sizes is not None:
        outs = table(output_split_sizes, "output_split_sizes")
        if outs != outs_derived:
            raise ValueError(f"output_split_sizes {outs} do not match input_split_sizes "
                             f"{ins}: need output[r][s] == input[s][r]")
    for s, x in enumerate(xs):
        if sum(ins[s]) != x.shape[0]:
            raise ValueError(f"rank {s}: input splits {ins[s]} do not add up to dim 0 of "
                             f"shape {x.shape}")
    return outs_derived, ins


def all_to_all_single(xs: list[np.ndarray], output_split_sizes=None,
                      input_split_sizes=None) -> list[np.ndarray]:
    """Rank s splits xs[s] along dim 0 into chunks of input_split_sizes[s] rows (chunk r goes
    to rank r); rank r's output = concatenate over s of rank s's chunk r."""
    xs = _f64(xs)
    _, ins = _splits(xs, output_split_sizes, input_split_sizes)
    w = len(xs)
    chunks = [np.split(x, np.cumsum(ins[s])[:-1], axis=0) for s, x in enumerate(xs)]
    return [np.concatenate([chunks[s][r] for s in range(w)], axis=0) for r in range(w)]


def all_to_all_single_adjoint(xs: list[np.ndarray], gs: list[np.ndarray],
                              output_split_sizes=None, input_split_sizes=None
                              ) -> list[np.ndarray]:
    """The forward is a permutation of rows, so its adjoint is the inverse permutation:
    dL/dx_s = concatenate over r of (g_r's chunk s) = all_to_all_single(gs) with the
    split tables swapped."""
    xs = _f64(xs)
    outs, ins = _splits(xs, output_split_sizes, input_split_sizes)
    shapes = [(sum(outs[r]), *xs[0].shape[1:]) for r in range(len(xs))]
    gs = _check_cotangents(gs, shapes)
    grads = all_to_all_single(gs, output_split_sizes=ins, input_split_sizes=outs)
    for s, (g, x) in enumerate(zip(grads, xs, strict=True)):
        if g.shape != x.shape:
            raise ValueError(f"rank {s}: gradient shape {g.shape} != input shape {x.shape}")
    return grads


# ----------------------------------------------------------------------------- broadcast

def broadcast(xs: list[np.ndarray], src: int = 0) -> list[np.ndarray]:
    """Every rank gets xs[src]."""
    xs = _f64(xs)
    if not 0 <= src < len(xs):
        raise ValueError(f"src {src} out of range for {len(xs)} ranks")
    return [xs[src].copy() for _ in xs]


def broadcast_adjoint(xs: list[np.ndarray], gs: list[np.ndarray], src: int = 0
                      ) -> list[np.ndarray]:
    """y_s = x_src for all s, so dL/dx_src = sum_s g_s and the other ranks' gradients are 0."""
    xs = _f64(xs)
    if not 0 <= src < len(xs):
        raise ValueError(f"src {src} out of range for {len(xs)} ranks")
    gs = _check_cotangents(gs, [xs[src].shape] * len(xs))
    out = [np.zeros_like(x) for x in xs]
    out[src] = _exact_sum(np.stack(gs))
    return out


# ----------------------------------------------------------------------------- coalesced

def _coalesced(fn, xss, *rest, **kw) -> list[list[np.ndarray]]:
    """Apply the single-tensor ``fn`` per position i over [xss[r][i] for r]."""
    if len(xss) == 0:
        raise ValueError("need at least one rank")
    n = len(xss[0])
    for seq in (xss, *rest):
        if len(seq) != len(xss) or any(len(per_rank) != n for per_rank in seq):
            raise ValueError(f"every rank must pass {n} tensors")
    w = len(xss)
    cols = [fn([xss[r][i] for r in range(w)], *([g[r][i] for r in range(w)] for g in rest),
               **kw) for i in range(n)]
    return [[cols[i][r] for i in range(n)] for r in range(w)]


def all_reduce_coalesced(xss, op: str) -> list[list[np.ndarray]]:
    """all_reduce per position: xss[r] is rank r's list of tensors."""
    return _coalesced(all_reduce, xss, op=op)


def all_reduce_coalesced_adjoint(xss, gss, op: str) -> list[list[np.ndarray]]:
    """all_reduce_adjoint per position (L sums over positions, so gradients do not mix)."""
    return _coalesced(all_reduce_adjoint, xss, gss, op=op)


def all_gather_coalesced(xss, gather_dim: int = 0) -> list[list[np.ndarray]]:
    """all_gather per position."""
    return _coalesced(all_gather, xss, gather_dim=gather_dim)


def all_gather_coalesced_adjoint(xss, gss, gather_dim: int = 0) -> list[list[np.ndarray]]:
    """all_gather_adjoint per position."""
    return _coalesced(all_gather_adjoint, xss, gss, gather_dim=gather_dim)


def reduce_scatter_coalesced(xss, op: str = "sum", scatter_dim: int = 0
                             ) -> list[list[np.ndarray]]:
    """reduce_scatter per position."""
    return _coalesced(reduce_scatter, xss, op=op, scatter_dim=scatter_dim)


def reduce_scatter_coalesced_adjoint(xss, gss, op: str = "sum", scatter_dim: int = 0
                                     ) -> list[list[np.ndarray]]:
    """reduce_scatter_adjoint per position."""
    return _coalesced(reduce_scatter_adjoint, xss, gss, op=op, scatter_dim=scatter_dim)


# ----------------------------------------------------------------------------- TP MLP

def tp_mlp(x: np.ndarray, w1: np.ndarray, w2: np.ndarray, g: np.ndarray
           ) -> dict[str, np.ndarray]:
    """Unsharded reference of a tensor-parallel MLP, y = relu(x w1) w2, with the gradients of
    <g, y>: with h = x w1, a = relu(h): dw2 = a^T g, dh = (g w2^T) * [h > 0] (relu'(0) = 0),
    dw1 = x^T dh, dx = dh w1^T."""
    x, w1, w2, g = (np.asarray(t, dtype=np.float64) for t in (x, w1, w2, g))
    h = x @ w1
    a = np.maximum(h, 0.0)
    y = a @ w2
    if g.shape != y.shape:
        raise ValueError(f"cotangent shape {g.shape} != output shape {y.shape}")
    dh = (g @ w2.T) * (h > 0)
    return {"y": y, "dx": dh @ w1.T, "dw1": x.T @ dh, "dw2": a.T @ g}


# ----------------------------------------------------------------------------- bounds

def unit_roundoff(dtype_name: str) -> float:
    """u of a format: 2^-53 float64, 2^-24 float32, 2^-11 float16, 2^-8 bfloat16."""
    try:
        return UNIT_ROUNDOFF[dtype_name]
    except KeyError:
        raise ValueError(f"unknown format {dtype_name!r}") from None


def gamma(n: int, u: float) -> float:
    """gamma_n(u) = n u / (1 - n u): bounds |prod_{i<=n} (1 + d_i)^{+-1} - 1| for |d_i| <= u."""
    nu = n * u
    if nu >= 1:
        raise ValueError(f"gamma undefined: n u = {nu} >= 1")
    return nu / (1 - nu)


def _slack(w: int) -> float:
    """Relative slack for evaluating a bound in float64 (a few roundings per rank)."""
    return 1 + 4 * (w + 1) * U64


def _abs_sum(xs: list[np.ndarray]) -> np.ndarray:
    return np.sum(np.abs(np.stack(_f64(xs))), axis=0)


def sum_bound(xs: list[np.ndarray], dtype_name: str) -> np.ndarray:
    """Certifies |fl(sum_r x_r) - sum_r x_r| <= gamma_{W-1}(u) sum_r |x_r| elementwise, for
    the W-1 additions done in ANY order (any tree) and each rounded to ``dtype_name``, the
    input format and the weakest accumulator a backend may use (Higham 4.2). A wider
    accumulator rounded to the input format at the end is covered too, since
    gamma_{W-1}(u_wide) + u (1 + gamma_{W-1}(u_wide)) <= gamma_{W-1}(u) when u_wide <= u^2.
    Zero for W = 1. (Times a 1 + O(W u64) slack for evaluating the bound in float64.)"""
    xs = _f64(xs)
    _same_shape(xs)
    return gamma(len(xs) - 1, unit_roundoff(dtype_name)) * _abs_sum(xs) * _slack(len(xs))


def avg_bound(xs: list[np.ndarray], dtype_name: str) -> np.ndarray:
    """Certifies |fl(avg) - S/W| (S = sum_r x_r, A = sum_r |x_r|, g = gamma_{W-1}(u)) for
    each way a backend may compute the mean in ``dtype_name``; the max of:

    - post-scaling, fl(fl(S) / W) or fl(fl(S) * fl(1/W)): with |fl(S) - S| <= g A and
      |fl(S)| <= |S| + g A, the error is <= g A / W + (2u + u^2) (|S| + g A) / W + eta
      (one rounding of 1/W, one of the product; a plain division has only one);
    - pre-scaling, sum_r fl(x_r / W) or sum_r fl(x_r * fl(1/W)) (NCCL's PreMulSum for
      floating types): each term t_r has |t_r - x_r/W| <= (2u + u^2) |x_r| / W + eta and the
      sum of the t_r adds g sum_r |t_r|, so the error is <= ((1 + u)^2 (1 + g) - 1) A / W
      + W eta (1 + g).

    eta = half the format's smallest subnormal (underflow of a scaling)."""
    xs = _f64(xs)
    _same_shape(xs)
    w = len(xs)
    u, eta = unit_roundoff(dtype_name), ETA[dtype_name]
    g = gamma(w - 1, u)
    a = _abs_sum(xs)
    s = np.abs(_reduce(xs, "sum"))
    post = g * a / w + (2 * u + u * u) * (s + g * a) / w + eta
    pre = ((1 + u) ** 2 * (1 + g) - 1) * a / w + w * eta * (1 + g)
    return np.maximum(post, pre) * _slack(w)


def product_bound(xs: list[np.ndarray], dtype_name: str) -> np.ndarray:
    """Certifies |fl(prod_r x_r) - prod_r x_r| <= gamma_{W-1}(u) |prod_r x_r| for the W-1
    multiplications in any order, each rounded to ``dtype_name`` (Higham 3.1; assumes no
    underflow or overflow in the partial products)."""
    xs = _f64(xs)
    _same_shape(xs)
    w = len(xs)
    ref = np.abs(_reduce(xs, "product"))  # |prod| <= ref / (1 - gamma_{W-1}(u64))
    return gamma(w - 1, unit_roundoff(dtype_name)) * ref / (1 - gamma(w - 1, U64)) * _slack(w)


def exact_or_rounded(values: np.ndarray, dtype_name: str) -> np.ndarray:
    """Certifies |fl(v) - v| <= u |v| for one round-to-nearest of float64 values v to
    ``dtype_name`` in its normal range. min / max / gather / scatter / all-to-all / broadcast
    move values without arithmetic, so their bound is 0 for representable inputs; this is
    for the output rounding of derived quantities."""
    return unit_roundoff(dtype_name) * np.abs(np.asarray(values, dtype=np.float64))


def reference_error(xs: list[np.ndarray], op: str) -> np.ndarray:
    """Bound on |all_reduce(xs, op) - exact| (the oracle's own float64 error): sum is
    correctly rounded, <= u64 |S| <= gamma_1 |ref|; avg rounds twice, <= gamma_3 |ref| +
    eta64; product rounds W-1 times, <= gamma_{W-1} |prod| <= gamma_{W-1} / (1 -
    gamma_{W-1}) |ref|; min / max are exact."""
    xs = _f64(xs)
    w = len(xs)
    ref = np.abs(_reduce(xs, op))
    if op in ("min", "max"):
        return np.zeros_like(ref)
    if op == "sum":
        return gamma(1, U64) * ref * _slack(w)
    if op == "avg":
        return (gamma(3, U64) * ref + ETA["float64"]) * _slack(w)
    gp = gamma(w - 1, U64)
    return gp / (1 - gp) * ref * _slack(w)
