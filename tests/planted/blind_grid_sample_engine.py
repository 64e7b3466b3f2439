"""The knobbed torch engine the blind grid_sample faults run: an independent 2-D forward
whose ``Knobs`` say where it departs from torch (``blind_grid_sample_faults.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from .blind_grid_sample_reference import A_TORCH, Tensor, float32_compute

# ----------------------------------------------------------------------------------------
# the knobbed torch engine the faults run
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Knobs:
    """Where ``_engine`` departs from torch (the defaults are torch, exact in float64)."""

    coord: bool = False  # unnormalise (+ pad) the coordinate in the input dtype
    coord_round: bool = False  # the coordinate rounded to the input dtype before floor
    reflect_low: bool = False  # reflection evaluated in the input dtype
    weights_low: bool = False  # bilinear weights and their products in the input dtype
    cubic_low: bool = False  # the cubic coefficients in the input dtype
    acc_low: bool = False  # products and running sums of the taps in the input dtype
    tap_index_low: bool = False  # bicubic's tap positions x0 - 1 + i in the input dtype
    a: float = A_TORCH  # cubic convolution coefficient
    nearest_away: bool = False  # nearest rounds ties away from zero (std::round)
    bicubic_pad: str = "tap"  # "tap" (torch), "coord" (ORT), "clamp_reflect" (burn-flex)
    ignore_padding: bool = False  # border / reflection sampled as zeros
    nan_clamp: bool = False  # the clamp keeps NaN (torch.clamp) instead of giving 0
    seam: int = 0  # input columns in tiles of this width without halo (0: none)
    offset_f32: bool = False  # the flat input offset y * W + x formed in float32


W64 = torch.float64


def _unnorm(g: Tensor, size: int, ac: bool) -> Tensor:
    if ac:
        return (g + 1) / 2 * (size - 1)
    return ((g + 1) * size - 1) / 2


def _clip(x: Tensor, size: int, k: Knobs) -> Tensor:
    y = x.clamp(0, size - 1)
    return y if k.nan_clamp else torch.where(x.isnan(), torch.zeros_like(y), y)


def _reflect(x: Tensor, size: int, ac: bool) -> Tensor:
    """reflect_coordinates in x's dtype (every operation rounded there)."""
    if ac and size == 1:
        return torch.zeros_like(x)
    lo = 0.0 if ac else -0.5
    span = (size - 1) if ac else size
    t = (x - lo).abs()
    extra = torch.fmod(t, span)
    odd = torch.remainder(torch.floor(t / span), 2) == 1
    return torch.where(odd, span - extra + lo, extra + lo)


def _pad(x: Tensor, size: int, pad: str, ac: bool, k: Knobs, low: torch.dtype) -> Tensor:
    if pad == "border":
        return _clip(x, size, k)
    if pad == "reflection":
        if k.reflect_low:
            return _clip(_reflect(x.to(low), size, ac), size, k).to(x.dtype)
        return _clip(_reflect(x, size, ac), size, k)
    return x


def _cubic(t: Tensor, a: float) -> list[Tensor]:
    def c1(x: Tensor) -> Tensor:
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def c2(x: Tensor) -> Tensor:
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    return [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)]


class _Gather:
    """Values of the input (N, C, H*W) at tap positions, 0 out of bounds."""

    def __init__(self, inp: Tensor, dtype: torch.dtype, k: Knobs) -> None:
        n, c, h, w = inp.shape
        self.h, self.w, self.k = h, w, k
        self.flat = inp.detach().to(dtype).reshape(n, c, h * w)

    def __call__(self, xi: Tensor, yi: Tensor, base: Tensor | None = None) -> Tensor:
        h, w, k = self.h, self.w, self.k
        xi, yi = xi.to(W64), yi.to(W64)
        if k.seam and w > k.seam and base is not None:  # tap read from the base's tile
            tile = torch.floor(base.to(W64) / k.seam)
            xi = torch.where(torch.floor(xi / k.seam) != tile,
                             tile * k.seam + torch.remainder(xi, k.seam), xi)
        ok = (xi.isfinite() & yi.isfinite() & (xi >= 0) & (xi <= w - 1) & (yi >= 0)
              & (yi <= h - 1))
        x0 = torch.where(ok, xi, torch.zeros_like(xi))
        y0 = torch.where(ok, yi, torch.zeros_like(yi))
        off = y0.float() * w + x0.float() if k.offset_f32 else y0 * w + x0
        idx = off.long()
        n, c, _ = self.flat.shape
        v = self.flat.gather(2, idx[:, None, :].expand(n, c, idx.shape[1]))
        return torch.where(ok[:, None, :], v, torch.zeros_like(v))


def _engine(inp: Tensor, grid: Tensor, mode: str, pad: str, ac: bool, k: Knobs) -> Tensor:
    """grid_sample's forward (no autograd), departing from torch where ``k`` says."""
    dt = inp.dtype
    n, c, h, w = inp.shape
    ho, wo = grid.shape[1], grid.shape[2]
    if k.ignore_padding:
        pad = "zeros"
    acc = dt if k.acc_low else W64
    gather = _Gather(inp, acc, k)
    g = grid.detach().reshape(n, ho * wo, 2)
    cd = dt if k.coord else W64
    ix = _unnorm(g[..., 0].to(cd), w, ac)
    iy = _unnorm(g[..., 1].to(cd), h, ac)
    if mode == "bicubic":
        if k.bicubic_pad == "coord":
            ix, iy = _pad(ix, w, pad, ac, k, dt), _pad(iy, h, pad, ac, k, dt)
        ix, iy = ix.to(W64), iy.to(W64)
        if k.coord_round:
            ix, iy = ix.to(dt).to(W64), iy.to(dt).to(W64)
        x0, y0 = ix.floor(), iy.floor()
        cdt = dt if k.cubic_low else W64
        cx, cy = _cubic((ix - x0).to(cdt), k.a), _cubic((iy - y0).to(cdt), k.a)
        tdt = dt if k.tap_index_low else W64
        tpad = pad
        if k.bicubic_pad == "coord" and pad != "zeros":
            tpad = "border"
        if k.bicubic_pad == "clamp_reflect" and pad == "reflection":
            tpad = "border"
        xs = [_pad(x0.to(tdt) - 1 + i, w, tpad, ac, k, dt) for i in range(4)]
        ys = [_pad(y0.to(tdt) - 1 + j, h, tpad, ac, k, dt) for j in range(4)]
        out = torch.zeros(n, c, ho * wo, dtype=acc)
        for j in range(4):
            row = torch.zeros_like(out)
            for i in range(4):
                row = row + cx[i].to(acc)[:, None, :] * gather(xs[i], ys[j], x0)
            out = out + cy[j].to(acc)[:, None, :] * row
        return out.to(dt).reshape(n, c, ho, wo)
    ix, iy = _pad(ix, w, pad, ac, k, dt).to(W64), _pad(iy, h, pad, ac, k, dt).to(W64)
    if k.coord_round:
        ix, iy = ix.to(dt).to(W64), iy.to(dt).to(W64)
    if mode == "nearest":
        if k.nearest_away:
            xr, yr = ix.sign() * (ix.abs() + 0.5).floor(), iy.sign() * (iy.abs() + 0.5).floor()
        else:
            xr, yr = ix.round(), iy.round()
        return gather(xr, yr).to(dt).reshape(n, c, ho, wo)
    x0, y0 = ix.floor(), iy.floor()
    wdt = dt if k.weights_low else W64
    wx = [((x0 + 1) - ix).to(wdt), (ix - x0).to(wdt)]
    wy = [((y0 + 1) - iy).to(wdt), (iy - y0).to(wdt)]
    out = torch.zeros(n, c, ho * wo, dtype=acc)
    for dy in range(2):
        for dx in range(2):
            wt = (wx[dx] * wy[dy]).to(acc)
            out = out + wt[:, None, :] * gather(x0 + dx, y0 + dy, x0)
    return out.to(dt).reshape(n, c, ho, wo)


class _ValuesOf(torch.autograd.Function):
    """Forward: ``value``; backward: the gradient goes to ``ref`` (a correct result)."""

    @staticmethod
    def forward(ctx: Any, ref: Tensor, value: Tensor) -> Tensor:
        return value.clone()

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor, None]:
        return g, None


def _attach(value: Tensor, inp: Tensor, grid: Tensor, mode: str, pad: str,
            ac: bool) -> Tensor:
    """``value`` carrying float32_compute's gradients (a forward-only fault)."""
    if torch.is_grad_enabled() and (inp.requires_grad or grid.requires_grad):
        return _ValuesOf.apply(float32_compute(inp, grid, mode, pad, ac), value)
    return value


def _run(inp: Tensor, grid: Tensor, mode: str, pad: str, ac: bool,
         dtypes: tuple[torch.dtype, ...], **knobs: Any) -> Tensor:
    """The engine with ``knobs`` in ``dtypes``; F.grid_sample (float32 for half) elsewhere."""
    if inp.dtype not in dtypes:
        return float32_compute(inp, grid, mode, pad, ac)
    return _attach(_engine(inp, grid, mode, pad, ac, Knobs(**knobs)), inp, grid, mode, pad, ac)
