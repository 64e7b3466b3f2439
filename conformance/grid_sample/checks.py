"""The grid_sample forward check: a forward-error bound per output element.

An output is a short weighted sum, out = sum_t w_t v_t over k taps (bilinear 4, bicubic 16),
with the weights computed from the grid coordinate in the kernel's compute precision u_c
(float32 for float32, float64 for float64, and the dtype itself for float16 / bfloat16:
torch's CPU kernel computes coordinates and weights in the input type; one that computes
them in float32 is well inside the bound). Three sources of error, elementwise:

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

from conformance.compare import elementwise_bound, exact
from conformance.record import Record
from oracles import grid_sample as og

TAPS = {"bilinear": 4, "bicubic": 16, "nearest": 1}


def _gamma(n: int, u: float) -> float:
    return n * u / (1 - n * u)


def _cubic_lipschitz() -> float:
    t = np.linspace(0.0, 1.0, 2001)
    w, dw = og.cubic_weights(t)
    return float(np.max(np.abs(dw).sum(axis=0)) * np.max(np.abs(w).sum(axis=0)))


LIPSCHITZ = {"bilinear": 2.0, "bicubic": _cubic_lipschitz()}


def precisions(dtype: torch.dtype) -> tuple[float, float, float]:
    """(u_c, u_out, half the smallest subnormal of the output)."""
    fi = torch.finfo(dtype)
    u_c = {torch.float64: 2.0**-53, torch.float32: 2.0**-24}.get(dtype, float(fi.eps) / 2)
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
    out = _gamma(TAPS[mode] + 3, u_c) * mag
    if mode == "bicubic":
        out = out + 48 * u_c * big_m
    px, py = _positions(grid, h, w, align)
    # a non-finite coordinate is mapped to a fixed position by border / reflection padding
    # (and to NaN or 0 by zeros padding, which must match exactly): no coordinate error
    with np.errstate(invalid="ignore"):
        dx = np.where(np.isfinite(px), 4 * u_c * (np.abs(px) + w), 0.0)
        dy = np.where(np.isfinite(py), 4 * u_c * (np.abs(py) + h), 0.0)
    out = np.nan_to_num(out, nan=0.0) + LIPSCHITZ[mode] * big_m * (dx + dy)[:, None, :, :]
    return out + u_out * np.abs(ref) + eta


def check_forward(record: Record, inp: np.ndarray, grid: np.ndarray, got: np.ndarray,
                  mode: str, padding: str, align: bool, dtype: torch.dtype, label: str) -> None:
    ref = og.grid_sample(inp, grid, mode, padding, align)
    name = str(dtype).removeprefix("torch.")
    if mode == "nearest":
        check_nearest(record, inp, grid, got, ref, padding, align, dtype, label)
        return
    record.require(elementwise_bound(
        f"{label}: |out - ref| <= forward-error bound ({mode}, compute "
        f"{'float64' if dtype == torch.float64 else 'float32'}, output {name})",
        got, ref, bound(inp, grid, ref, mode, padding, align, dtype)))


def _exact_tie(g: np.ndarray, p: np.ndarray, size: int, align: bool, dtype: torch.dtype
               ) -> np.ndarray:
    work = {torch.float64: np.float64, torch.float32: np.float32,
            torch.float16: np.float16}.get(dtype, np.float32)
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
    u_c, _, _ = precisions(dtype)
    h, w = inp.shape[-2:]
    px, py = _positions(grid, h, w, align)
    scale_x = 2.0 / max(w - 1 if align else w, 1)
    scale_y = 2.0 / max(h - 1 if align else h, 1)
    with np.errstate(invalid="ignore"):
        dgx = np.where(np.isfinite(px), 4 * u_c * (np.abs(px) + w) * scale_x * 1.01, 0.0)
        dgy = np.where(np.isfinite(py), 4 * u_c * (np.abs(py) + h) * scale_y * 1.01, 0.0)
        # an exact tie (both of torch's unnormalize formulas exact in the compute precision
        # give a half-integer) has no rounding to hide behind: half to even, nothing else
        dgx = np.where(_exact_tie(grid[..., 0], px, w, align, dtype), 0.0, dgx)
        dgy = np.where(_exact_tie(grid[..., 1], py, h, align, dtype), 0.0, dgy)
    ok = (got == ref) | (np.isnan(got) & np.isnan(ref))
    for sx, sy in itertools.product((-1, 0, 1), repeat=2):
        if sx == sy == 0:
            continue
        moved = grid.copy()
        moved[..., 0] += sx * dgx
        moved[..., 1] += sy * dgy
        alt = og.grid_sample(inp, moved, "nearest", padding, align)
        ok |= (got == alt) | (np.isnan(got) & np.isnan(alt))
    bad = ~ok
    idx = np.argwhere(bad)[:3]
    record.require(exact(f"{label}: nearest picks the pixel at the coordinate (within its "
                         f"rounding)", int(bad.sum()), int(bad.size),
                         "; ".join(f"at {tuple(int(v) for v in i)}: got {got[tuple(i)]!r}, "
                                   f"want {ref[tuple(i)]!r}" for i in idx)))
