"""The float64 numpy reference of the blind grid_sample faults and their two outside
implementations, ``numpy_cast`` and ``float32_compute`` (the catalogue and how it was
written: ``blind_grid_sample_faults.py``)."""

from __future__ import annotations

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
