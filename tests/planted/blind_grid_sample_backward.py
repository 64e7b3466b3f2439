"""The blind grid_sample faults of the backward (the catalogue and how it was written:
``blind_grid_sample_faults.py``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .blind_grid_sample_engine import W64
from .blind_grid_sample_reference import HALF, Tensor, _np64, _np_taps, float32_compute

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
