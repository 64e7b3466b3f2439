"""Planted grid_sample implementations the grid_sample area must flag, and their twin. Each
computes in float32 for float16 / bfloat16 inputs and rounds once (``_sample``), so a fault
is the same in every dtype and the twin is what the half-precision bound certifies."""

from __future__ import annotations

import torch
import torch.nn.functional as F

HALF = (torch.float16, torch.bfloat16)


def _work(t: torch.Tensor) -> torch.Tensor:
    """``t`` in the compute type: float32 for the half types."""
    return t.float() if t.dtype in HALF else t


def _sample(input, grid, **kw):
    """F.grid_sample, in float32 for the half types (rounded once to the input's dtype)."""
    if input.dtype in HALF:
        return F.grid_sample(input.float(), grid.float(), **kw).to(input.dtype)
    return F.grid_sample(input, grid, **kw)


def align_corners_inverted(input, grid, mode="bilinear", padding_mode="zeros",
                           align_corners=False):
    return _sample(input, grid, mode=mode, padding_mode=padding_mode,
                         align_corners=not align_corners)


def _pixels(g: torch.Tensor, size: int, align: bool) -> torch.Tensor:
    return (g + 1) / 2 * (size - 1) if align else ((g + 1) * size - 1) / 2


def _normalized(p: torch.Tensor, size: int, align: bool) -> torch.Tensor:
    return p * 2 / (size - 1) - 1 if align else (2 * p + 1) / size - 1


def reflect_once(input, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """Reflection padding that reflects a coordinate once only (not repeatedly), then
    clips: wrong beyond one image width outside."""
    if padding_mode != "reflection":
        return _sample(input, grid, mode=mode, padding_mode=padding_mode,
                             align_corners=align_corners)
    h, w = input.shape[-2:]
    lo, his = (0.0, (w - 1, h - 1)) if align_corners else (-0.5, (w - 0.5, h - 0.5))
    axes = []
    for i, size in enumerate((w, h)):
        p = _pixels(_work(grid[..., i]), size, align_corners)
        hi = his[i]
        p = torch.where(p < lo, 2 * lo - p, torch.where(p > hi, 2 * hi - p, p))
        axes.append(_normalized(p, size, align_corners))
    return _sample(input, torch.stack(axes, -1), mode=mode, padding_mode="border",
                         align_corners=align_corners)


def half_pixel_off(input, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """Bilinear weights for a position half a pixel off (the pixel-centre convention
    confused): shifts the sampling point by 0.5 px along x."""
    w = input.shape[-1]
    shift = torch.zeros_like(grid)
    shift[..., 0] = 1.0 / (w - 1 if align_corners else w)
    return _sample(input, grid + shift, mode=mode, padding_mode=padding_mode,
                         align_corners=align_corners)


def nearest_half_away(input, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    """Nearest rounding half away from zero (floor(p + 0.5) for p >= 0) instead of half to
    even: differs only at exact half-pixel positions."""
    if mode != "nearest":
        return _sample(input, grid, mode=mode, padding_mode=padding_mode,
                             align_corners=align_corners)
    h, w = input.shape[-2:]
    axes = []
    for i, size in enumerate((w, h)):
        p = _pixels(grid[..., i].double(), size, align_corners)
        p = torch.sign(p) * torch.floor(p.abs() + 0.5)
        axes.append(_normalized(p, size, align_corners).to(_work(grid).dtype))
    return _sample(input, torch.stack(axes, -1), mode="nearest",
                         padding_mode=padding_mode, align_corners=align_corners)


def correct(input, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    return _sample(input, grid, mode=mode, padding_mode=padding_mode,
                         align_corners=align_corners)


for _f in (align_corners_inverted, reflect_once, half_pixel_off, nearest_half_away, correct):
    _f.conformance_name = _f.__name__  # type: ignore[attr-defined]
    _f.conformance_features = ["mode.bilinear", "mode.nearest", "mode.bicubic"]


class _GridScale(torch.autograd.Function):
    """The forward of torch; a backward whose grid gradient uses align_corners=False's
    unnormalize factor size/2 where align_corners=True needs (size - 1)/2."""

    @staticmethod
    def forward(ctx, input, grid, mode, padding_mode, align_corners):
        ctx.save_for_backward(input, grid)
        ctx.args = (mode, padding_mode, align_corners)
        return _sample(input, grid, mode=mode, padding_mode=padding_mode,
                             align_corners=align_corners)

    @staticmethod
    def backward(ctx, grad_out):
        input, grid = ctx.saved_tensors
        mode, padding_mode, align = ctx.args
        with torch.enable_grad():
            x, g = input.detach().requires_grad_(), grid.detach().requires_grad_()
            out = _sample(x, g, mode=mode, padding_mode=padding_mode, align_corners=align)
            gi, gg = torch.autograd.grad(out, (x, g), grad_out)
        if align:
            h, w = input.shape[-2:]
            gg = gg * torch.tensor([w / (w - 1), h / (h - 1)], dtype=gg.dtype, device=gg.device)
        return gi, gg, None, None, None


def grid_grad_scale(input, grid, mode="bilinear", padding_mode="zeros", align_corners=False):
    return _GridScale.apply(input, grid, mode, padding_mode, align_corners)


grid_grad_scale.conformance_name = "grid_grad_scale"  # type: ignore[attr-defined]

_GRID = "grid_sample/test_grid_sample.py"
SELFTEST = [  # torch-conformance selftest (conformance/cli/selftest.py)
    *({"area": "grid_sample", "impl": name, "path": _GRID, "expect": "killed",
       "select": f"{name} and float32"}
      for name in ("align_corners_inverted", "half_pixel_off", "reflect_once",
                   "nearest_half_away", "grid_grad_scale")),
    {"area": "grid_sample", "impl": "correct", "path": _GRID, "expect": "passes",
     "select": "correct and float32"},
]
