"""The grid_sample forward check: a forward-error bound per output element.

An output is a short weighted sum, out = sum_t w_t v_t over k taps (bilinear 4, bicubic 16),
with the weights computed from the grid coordinate in the kernel's compute precision u_c:
float64 for float64, float32 for the others. float16 / bfloat16 certify a kernel that
computes coordinates, weights and the sum in float32 and rounds the output once (what
torch's CUDA kernel and every fast kernel does); torch's CPU kernel computes them in the
half type and fails (an expected failure of torch's own, device_matrix.yaml). Three sources
of error, elementwise:

- the sum and the weights' own rounding: gamma_{k+3}(u_c) sum_t |w_t| |v_t| (Higham, eq.
  3.5; the +3 covers 1 - t and wy * wx), plus for bicubic 48 u_c M (the cubic's terms, up
  to 2.25 in magnitude, cancel near the knots);
- the coordinate: unnormalizing g to a pixel position p costs <= 4 u_c (|p| + size) pixels
  per axis, and the output moves by at most L M per pixel (L = 2 for bilinear, the maximum of
  sum_j |W'| * sum_i |W| for bicubic), M the largest |input| of the (n, c) image;
- one rounding of the output: u_out |out| (+ half the smallest subnormal).

Nearest mode has no sum: the output is one input value, the one at round-half-even(p). A
coordinate error can move p across a half-integer, so the output must equal the oracle's at
p or at a grid moved by the coordinate error in either direction along either axis.
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from conformance.harness import recheck
from conformance.harness.compare import Measurement, elementwise_bound, exact
from conformance.harness.record import Record
from conformance.harness.tensors import dtype_name
from oracles import grid_sample as og
from oracles.gemm import gamma

TAPS = {"bilinear": 4, "bicubic": 16, "nearest": 1}


def _gammas(n: np.ndarray, u: float) -> np.ndarray:
    """gamma_n elementwise; inf where n u >= 1 (no bound that long in that precision)."""
    nu = n * u
    with np.errstate(divide="ignore"):
        return np.where(nu < 1, nu / np.maximum(1 - nu, 1e-300), np.inf)


def _ambiguous(grids: list[np.ndarray], shape: tuple[int, ...], ga: np.ndarray, padding: str,
               align: bool) -> np.ndarray:
    """Nearest: an output whose pixel changes under its coordinate's rounding may send its
    gradient to any of those pixels: |g| allowed on each of them."""
    n, _, h, w = shape
    picks = [og._taps(np.zeros((n, 1, h, w)), gr, "nearest", padding, align)[2:]
             for gr in grids]
    iys = np.stack([ty[0][0] for ty, _ in picks])
    ixs = np.stack([tx[0][0] for _, tx in picks])
    oks = np.stack([ty[1][0] & tx[1][0] for ty, tx in picks])
    amb = (iys != iys[0]).any(0) | (ixs != ixs[0]).any(0) | (oks != oks[0]).any(0)
    out = np.zeros(shape)
    nidx = np.arange(n)[:, None, None]
    for iy, ix, ok in zip(iys, ixs, oks, strict=True):
        term = np.where((amb & ok)[:, None], ga, 0.0)
        np.add.at(out, (nidx, slice(None), iy, ix), np.moveaxis(term, 1, -1))
    return out


# a weight's own rounding, in units of u_c: 1 - t, t and wy * wx (bilinear); the cubic's
# terms, up to 2.25 in magnitude, cancelling near the knots (bicubic); none (nearest)
WEIGHT_ERROR = {"bilinear": 4.0, "bicubic": 48.0, "nearest": 0.0}


def _tap_slope() -> float:
    """max over t of max_j |W'_j(t)| max_i |W_i(t)|: how fast one bicubic tap weight moves
    per pixel of coordinate."""
    t = np.linspace(0.0, 1.0, 2001)
    w, dw = og.cubic_weights(t)
    return float(np.max(np.abs(dw).max(axis=0)) * np.max(np.abs(w).max(axis=0)))


def _cubic_lipschitz() -> float:
    t = np.linspace(0.0, 1.0, 2001)
    w, dw = og.cubic_weights(t)
    return float(np.max(np.abs(dw).sum(axis=0)) * np.max(np.abs(w).sum(axis=0)))


LIPSCHITZ = {"bilinear": 2.0, "bicubic": _cubic_lipschitz()}
# per tap weight and pixel of coordinate: bilinear |d(wy wx)/dpx| = wy <= 1; nearest moves
# by whole pixels (checks._ambiguous)
TAP_SLOPE = {"bilinear": 1.0, "bicubic": _tap_slope(), "nearest": 0.0}


def precisions(dtype: torch.dtype) -> tuple[float, float, float]:
    """(u_c, u_out, half the smallest subnormal of the output)."""
    fi = torch.finfo(dtype)
    u_c = 2.0**-53 if dtype == torch.float64 else 2.0**-24
    return u_c, float(fi.eps) / 2, float(fi.smallest_normal) * float(fi.eps) / 2


def _positions(grid: np.ndarray, h: int, w: int, align: bool) -> tuple[np.ndarray, np.ndarray]:
    px, _ = og.unnormalize(grid[..., 0], w, align)
    py, _ = og.unnormalize(grid[..., 1], h, align)
    return px, py


def bound(inp: np.ndarray, grid: np.ndarray, ref: np.ndarray, mode: str, padding: str,
          align: bool, dtype: torch.dtype) -> np.ndarray:
    u_c, u_out, eta = precisions(dtype)
    n, c, h, w = inp.shape
    big_m = np.abs(inp).reshape(n, c, -1).max(axis=-1)[:, :, None, None]
    mag = og.interp_magnitude(inp, grid, mode, padding, align)
    out = gamma(TAPS[mode] + 3, u_c) * mag
    if mode == "bicubic":
        out = out + 48 * u_c * big_m
    px, py = _positions(grid, h, w, align)
    # a non-finite coordinate is mapped to a fixed position by border / reflection padding
    # (and to NaN or 0 by zeros padding, which must match exactly): no coordinate error
    with np.errstate(invalid="ignore"):
        dx = np.where(np.isfinite(px), 4 * u_c * (np.abs(px) + w), 0.0)
        dy = np.where(np.isfinite(py), 4 * u_c * (np.abs(py) + h), 0.0)
    out = np.nan_to_num(out, nan=0.0) + LIPSCHITZ[mode] * big_m * (dx + dy)[:, None, :, :]
    # where the reference is NaN the output must be NaN too (elementwise_bound): no bound
    return out + u_out * np.abs(np.nan_to_num(ref, nan=0.0)) + eta


def check_forward(record: Record, inp: np.ndarray, grid: np.ndarray, got: np.ndarray,
                  mode: str, padding: str, align: bool, dtype: torch.dtype, label: str) -> None:
    ref = og.grid_sample(inp, grid, mode, padding, align)
    name = dtype_name(dtype)
    if mode == "nearest":
        check_nearest(record, inp, grid, got, ref, padding, align, dtype, label)
        return
    record.require(elementwise_bound(
        f"{label}: |out - ref| <= forward-error bound ({mode}, compute "
        f"{'float64' if dtype == torch.float64 else 'float32'}, output {name})",
        got, ref, bound(inp, grid, ref, mode, padding, align, dtype)))


def perturbed(grid: np.ndarray, h: int, w: int, align: bool, dtype: torch.dtype,
              ties: bool = False) -> list[np.ndarray]:
    """The grid, then the grid moved by its coordinates' rounding error (4 u_c (|p| + size)
    pixels, in grid units) in each of the 8 directions. With ``ties``, an exact tie (both of
    torch's unnormalize formulas exact in the compute precision give a half-integer) is not
    moved: it has no rounding to hide behind (nearest: half to even, nothing else)."""
    u_c, _, _ = precisions(dtype)
    px, py = _positions(grid, h, w, align)
    scale_x = 2.0 / max(w - 1 if align else w, 1)
    scale_y = 2.0 / max(h - 1 if align else h, 1)
    with np.errstate(invalid="ignore"):
        dgx = np.where(np.isfinite(px), 4 * u_c * (np.abs(px) + w) * scale_x * 1.01, 0.0)
        dgy = np.where(np.isfinite(py), 4 * u_c * (np.abs(py) + h) * scale_y * 1.01, 0.0)
        if ties:
            dgx = np.where(_exact_tie(grid[..., 0], px, w, align, dtype), 0.0, dgx)
            dgy = np.where(_exact_tie(grid[..., 1], py, h, align, dtype), 0.0, dgy)
    out = [grid]
    for sx, sy in itertools.product((-1, 0, 1), repeat=2):
        if sx == sy == 0:
            continue
        moved = grid.copy()
        moved[..., 0] += sx * dgx
        moved[..., 1] += sy * dgy
        out.append(moved)
    return out


def _exact_tie(g: np.ndarray, p: np.ndarray, size: int, align: bool, dtype: torch.dtype
               ) -> np.ndarray:
    work = np.float64 if dtype == torch.float64 else np.float32  # the compute precision
    gw = g.astype(work)
    with np.errstate(all="ignore"):
        if align:
            forms = [(gw + 1) / work(2) * work(size - 1), (gw + 1) * work((size - 1) / 2)]
        else:
            forms = [((gw + 1) * work(size) - 1) / work(2), (gw + 1) * work(size / 2) - work(0.5)]
        exact_forms = np.all([f.astype(np.float64) == p for f in forms], axis=0)
        tie = np.isfinite(p) & (np.floor(p) + 0.5 == p)
    return tie & exact_forms


def check_nearest(record: Record, inp: np.ndarray, grid: np.ndarray, got: np.ndarray,
                  ref: np.ndarray, padding: str, align: bool, dtype: torch.dtype,
                  label: str) -> None:
    ok = (got == ref) | (np.isnan(got) & np.isnan(ref))
    alts = [ref]
    for moved in perturbed(grid, inp.shape[-2], inp.shape[-1], align, dtype, ties=True)[1:]:
        alt = og.grid_sample(inp, moved, "nearest", padding, align)
        ok |= (got == alt) | (np.isnan(got) & np.isnan(alt))
        alts.append(alt)
    if padding == "reflection":  # a rounding wider than a reflection period: any pixel
        free = _undetermined(grid, inp.shape[-2], inp.shape[-1], align, dtype)
        if free.any():
            ok |= free[:, None] & _in_plane(inp, got)
    bad = ~ok
    idx = np.argwhere(bad)[:3]
    name = f"{label}: nearest picks the pixel at the coordinate (within its rounding)"
    if recheck.tracing():  # --repro-dir: the output equals one of the candidate pixels
        recheck.expect(recheck.one_of(name, recheck.output(), np.stack(alts), dtype=dtype))
    record.require(exact(name, int(bad.sum()), int(bad.size),
                         "; ".join(f"at {tuple(int(v) for v in i)}: got {got[tuple(i)]!r}, "
                                   f"want {ref[tuple(i)]!r}" for i in idx)))


def _undetermined(grid: np.ndarray, h: int, w: int, align: bool, dtype: torch.dtype
                  ) -> np.ndarray:
    """(N, Ho, Wo): where a coordinate's rounding (4 u_c (|p| + size) pixels) spans a whole
    reflection period (2 size), so the reflected pixel is anywhere on its row or column
    (a finite grid entry of ~1e30 in float64: torch's trunc-based reflection and an exact
    fmod pick different pixels, both right)."""
    u_c, _, _ = precisions(dtype)
    px, py = _positions(grid, h, w, align)
    with np.errstate(invalid="ignore"):
        return (np.isfinite(px) & (4 * u_c * (np.abs(px) + w) >= 2 * w)) \
            | (np.isfinite(py) & (4 * u_c * (np.abs(py) + h) >= 2 * h))


def _in_plane(inp: np.ndarray, got: np.ndarray) -> np.ndarray:
    """Whether each output equals some pixel of its (n, c) input plane."""
    n, c = inp.shape[:2]
    out = np.zeros(got.shape, dtype=bool)
    for i in range(n):
        for j in range(c):
            out[i, j] = np.isin(got[i, j], inp[i, j])
    return out


def _interval(name: str, got: np.ndarray, refs: np.ndarray, slack: np.ndarray) -> Measurement:
    """got within [min refs - slack, max refs + slack], elementwise; NaN only where a
    reference is NaN."""
    lo, hi = np.nanmin(refs, axis=0), np.nanmax(refs, axis=0)
    with np.errstate(invalid="ignore"):
        dist = np.maximum(np.maximum(lo - got, got - hi), 0.0)
        nan_ok = np.isnan(got) & np.isnan(refs).any(axis=0)
        dist = np.where(nan_ok, 0.0, np.where(np.isnan(got), np.inf, dist))
        ratio = np.where(dist == 0, 0.0, dist / slack)
    i = np.unravel_index(int(np.argmax(ratio)), got.shape)
    detail = (f"worst element at {tuple(int(v) for v in i)}: got {got[i]!r}, oracle "
              f"[{lo[i]!r}, {hi[i]!r}] over the coordinate's rounding, slack {slack[i]:.3g}; "
              f"{int(np.count_nonzero(dist > slack))} of {got.size} out of bound")
    return Measurement(name, float(dist[i]), float(slack[i]), detail)


def check_backward(record: Record, inp: np.ndarray, grid: np.ndarray, g: np.ndarray,
                   got_in: np.ndarray, got_grid: np.ndarray, mode: str, padding: str,
                   align: bool, dtype: torch.dtype,
                   leaves: tuple[torch.Tensor, torch.Tensor] | None = None) -> None:
    """Input and grid gradients: each within a summation bound of the oracle's gradient at
    the grid or at the grid moved by its coordinates' rounding (the grid gradient jumps at
    tap boundaries, so a kernel on either side of one is right).

    grad_input[p] sums the m_p terms w g of the (output, tap) pairs landing on p:
    gamma_{m_p+3}(u_c) sum |w| |g| + e_w u_c sum |g| (e_w: a weight's own rounding, 4 for
    bilinear, 48 for bicubic). grad_grid[o] sums m = k C terms g dw/dp v times dp/dg:
    (gamma_{m+3}(u_c) + k e_w u_c) (dp/dg) L sum_c |g| M_c, with the slope bound L and the
    image maxima M_c of the forward bound. Plus one rounding of the output. Nearest: the
    grid gradient is exactly zero. ``leaves``: the input and grid tensors whose gradients
    these are (--repro-dir re-checks both)."""
    n, c, h, w = inp.shape
    grids = perturbed(grid, h, w, align, dtype)
    refs = [og.grid_sample_backward(inp, gr, g, mode, padding, align) for gr in grids]
    ref_in, ref_grid = np.stack([r[0] for r in refs]), np.stack([r[1] for r in refs])
    # per pixel: over the (output, tap) pairs that land on it, the sum of |w| |g| (what the
    # sum adds up), of |g| (a weight's own rounding), of |g| (dx + dy) (the coordinate's
    # rounding moves each weight by at most TAP_SLOPE per pixel) and their count (length)
    u_c, u_out, eta = precisions(dtype)
    px, py = _positions(grid, h, w, align)
    with np.errstate(invalid="ignore"):
        shift = np.where(np.isfinite(px), 4 * u_c * (np.abs(px) + w), 0.0) \
            + np.where(np.isfinite(py), 4 * u_c * (np.abs(py) + h), 0.0)
    _, _, ty, tx = og._taps(inp, grid, mode, padding, align)
    nidx = np.arange(n)[:, None, None]
    ga = np.abs(g)
    sums = {k: np.zeros(inp.shape) for k in ("mag", "hits", "moved", "count")}
    for iy, ix, valid, wy, wx, _, _ in og._pairs(ty, tx):
        at, v = (nidx, slice(None), iy, ix), valid[:, None]
        for key, term in (("mag", np.abs(wy * wx) * ga), ("hits", ga),
                          ("moved", ga * shift[:, None]), ("count", np.ones_like(ga))):
            np.add.at(sums[key], at, np.moveaxis(np.where(v, term, 0.0), 1, -1))
    slack_in = _gammas(sums["count"] + 3, u_c) * sums["mag"] \
        + WEIGHT_ERROR[mode] * u_c * sums["hits"] + TAP_SLOPE[mode] * sums["moved"] \
        + u_out * np.abs(ref_in[0]) + eta
    if mode == "nearest":
        slack_in = slack_in + _ambiguous(grids, inp.shape, ga, padding, align)
    in_name = f"grad_input within the summation bound ({mode})"
    k = TAPS[mode]
    if mode == "nearest":
        if leaves is not None and recheck.tracing():  # --repro-dir: both gradients
            recheck.expect(
                recheck.within_bound(in_name, recheck.grad(leaves[0]), ref_in[0], slack_in,
                                     dtype=dtype),
                recheck.one_of("grad_grid is zero (nearest)", recheck.grad(leaves[1]),
                               np.zeros((1, *got_grid.shape)), dtype=dtype))
        record.require(elementwise_bound(in_name, got_in, ref_in[0], slack_in))
        nonzero = int(np.count_nonzero(got_grid))
        record.require(exact("grad_grid is zero (nearest)", nonzero, got_grid.size))
        return
    big_m = np.abs(inp).reshape(n, c, -1).max(axis=-1)  # (n, c)
    per_out = np.einsum("nchw,nc->nhw", np.abs(g), big_m)
    dpdg = np.array([(w - 1) / 2 if align else w / 2, (h - 1) / 2 if align else h / 2])
    mag_grid = per_out[..., None] * LIPSCHITZ[mode] * dpdg
    slack_grid = (gamma(k * c + 3, u_c) + k * WEIGHT_ERROR[mode] * u_c) * mag_grid \
        + u_out * np.abs(ref_grid[0]) + eta
    grid_name = f"grad_grid within the summation bound ({mode})"
    if leaves is not None and recheck.tracing():  # --repro-dir: both gradients
        lo, hi = np.nanmin(ref_grid, axis=0), np.nanmax(ref_grid, axis=0)
        recheck.expect(
            recheck.within_bound(in_name, recheck.grad(leaves[0]), ref_in[0], slack_in,
                                 dtype=dtype),
            recheck.within_interval(grid_name, recheck.grad(leaves[1]), lo - slack_grid,
                                    hi + slack_grid, nan_ok=np.isnan(ref_grid).any(axis=0),
                                    dtype=dtype))
    record.require(elementwise_bound(in_name, got_in, ref_in[0], slack_in))
    record.require(_interval(grid_name, got_grid, ref_grid, slack_grid))

