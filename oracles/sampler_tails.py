"""Exact probabilities the sampler tail, serial and stream checks compare with.

- ``tail_thresholds``: representable thresholds near a law's far quantiles (q and 1 - q)
  in a dtype, and the exact probability that the law, rounded to that dtype (overflow to
  ±inf included), lands at or beyond each.
- ``marginal_cells``: ~equiprobable cells of a law in a dtype (edges at representable
  values) and their exact probabilities, for the serial chi-square of consecutive pairs.
- ``collision_probability``: P(two independent draws are equal), bounded below by the
  2^-24 grid torch's float samplers draw from.

Torch-free; every probability from the scipy law pushed through round-to-nearest.
"""

from __future__ import annotations

import math

import numpy as np

from oracles.formats import FloatFormat, round_to, rounding_cells
from oracles.samplers import Oracle

GRID_COLLISION = 2.0**-24  # torch's float samplers draw from (at most) a 24-bit grid


def _low(fmt: FloatFormat | None) -> bool:
    return fmt is not None and fmt.name in ("float16", "bfloat16")


def _law_points(o: Oracle, fmt: FloatFormat | None) -> tuple[np.ndarray, np.ndarray] | None:
    """The law's values and masses when it is a finite list (discrete, or 16-bit)."""
    if o.discrete:
        k = o.support_values()
        p = o.dist.pmf(k)
        return k, p / p.sum()
    if _low(fmt):
        return o.rounded_pmf(fmt)
    return None


def _nearest(candidates: list[tuple[float, float]], q: float) -> tuple[float, float] | None:
    """The (threshold, probability) whose probability is nearest q (log scale), if within
    a factor 10 of it."""
    ok = [(t, p) for t, p in candidates if p > 0]
    if not ok:
        return None
    t, p = min(ok, key=lambda tp: abs(math.log(tp[1] / q)))
    return (t, p) if q / 10 <= p <= 10 * q else None


def tail_thresholds(o: Oracle, fmt: FloatFormat | None, qs: tuple[float, ...]
                    ) -> list[tuple[str, float, float]]:
    """(side, threshold t, P(X <= t) for "lower" or P(X >= t) for "upper") per q."""
    out: list[tuple[str, float, float]] = []
    points = _law_points(o, fmt)
    for side in ("lower", "upper"):
        for q in qs:
            if points is not None:
                v, p = points
                cum = np.cumsum(p) if side == "lower" else np.cumsum(p[::-1])[::-1]
                near = np.flatnonzero((cum >= q / 10) & (cum <= 10 * q) & (cum <= 0.5))
                cand = [(float(v[i]), float(cum[i])) for i in near]
            else:
                t0 = float(o.ppf(q) if side == "lower" else o.dist.isf(q))
                t = float(round_to(np.array([t0]), fmt)[0])
                lo_t, hi_t = rounding_cells(np.array([t]), fmt)
                prob = (float(o.dist.cdf(hi_t[0])) if side == "lower"
                        else float(o.dist.sf(lo_t[0])))
                if o.fold is not None:  # rounding to `to` stores `from` (uniform_)
                    to, frm = o.fold
                    c_lo, c_hi = rounding_cells(round_to(np.array([to]), fmt), fmt)
                    moved = float(o.cell_probs(c_lo, c_hi)[0])
                    if side == "upper" and t <= to:
                        prob -= moved
                    if side == "lower" and t >= frm:
                        prob += moved
                cand = [(t, prob)]
            hit = _nearest(cand, q)
            if hit and all((side, hit[0]) != (s, t) for s, t, _ in out):
                out.append((side, hit[0], hit[1]))
    return out


def marginal_cells(o: Oracle, fmt: FloatFormat | None, cells: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Cell edges (a value x falls in cell ``searchsorted(edges, x, "right")``) and the
    exact cell probabilities, ~``cells`` equiprobable cells (fewer for a short support)."""
    points = _law_points(o, fmt)
    if points is not None:
        v, p = points
        cum = np.cumsum(p)
        cuts = np.unique(np.searchsorted(cum, np.linspace(0, 1, cells + 1)[1:-1]))
        edges = v[np.clip(cuts + 1, 0, v.size - 1)]
        edges = np.unique(edges[edges > v[0]])
        idx = np.searchsorted(edges, v, side="right")
        return edges, np.bincount(idx, weights=p, minlength=edges.size + 1)
    q = o.ppf(np.linspace(0, 1, cells + 1)[1:-1])
    edges = np.unique(round_to(q[np.isfinite(q)], fmt))
    lo, _ = rounding_cells(edges, fmt)
    f = np.concatenate([[0.0], o.cdf(lo), [1.0]])
    return edges, np.diff(f)


def collision_probability(o: Oracle, fmt: FloatFormat | None) -> float:
    """P(X = X') for independent X, X' from the law in the dtype, at least the grid's."""
    points = _law_points(o, fmt)
    if points is None:
        return GRID_COLLISION
    p = points[1]
    return max(float(np.sum(p * p)), GRID_COLLISION)
