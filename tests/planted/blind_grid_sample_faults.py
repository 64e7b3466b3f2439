"""Blind grid_sample faults and outside implementations
(``--impl grid_sample=planted.blind_grid_sample_faults:<attr>``).

Written WITHOUT reading how the suite checks grid_sample: only from the contract
(``docs/contracts.md``, ``grid_sample``), torch's documentation of
``torch.nn.functional.grid_sample``, ATen's ``GridSampler.h`` / ``GridSampler.cpp`` (the
unnormalisation, ``clip_coordinates``, ``reflect_coordinates``, bicubic's per-tap
``get_value_bounded`` and A = -0.75) and upstream reports: pytorch#89836 / #96429 / PR #96586
(half grid_sample computed in half), #94816 (half coordinates on 4K images), #15386
(padding_mode ignored), #23925 (border gradients), #97000 (nearest rounding), #174339
(MPS NHWC), #194787 (dropped taps), onnxruntime#10607 / #28090 (bicubic padding applied to
the coordinate), burn-flex#29 (reflection clamps taps), burn#5663 (round half away).

``_engine`` is an independent torch re-implementation of the 2-D forward whose ``Knobs`` say
where it departs from torch (the defaults are torch's semantics, computed in float64 and
rounded once). A fault runs the engine with one knob turned, in the dtypes where a real
kernel would plausibly be wrong, and ``F.grid_sample`` (or the float32 upcast) elsewhere. A
forward-only fault takes its gradients from ``float32_compute`` (``_attach``), so only the
values are wrong; the backward faults are autograd functions of their own.

``FAULTS`` lists the faults, ``CORRECT`` the two outside implementations: ``numpy_cast`` (a
pure numpy float64 forward and backward, cast to the input dtype) and ``float32_compute``.
Two things found while writing them: torch 2.13's CPU backward segfaults on a NaN / inf
grid under border / reflection padding (``float32_compute`` guards its backward), and the
reflection of a huge finite coordinate (grid 1e30) depends on how it is evaluated:
``numpy_cast`` reflects exactly (fmod of the float64 coordinate), torch's vectorised CPU
kernel with ``abs - trunc(abs / 2 span) * 2 span`` (landing on the edge pixel), and the
exact real answer is a third pixel; the coordinate's own rounding (~5e14 pixels) exceeds the
span, so each is "the pixel at the coordinate within its rounding".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

Tensor = torch.Tensor
HALF = (torch.float16, torch.bfloat16)
FULL = (torch.float32, torch.float64)
ALL = (*HALF, *FULL)
A_TORCH = -0.75  # torch's cubic convolution coefficient (GridSampler.h, UpSample.h)


# ----------------------------------------------------------------------------------------
# numpy float64 reference (forward and backward)
# ----------------------------------------------------------------------------------------


def _np_unnormalize(g: np.ndarray, size: int, ac: bool) -> tuple[np.ndarray, float]:
    """Pixel coordinate of a normalised one, and d pixel / d normalised."""
    if ac:
        return (g + 1) / 2 * (size - 1), (size - 1) / 2
    return ((g + 1) * size - 1) / 2, size / 2


def _np_clip(x: np.ndarray, size: int) -> np.ndarray:
    """clip_coordinates as torch's CPU kernel evaluates it: NaN -> 0, +-inf to the ends."""
    return np.where(np.isnan(x), 0.0, np.clip(x, 0, size - 1))


def _np_clip_grad(x: np.ndarray, size: int) -> np.ndarray:
    """clip_coordinates_set_grad: the borders themselves count as clipped (gradient 0)."""
    return ((x > 0) & (x < size - 1)).astype(np.float64)


def _np_reflect(x: np.ndarray, size: int, ac: bool) -> tuple[np.ndarray, np.ndarray]:
    """reflect_coordinates about [0, size - 1] (align_corners) or [-0.5, size - 0.5], and
    its derivative (+-1); a non-finite coordinate reflects to NaN."""
    if ac and size == 1:
        return np.zeros_like(x), np.zeros_like(x)
    lo = 0.0 if ac else -0.5
    span = float(size - 1) if ac else float(size)
    d = x - lo
    sign = np.where(d < 0, -1.0, 1.0)
    t = np.abs(d)
    extra = np.fmod(t, span)
    odd = np.fmod(np.floor(t / span), 2.0) == 1.0
    return np.where(odd, span - extra + lo, extra + lo), np.where(odd, -sign, sign)


def _np_source(g: np.ndarray, size: int, pad: str, ac: bool) -> tuple[np.ndarray, np.ndarray]:
    """grid_sampler_compute_source_index(_set_grad): the padded pixel coordinate (bilinear,
    nearest) and d coordinate / d grid."""
    x, scale = _np_unnormalize(g, size, ac)
    mult = np.full_like(x, scale)
    if pad == "border":
        mult = mult * _np_clip_grad(x, size)
        x = _np_clip(x, size)
    elif pad == "reflection":
        x, dref = _np_reflect(x, size, ac)
        mult = mult * dref * _np_clip_grad(x, size)
        x = _np_clip(x, size)
    return x, mult


def _np_tap(xi: np.ndarray, size: int, pad: str, ac: bool) -> np.ndarray:
    """Bicubic's compute_coordinates on an (integer-valued) tap position."""
    if pad == "border":
        return _np_clip(xi, size)
    if pad == "reflection":
        return _np_clip(_np_reflect(xi, size, ac)[0], size)
    return xi


def _np_inb(x: np.ndarray, size: int) -> np.ndarray:
    return np.isfinite(x) & (x >= 0) & (x <= size - 1)


def _np_index(xi: np.ndarray, yi: np.ndarray, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat index (0 where out of bounds) and the in-bounds mask of taps (xi, yi)."""
    ok = _np_inb(xi, w) & _np_inb(yi, h)
    idx = np.where(ok, np.where(ok, yi, 0) * w + np.where(ok, xi, 0), 0).astype(np.int64)
    return idx, ok


def _np_gather(flat: np.ndarray, idx: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """(N, C, P) values at flat indices idx (N, P); 0 where not ok."""
    v = np.take_along_axis(flat, idx[:, None, :], axis=2)
    return np.where(ok[:, None, :], v, 0.0)


def _np_cubic(t: np.ndarray, a: float = A_TORCH) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Keys' cubic convolution weights of taps -1, 0, 1, 2 at fraction t, and d / dt."""
    def c1(x: np.ndarray) -> np.ndarray:  # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def c2(x: np.ndarray) -> np.ndarray:  # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a

    def d1(x: np.ndarray) -> np.ndarray:
        return (3 * (a + 2) * x - 2 * (a + 3)) * x

    def d2(x: np.ndarray) -> np.ndarray:
        return (3 * a * x - 10 * a) * x + 8 * a

    w = [c2(t + 1), c1(t), c1(1 - t), c2(2 - t)]
    dw = [d2(t + 1), d1(t), -d1(1 - t), -d2(2 - t)]
    return w, dw


def _np_taps(x: np.ndarray, g: np.ndarray, shape: tuple[int, ...], mode: str, pad: str,
             ac: bool) -> tuple[list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                           np.ndarray]], np.ndarray, np.ndarray]:
    """The taps of every output point: (flat index, in-bounds, weight, d weight / d ix,
    d weight / d iy) each (N, P), and d ix / d gx, d iy / d gy."""
    _, _, h, w = shape
    gx, gy = g[..., 0], g[..., 1]
    taps = []
    if mode == "bicubic":
        ix, sx = _np_unnormalize(gx, w, ac)
        iy, sy = _np_unnormalize(gy, h, ac)
        x0, y0 = np.floor(ix), np.floor(iy)
        cx, dcx = _np_cubic(ix - x0)
        cy, dcy = _np_cubic(iy - y0)
        xs = [_np_tap(x0 - 1 + i, w, pad, ac) for i in range(4)]
        ys = [_np_tap(y0 - 1 + j, h, pad, ac) for j in range(4)]
        for j in range(4):
            for i in range(4):
                idx, ok = _np_index(xs[i], ys[j], h, w)
                taps.append((idx, ok, cx[i] * cy[j], dcx[i] * cy[j], cx[i] * dcy[j]))
        return taps, np.full_like(ix, sx), np.full_like(iy, sy)
    ix, mx = _np_source(gx, w, pad, ac)
    iy, my = _np_source(gy, h, pad, ac)
    if mode == "nearest":
        idx, ok = _np_index(np.rint(ix), np.rint(iy), h, w)  # rint: ties to even
        one, zero = np.ones_like(ix), np.zeros_like(ix)
        return [(idx, ok, one, zero, zero)], mx, my
    x0, y0 = np.floor(ix), np.floor(iy)
    wx, wy = [x0 + 1 - ix, ix - x0], [y0 + 1 - iy, iy - y0]
    sgn = (-1.0, 1.0)
    for dy in range(2):
        for dx in range(2):
            idx, ok = _np_index(x0 + dx, y0 + dy, h, w)
            taps.append((idx, ok, wx[dx] * wy[dy], sgn[dx] * wy[dy], wx[dx] * sgn[dy]))
    return taps, mx, my


def _np_forward(x: np.ndarray, g: np.ndarray, mode: str, pad: str, ac: bool) -> np.ndarray:
    n, c, h, w = x.shape
    flat = x.reshape(n, c, h * w)
    gp = g.reshape(n, -1, 2)
    taps, _, _ = _np_taps(x, gp, x.shape, mode, pad, ac)
    out = np.zeros((n, c, gp.shape[1]))
    if mode == "bicubic":  # torch's order: each row along x, then the rows along y
        gx, gy = gp[..., 0], gp[..., 1]
        ix = _np_unnormalize(gx, w, ac)[0]
        iy = _np_unnormalize(gy, h, ac)[0]
        cx = _np_cubic(ix - np.floor(ix))[0]
        cy = _np_cubic(iy - np.floor(iy))[0]
        for j in range(4):
            row = np.zeros_like(out)
            for i in range(4):
                idx, ok = taps[4 * j + i][:2]
                row = row + cx[i][:, None, :] * _np_gather(flat, idx, ok)
            out = out + cy[j][:, None, :] * row
    else:
        for idx, ok, wt, _, _ in taps:
            out = out + wt[:, None, :] * _np_gather(flat, idx, ok)
    return out.reshape(n, c, *g.shape[1:3])


def _np_backward(x: np.ndarray, g: np.ndarray, go: np.ndarray, mode: str, pad: str,
                 ac: bool) -> tuple[np.ndarray, np.ndarray]:
    n, c, h, w = x.shape
    flat = x.reshape(n, c, h * w)
    gp = g.reshape(n, -1, 2)
    p = gp.shape[1]
    gof = go.reshape(n, c, p)
    taps, mx, my = _np_taps(x, gp, x.shape, mode, pad, ac)
    base = (np.arange(n)[:, None] * c + np.arange(c)[None, :]) * (h * w)  # (N, C)
    gin = np.zeros(n * c * h * w)
    ggx, ggy = np.zeros((n, p)), np.zeros((n, p))
    for idx, ok, wt, dwx, dwy in taps:
        contrib = np.where(ok[:, None, :], wt[:, None, :] * gof, 0.0)
        where = base[:, :, None] + idx[:, None, :]
        gin += np.bincount(where.ravel(), weights=contrib.ravel(), minlength=gin.size)
        if mode != "nearest":
            vg = np.where(ok, (_np_gather(flat, idx, ok) * gof).sum(axis=1), 0.0)
            ggx += np.where(ok, vg * dwx, 0.0)
            ggy += np.where(ok, vg * dwy, 0.0)
    gg = np.stack([mx * ggx, my * ggy], axis=-1) if mode != "nearest" else np.zeros_like(gp)
    return gin.reshape(x.shape), gg.reshape(g.shape)


def _np64(t: Tensor) -> np.ndarray:
    return t.detach().to("cpu", torch.float64).numpy()


class _NumpyGridSample(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, inp: Tensor, grid: Tensor, mode: str, pad: str,
                ac: bool) -> Tensor:
        ctx.save_for_backward(inp, grid)
        ctx.cfg = (mode, pad, ac)
        with np.errstate(all="ignore"):
            out = _np_forward(_np64(inp), _np64(grid), mode, pad, ac)
        return torch.from_numpy(out).to(device=inp.device, dtype=inp.dtype)

    @staticmethod
    def backward(ctx: Any, gout: Tensor) -> tuple[Tensor | None, ...]:
        inp, grid = ctx.saved_tensors
        with np.errstate(all="ignore"):
            gi, gg = _np_backward(_np64(inp), _np64(grid), _np64(gout), *ctx.cfg)
        gin = torch.from_numpy(gi).to(device=inp.device, dtype=inp.dtype)
        ggr = torch.from_numpy(gg).to(device=grid.device, dtype=grid.dtype)
        return (gin if ctx.needs_input_grad[0] else None,
                ggr if ctx.needs_input_grad[1] else None, None, None, None)


def numpy_cast(input: Tensor, grid: Tensor, mode: str = "bilinear",
               padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Outside implementation (must pass): grid_sample written from its documentation in
    numpy float64 (all three modes and paddings, align_corners, bicubic A = -0.75 with the
    padding applied to each of the 16 taps, nearest rounding ties to even, torch CPU's
    NaN/inf coordinate handling, reflection by an exact fmod), its result cast once to the
    input dtype; the backward is the same formulas differentiated by hand (clip/reflect
    gradients as ATen's ``*_set_grad``), also in float64."""
    return _NumpyGridSample.apply(input, grid, mode, padding_mode, align_corners)


def _safe_grid(grid: Tensor, size_wh: tuple[int, int], pad: str, ac: bool) -> Tensor:
    """Finite stand-ins for a grid's NaN / inf entries that sample where torch's forward
    does: border: NaN, -inf -> just left of pixel 0, +inf -> just right of the last pixel;
    reflection: pixel 0 exactly (a non-finite reflection clips to 0); zeros: far outside."""
    out = grid.detach().clone()
    for axis, size in enumerate(size_wh):
        v = out[..., axis]
        bad = ~v.isfinite()
        if pad == "reflection":
            fill = torch.full_like(v, -1.0 if ac else 1.0 / size - 1.0)
        elif pad == "border":
            fill = torch.where(v == float("inf"), 2.0, -2.0).to(v.dtype)
        else:
            fill = torch.full_like(v, -4.0)
        out[..., axis] = torch.where(bad, fill, v)
    return out


class _GuardedBackward(torch.autograd.Function):
    """F.grid_sample whose backward runs on ``_safe_grid`` (grid gradient NaN at the
    non-finite points, nearest: 0): torch 2.13's CPU grid_sampler_2d_backward segfaults on
    a NaN / inf grid with border / reflection padding."""

    @staticmethod
    def forward(ctx: Any, inp: Tensor, grid: Tensor, mode: str, pad: str, ac: bool) -> Tensor:
        ctx.save_for_backward(inp, grid)
        ctx.cfg = (mode, pad, ac)
        return F.grid_sample(inp, grid, mode=mode, padding_mode=pad, align_corners=ac)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:
        inp, grid = ctx.saved_tensors
        mode, pad, ac = ctx.cfg
        safe = _safe_grid(grid, (inp.shape[-1], inp.shape[-2]), pad, ac)
        with torch.enable_grad():
            i = inp.detach().requires_grad_(True)
            gr = safe.requires_grad_(True)
            out = F.grid_sample(i, gr, mode=mode, padding_mode=pad, align_corners=ac)
            gi, gg = torch.autograd.grad(out, [i, gr], g)
        if mode != "nearest":
            bad = ~grid.isfinite().all(dim=-1, keepdim=True)
            gg = torch.where(bad, torch.full_like(gg, float("nan")), gg)
        return (gi if ctx.needs_input_grad[0] else None,
                gg if ctx.needs_input_grad[1] else None, None, None, None)


def _grid_sample(inp: Tensor, grid: Tensor, mode: str, pad: str, ac: bool) -> Tensor:
    """F.grid_sample, its backward guarded against non-finite grids."""
    if torch.is_grad_enabled() and (inp.requires_grad or grid.requires_grad) \
            and not bool(grid.isfinite().all()):
        return _GuardedBackward.apply(inp, grid, mode, pad, ac)
    return F.grid_sample(inp, grid, mode=mode, padding_mode=pad, align_corners=ac)


def float32_compute(input: Tensor, grid: Tensor, mode: str = "bilinear",
                    padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Outside implementation (must pass): half dtypes upcast input and grid to float32, run
    ``F.grid_sample`` there and round the result once (the fix pytorch PR #96586 made inside
    CUDA's kernel, done from outside); float32 / float64 call ``F.grid_sample``. With a
    NaN / inf grid the backward runs on finite stand-ins (``_GuardedBackward``): unguarded,
    torch 2.13's CPU backward dies by SIGSEGV there (border / reflection)."""
    if input.dtype in HALF:
        out = _grid_sample(input.float(), grid.float(), mode, padding_mode, align_corners)
        return out.to(input.dtype)
    return _grid_sample(input, grid, mode, padding_mode, align_corners)


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


# ----------------------------------------------------------------------------------------
# forward faults: precision of a half kernel
# ----------------------------------------------------------------------------------------


def half_unnormalize(input: Tensor, grid: Tensor, mode: str = "bilinear",
                     padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes: the unnormalisation ``((g + 1) * W - 1) / 2`` (``(g + 1) / 2 * (W - 1)``
    with align_corners) and the border clip / reflection evaluated in the half dtype, every
    operation rounded there, the rest exact: CUDA's kernel before pytorch PR #96586 kept
    ``grid_sampler_compute_source_index`` in ``scalar_t`` (the PR's example: 2/3 in half
    gives 2.0 instead of 1.99976 on a 3-pixel axis; #94816: unusable on 4K images). On a
    4096-wide float16 image the coordinate's ulp is 2-4 pixels."""
    return _run(input, grid, mode, padding_mode, align_corners, HALF, coord=True)


def half_coordinate_round(input: Tensor, grid: Tensor, mode: str = "bilinear",
                          padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes: the pixel coordinate computed exactly but stored as ``scalar_t ix``
    (one rounding to the half dtype) before floor / fraction, so the bilinear and bicubic
    weights come from the rounded coordinate: past 1024 (float16) / 128 (bfloat16) pixels
    the fraction is lost and bilinear degenerates to nearest (pytorch#96429's
    "half precision still has large numeric error", the storage half of it)."""
    return _run(input, grid, mode, padding_mode, align_corners, HALF, coord_round=True)


def half_weights(input: Tensor, grid: Tensor, mode: str = "bilinear",
                 padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes, bilinear: the weights ``(x0 + 1 - ix)``, ``(ix - x0)`` and their products
    ``nw = wx * wy`` rounded to the half dtype (``scalar_t nw = ...`` in CUDA's kernel before
    PR #90427 / #96586, pytorch#89836), the taps then summed exactly: ~1 ulp of relative
    weight error per tap, a few ulps of the output."""
    return _run(input, grid, mode, padding_mode, align_corners, HALF, weights_low=True)


def half_cubic_coeffs(input: Tensor, grid: Tensor, mode: str = "bilinear",
                      padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes, bicubic: the 2 x 4 cubic convolution coefficients evaluated by Horner in
    the half dtype (``get_cubic_upsample_coefficients<scalar_t>``), the 16 products summed
    exactly: coefficients near 1 lose their low bits, the outer ones (~-0.07) their sign
    margin; a few ulps of the output."""
    return _run(input, grid, mode, padding_mode, align_corners, HALF, cubic_low=True)


def half_accumulate(input: Tensor, grid: Tensor, mode: str = "bilinear",
                    padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes: each weight * tap product and every running sum rounded to the half
    dtype (the 4 bilinear taps; bicubic's 4 row sums of 4 and the 4 rows: 20 roundings),
    exact weights: pytorch#89836 (CUDA accumulated in ``scalar_t`` until PR #90427 moved it
    to ``opmath_t``); up to ~5 ulps bilinear, ~20 ulps bicubic with cancellation."""
    return _run(input, grid, mode, padding_mode, align_corners, HALF, acc_low=True)


def half_reflect(input: Tensor, grid: Tensor, mode: str = "bilinear",
                 padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes, reflection padding: ``reflect_coordinates`` (|x - lo|, fmod by the span,
    the flip count, span - extra + lo) evaluated in the half dtype on an exact coordinate,
    for the coordinate (bilinear, nearest) and bicubic's taps: a coordinate reflected from
    outside the image carries the half ulp of its unreflected size (x = -3.5 style grids)."""
    return _run(input, grid, mode, padding_mode, align_corners, HALF, reflect_low=True)


def half_tap_index(input: Tensor, grid: Tensor, mode: str = "bilinear",
                   padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes, bicubic: the tap positions ``ix_nw - 1 + i`` formed in ``scalar_t`` as in
    ATen's scalar ``get_value_bounded<scalar_t>`` call: exact below 2048 (float16) / 256
    (bfloat16) pixels, beyond that a tap rounds onto its neighbour (x0 + 1 -> x0 or x0 + 2),
    so only wide images sample the wrong columns."""
    return _run(input, grid, mode, padding_mode, align_corners, HALF, tap_index_low=True)


# ----------------------------------------------------------------------------------------
# forward faults: semantics
# ----------------------------------------------------------------------------------------


def bicubic_a_half(input: Tensor, grid: Tensor, mode: str = "bilinear",
                   padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """All dtypes, bicubic: Keys' A = -0.5 (OpenCV's INTER_CUBIC / PIL's default) instead of
    torch's A = -0.75 (``get_cubic_upsample_coefficients``); bilinear and nearest correct.
    Interpolates exactly at integer coordinates, differs by up to ~0.06 of the local
    second difference between them."""
    if mode != "bicubic":
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    return _run(input, grid, mode, padding_mode, align_corners, ALL, a=-0.5)


def bicubic_pad_coord_once(input: Tensor, grid: Tensor, mode: str = "bilinear",
                           padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """All dtypes, bicubic with border / reflection: the padding applied to the coordinate
    once (clipped / reflected into the image, as for bilinear) and the 4 x 4 neighbourhood
    then clamped to the edge, instead of padding each tap (onnxruntime#10607 / #28090): a
    point just outside the border loses its fraction and so its view of the interior."""
    if mode != "bicubic" or padding_mode == "zeros":
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    return _run(input, grid, mode, padding_mode, align_corners, ALL, bicubic_pad="coord")


def bicubic_reflect_clamps_taps(input: Tensor, grid: Tensor, mode: str = "bilinear",
                                padding_mode: str = "zeros",
                                align_corners: bool = False) -> Tensor:
    """All dtypes, bicubic with reflection padding: a tap outside the image is clamped to the
    edge pixel instead of reflected (index -1 reads 0, not 1; burn-flex#29's "reflection
    padding clamps neighbor indices"), i.e. border behaviour for the taps; points further
    than one pixel inside the image are unaffected."""
    if mode != "bicubic" or padding_mode != "reflection":
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    return _run(input, grid, mode, padding_mode, align_corners, ALL,
                bicubic_pad="clamp_reflect")


def nearest_round_half_away(input: Tensor, grid: Tensor, mode: str = "bilinear",
                            padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """All dtypes, nearest: the coordinate rounded with ``std::round`` (ties away from zero)
    instead of ``std::nearbyint`` (ties to even): the 3-D kernel's rounding before pytorch PR
    #97000, burn#5663, Paddle#27657. Only exact .5 coordinates move, by one pixel."""
    if mode != "nearest":
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    return _run(input, grid, mode, padding_mode, align_corners, ALL, nearest_away=True)


def nan_grid_propagates(input: Tensor, grid: Tensor, mode: str = "bilinear",
                        padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """All dtypes, border / reflection, bilinear / nearest: the clip written with a
    NaN-propagating clamp (``torch.clamp``, IEEE ``min``/``max`` of the 2019 standard) where
    torch's ``clip_coordinates`` sends NaN to 0 (CUDA's fminf/fmaxf do too): a NaN grid
    point yields NaN (bilinear) or an out-of-bounds zero (nearest) instead of the edge
    pixel's value. Finite grids are exact."""
    if padding_mode == "zeros" or mode == "bicubic":
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    return _run(input, grid, mode, padding_mode, align_corners, ALL, nan_clamp=True)


def half_bicubic_as_bilinear(input: Tensor, grid: Tensor, mode: str = "bilinear",
                             padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes: a backend without a half bicubic kernel silently runs bilinear (MPS's
    grid_sample long lacked bicubic; a dispatcher falling through to the default mode)."""
    if input.dtype in HALF and mode == "bicubic":
        mode = "bilinear"
    return _run(input, grid, mode, padding_mode, align_corners, ())


def half_ignores_padding(input: Tensor, grid: Tensor, mode: str = "bilinear",
                         padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes: the half kernel does not read ``padding_mode`` and always pads with zeros
    (pytorch#15386's "grid_sample doesn't respect padding_mode"): border / reflection are
    wrong only where a point (or one of its taps) falls outside the image."""
    return _run(input, grid, mode, padding_mode, align_corners, HALF, ignore_padding=True)


def channels_last_half_math(input: Tensor, grid: Tensor, mode: str = "bilinear",
                            padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes with a channels_last input: a separate NHWC kernel (pytorch#174339: MPS's
    NHWC path gave different results) that computes the coordinate in float32 but the
    weights, coefficients and the tap sums in the half dtype; contiguous inputs are right."""
    if input.dtype in HALF and input.dim() == 4 and input.shape[1] > 1 \
            and input.is_contiguous(memory_format=torch.channels_last) \
            and not input.is_contiguous():
        return _run(input, grid, mode, padding_mode, align_corners, HALF, weights_low=True,
                    cubic_low=True, acc_low=True)
    return float32_compute(input, grid, mode, padding_mode, align_corners)


def _f32_value(input: Tensor, grid: Tensor, mode: str, pad: str, ac: bool) -> Tensor:
    """The float32 result for a half input (not yet rounded), detached."""
    with torch.no_grad():
        return F.grid_sample(input.float(), grid.float(), mode=mode, padding_mode=pad,
                             align_corners=ac)


def half_truncating_store(input: Tensor, grid: Tensor, mode: str = "bilinear",
                          padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes: everything in float32 (as ``float32_compute``) but the final store
    converts float32 -> half by truncation (round toward zero: ``__float2bfloat16_rz``, or
    bfloat16 as the top 16 bits of the float) instead of round-to-nearest-even: up to 1 ulp
    of the output instead of 0.5, always toward zero."""
    if input.dtype not in HALF:
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    v = _f32_value(input, grid, mode, padding_mode, align_corners)
    r = v.to(input.dtype)
    away = r.float().abs() > v.abs()
    r = torch.where(away & r.isfinite(), torch.nextafter(r, torch.zeros_like(r)), r)
    return _attach(r, input, grid, mode, padding_mode, align_corners)


def half_subnormal_flush(input: Tensor, grid: Tensor, mode: str = "bilinear",
                         padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes: float32 computation, but outputs below the half type's smallest normal
    (6.1e-5 float16, 1.2e-38 bfloat16) are flushed to (signed) zero at the store (FTZ on
    the conversion, as with denormals-are-zero modes): float16 results of tiny magnitude
    (cancelling taps, weights near 0) come back as 0."""
    if input.dtype not in HALF:
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    v = _f32_value(input, grid, mode, padding_mode, align_corners)
    r = v.to(input.dtype)
    tiny = torch.finfo(input.dtype).tiny
    r = torch.where(r.abs() < tiny, r * 0, r)
    return _attach(r, input, grid, mode, padding_mode, align_corners)


def f64_computed_in_f32(input: Tensor, grid: Tensor, mode: str = "bilinear",
                        padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Float64: a backend without a double kernel (MPS has no float64; a cuDNN-style
    float-only sampler) runs input and grid in float32 and casts the result back; the
    gradients are float32's too. ~1e-7 relative instead of ~1e-16."""
    if input.dtype != torch.float64:
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    return _grid_sample(input.float(), grid.float(), mode, padding_mode,
                        align_corners).double()


# ----------------------------------------------------------------------------------------
# forward faults: large sizes
# ----------------------------------------------------------------------------------------


def _point_rows(out: Tensor) -> Tensor:
    """(N * Ho * Wo, C) view-ordered copy of an (N, C, Ho, Wo) output, point-major."""
    return out.permute(0, 2, 3, 1).reshape(-1, out.shape[1])


def _from_rows(rows: Tensor, like: Tensor) -> Tensor:
    n, c, ho, wo = like.shape
    return rows.reshape(n, ho, wo, c).permute(0, 3, 1, 2).contiguous()


def half_vec_tail_zero(input: Tensor, grid: Tensor, mode: str = "bilinear",
                       padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes: the half kernel handles output points 8 at a time (16-byte half8 stores)
    along each output row and has no remainder loop: the last ``Wo % 8`` points of every row
    stay zero (float32's 4-wide path has its tail). Right whenever Wo is a multiple of 8."""
    out = float32_compute(input, grid, mode, padding_mode, align_corners)
    wo = out.shape[-1]
    if input.dtype not in HALF or wo % 8 == 0:
        return out
    value = out.detach().clone()
    value[..., wo - wo % 8:] = 0
    return _attach(value, input, grid, mode, padding_mode, align_corners)


def tile_tail_dropped(input: Tensor, grid: Tensor, mode: str = "bilinear",
                      padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """All dtypes: the N * Ho * Wo output points are launched in tiles of 65536 (a grid-dim
    limit, as in us4useu/arrus#359's "returns zeros if input data too large") and the last,
    partial tile is never launched: its points stay zero. Right up to 65536 points and for
    any multiple of it."""
    out = float32_compute(input, grid, mode, padding_mode, align_corners)
    rows = _point_rows(out.detach())
    tail = rows.shape[0] % 65536
    if rows.shape[0] <= 65536 or tail == 0:
        return out
    rows = rows.clone()
    rows[-tail:] = 0
    return _attach(_from_rows(rows, out), input, grid, mode, padding_mode, align_corners)


def point_index_u16(input: Tensor, grid: Tensor, mode: str = "bilinear",
                    padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """All dtypes: the output point's flat index (over N, Ho, Wo) kept in a 16-bit register,
    so point p reads the grid entry of p mod 65536 (and its batch's input): past 65536 points
    the output repeats the first 65536 points' sampling locations."""
    n, ho, wo = grid.shape[0], grid.shape[1], grid.shape[2]
    total = n * ho * wo
    if total <= 65536:
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    pts = grid.detach().reshape(total, 2)
    src = torch.arange(total, device=grid.device) % 65536
    bad = pts[src].reshape(n, ho, wo, 2)
    value = float32_compute(input.detach(), bad, mode, padding_mode, align_corners)
    return _attach(value, input, grid, mode, padding_mode, align_corners)


def tile_seam_halo(input: Tensor, grid: Tensor, mode: str = "bilinear",
                   padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """All dtypes, bilinear / bicubic on inputs wider than 2048: the input row is staged in
    2048-column tiles without a halo, so a tap in the next (or previous) tile is read from
    the same column of the base tap's tile (wrapping), and at the left edge of a wide image
    the tap left of column 0 wraps into nothing (zero). Only samples within 1-2 pixels of a
    multiple of 2048 move."""
    if input.shape[-1] <= 2048 or mode == "nearest":
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    return _run(input, grid, mode, padding_mode, align_corners, ALL, seam=2048)


def flat_offset_float32(input: Tensor, grid: Tensor, mode: str = "bilinear",
                        padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """All dtypes: the flat input offset ``y * W + x`` formed in float32 (an index computed
    with the coordinate's float arithmetic before the int conversion): exact up to 2^24
    pixels per plane, beyond it odd offsets round to even ones (a one-pixel shift)."""
    if input.shape[-1] * input.shape[-2] <= 2 ** 24:
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    return _run(input, grid, mode, padding_mode, align_corners, ALL, offset_f32=True)


# ----------------------------------------------------------------------------------------
# backward faults
# ----------------------------------------------------------------------------------------


class _GridGradScaled(torch.autograd.Function):
    """Forward: ``out``; backward: ``ref``'s gradients with the grid's scaled by ``scale``."""

    @staticmethod
    def forward(ctx: Any, inp: Tensor, grid: Tensor, cfg: tuple, scale: tuple) -> Tensor:
        ctx.save_for_backward(inp, grid)
        ctx.cfg, ctx.scale = cfg, scale
        return float32_compute(inp.detach(), grid.detach(), *cfg)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:
        inp, grid = ctx.saved_tensors
        with torch.enable_grad():
            i = inp.detach().requires_grad_(ctx.needs_input_grad[0])
            gr = grid.detach().requires_grad_(True)
            out = float32_compute(i, gr, *ctx.cfg)
            wrt = [gr] + ([i] if ctx.needs_input_grad[0] else [])
            grads = torch.autograd.grad(out, wrt, g)
        ggrid = grads[0] * torch.tensor(ctx.scale, dtype=grads[0].dtype, device=g.device)
        gin = grads[1] if ctx.needs_input_grad[0] else None
        return gin, (ggrid if ctx.needs_input_grad[1] else None), None, None


def grad_grid_scale_ignores_align(input: Tensor, grid: Tensor, mode: str = "bilinear",
                                  padding_mode: str = "zeros",
                                  align_corners: bool = False) -> Tensor:
    """All dtypes, backward with align_corners=True: the grid gradient's multiplier taken as
    size / 2 (the align_corners=False value of ``grid_sampler_unnormalize_set_grad``)
    instead of (size - 1) / 2: every grid gradient too large by W / (W - 1) (x) and
    H / (H - 1) (y): 33% on a 4-pixel axis, 0.02% on a 4096-pixel one. Forward exact."""
    if not align_corners or not (torch.is_grad_enabled() and grid.requires_grad):
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    h, w = input.shape[-2], input.shape[-1]
    scale = (w / (w - 1) if w > 1 else 1.0, h / (h - 1) if h > 1 else 1.0)
    return _GridGradScaled.apply(input, grid, (mode, padding_mode, align_corners), scale)


def border_grad_zero_padding(input: Tensor, grid: Tensor, mode: str = "bilinear",
                             padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """All dtypes, bilinear with border padding, backward: pytorch#23925 ("border and
    reflection modes of grid_sample have incorrect gradients at border"): the clip passes
    the gradient straight through and the taps beyond the edge count as zeros, so a point on
    or outside the high border gets a grid gradient of -(edge value) * scale instead of 0
    (and points outside the image a nonzero one). The forward is the border result."""
    if mode != "bilinear" or padding_mode != "border":
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    h, w = input.shape[-2], input.shape[-1]
    lim = torch.tensor([1.0 if align_corners else 1 - 1 / w,
                        1.0 if align_corners else 1 - 1 / h], dtype=torch.float64)
    g = grid.float() if grid.dtype in HALF else grid
    lim = lim.to(g.dtype)
    gc = torch.minimum(torch.maximum(g, -lim), lim)
    gs = g + (gc - g).detach()  # the clip with a straight-through gradient
    inp = input.float() if input.dtype in HALF else input
    out = F.grid_sample(inp, gs, mode="bilinear", padding_mode="zeros",
                        align_corners=align_corners)
    ref = float32_compute(input.detach(), grid.detach(), mode, padding_mode, align_corners)
    return out.to(input.dtype) + (ref - out.detach().to(input.dtype))


class _HalfAtomicInputGrad(torch.autograd.Function):
    """Backward: grad_input summed one contribution at a time in the half dtype."""

    @staticmethod
    def forward(ctx: Any, inp: Tensor, grid: Tensor, cfg: tuple) -> Tensor:
        ctx.save_for_backward(inp, grid)
        ctx.cfg = cfg
        return float32_compute(inp.detach(), grid.detach(), *cfg)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:
        inp, grid = ctx.saved_tensors
        mode, pad, ac = ctx.cfg
        ggrid = None
        if ctx.needs_input_grad[1]:
            with torch.enable_grad():
                gr = grid.detach().requires_grad_(True)
                ggrid = torch.autograd.grad(float32_compute(inp.detach(), gr, *ctx.cfg),
                                            gr, g)[0]
        gin = None
        if ctx.needs_input_grad[0]:
            gin = _half_atomic_scatter(inp, grid, g, mode, pad, ac)
        return gin, ggrid, None


def _half_atomic_scatter(inp: Tensor, grid: Tensor, g: Tensor, mode: str, pad: str,
                         ac: bool) -> Tensor:
    """Sum of the per-tap contributions (exact weight * grad_out, each rounded to the half
    dtype) into grad_input, every addition rounded to the half dtype, in point order."""
    dt = inp.dtype
    n, c, h, w = inp.shape
    with np.errstate(all="ignore"):
        taps, _, _ = _np_taps(_np64(inp), _np64(grid).reshape(n, -1, 2), inp.shape, mode,
                              pad, ac)
    go = g.detach().to(W64).reshape(n, c, -1)
    p = go.shape[2]
    base = ((torch.arange(n)[:, None] * c + torch.arange(c)[None, :]) * (h * w))[:, :, None]
    tgt, val = [], []
    for idx, ok, wt, _, _ in taps:
        okt = torch.from_numpy(ok)[:, None, :].expand(n, c, p)
        where = base + torch.from_numpy(idx)[:, None, :]
        contrib = torch.from_numpy(wt)[:, None, :] * go
        tgt.append(where[okt])
        val.append(contrib[okt].to(dt))
    # point order first, taps in order within a point (what one thread per point issues)
    flat_t = torch.cat(tgt)
    flat_v = torch.cat(val)
    out = torch.zeros(n * c * h * w, dtype=dt)
    if flat_t.numel():
        order = torch.argsort(flat_t, stable=True)
        st, sv = flat_t[order], flat_v[order]
        first = torch.ones_like(st, dtype=torch.bool)
        first[1:] = st[1:] != st[:-1]
        start = torch.cummax(torch.where(first, torch.arange(st.numel()), 0), 0).values
        rank = torch.arange(st.numel()) - start
        for r in range(int(rank.max()) + 1):
            sel = rank == r
            out[st[sel]] = out[st[sel]] + sv[sel]  # each addition rounded to dt
    return out.reshape(n, c, h, w).to(inp.device)


def half_grad_input_atomic(input: Tensor, grid: Tensor, mode: str = "bilinear",
                           padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Half dtypes, backward: grad_input accumulated by per-tap atomic adds in the half dtype
    (CUDA's ``fastAtomicAdd`` on ``__half`` / ``__nv_bfloat16`` rounds every addition), the
    contributions themselves exact then rounded: a pixel hit by k taps carries ~k/2 ulps of
    its sum (upsampling grids: hundreds of ulps). Forward and grid gradient exact."""
    if input.dtype not in HALF or not (torch.is_grad_enabled() and input.requires_grad):
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    return _HalfAtomicInputGrad.apply(input, grid, (mode, padding_mode, align_corners))


class _RaiseOnNonfinite(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, inp: Tensor, grid: Tensor, cfg: tuple) -> Tensor:
        ctx.save_for_backward(inp, grid)
        ctx.cfg = cfg
        return float32_compute(inp.detach(), grid.detach(), *cfg)

    @staticmethod
    def backward(ctx: Any, g: Tensor) -> tuple[Tensor | None, ...]:
        inp, grid = ctx.saved_tensors
        if not bool(torch.isfinite(grid).all()):
            raise RuntimeError("grid_sampler_2d_backward: index -9223372036854775808 is out "
                               f"of bounds for dimension 3 with size {inp.shape[-1]}")
        with torch.enable_grad():
            i = inp.detach().requires_grad_(True)
            gr = grid.detach().requires_grad_(True)
            gi, gg = torch.autograd.grad(float32_compute(i, gr, *ctx.cfg), [i, gr], g)
        return (gi if ctx.needs_input_grad[0] else None,
                gg if ctx.needs_input_grad[1] else None, None)


def nan_grid_backward_raises(input: Tensor, grid: Tensor, mode: str = "bilinear",
                             padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """All dtypes, backward with a NaN / inf grid: the backward converts the coordinate to an
    index without torch's ``safe_downgrade_to_int_range`` guard (#35506) and a bounds-checked
    scatter raises (INT64_MIN out of bounds). Finite grids and the forward are exact."""
    if not (torch.is_grad_enabled() and (input.requires_grad or grid.requires_grad)):
        return float32_compute(input, grid, mode, padding_mode, align_corners)
    return _RaiseOnNonfinite.apply(input, grid, (mode, padding_mode, align_corners))


FAULTS = ("half_unnormalize", "half_coordinate_round", "half_weights", "half_cubic_coeffs",
          "half_accumulate", "half_reflect", "half_tap_index", "bicubic_a_half",
          "bicubic_pad_coord_once", "bicubic_reflect_clamps_taps", "nearest_round_half_away",
          "nan_grid_propagates", "half_bicubic_as_bilinear", "half_ignores_padding",
          "channels_last_half_math", "half_truncating_store", "half_subnormal_flush",
          "f64_computed_in_f32", "half_vec_tail_zero", "tile_tail_dropped",
          "point_index_u16", "tile_seam_halo", "flat_offset_float32",
          "grad_grid_scale_ignores_align", "border_grad_zero_padding", "half_grad_input_atomic",
          "nan_grid_backward_raises")
CORRECT = ("numpy_cast", "float32_compute")
for _name in FAULTS + CORRECT:
    globals()[_name].conformance_name = globals()[_name].__name__
