"""2-D ``torch.nn.functional.grid_sample``, forward and backward, in float64 numpy. Torch-free.

Shapes: inp (N, C, H, W), grid (N, Ho, Wo, 2) with grid[..., 0] = x (along W) and
grid[..., 1] = y (along H); output (N, C, Ho, Wo). Each axis is handled alike, for a
coordinate g and an axis of ``size`` pixels:

unnormalize
    align_corners=True:  p = (g + 1) / 2 * (size - 1)     (-1, +1 -> centres of corner pixels)
    align_corners=False: p = ((g + 1) * size - 1) / 2     (-1, +1 -> outer edges of the image)
    dp/dg = (size - 1) / 2 or size / 2.
padding of a coordinate q (``_pad``)
    zeros:      q unchanged; taps outside [0, size - 1] read 0.
    border:     clip(q) = min(size - 1, max(q, 0)), with NaN -> 0; d/dq = 1 strictly inside
                (0, size - 1), else 0 (the clipped borders count as outside).
    reflection: reflect q about lo and hi (lo, hi = 0, size - 1 with align_corners, else
                -0.5, size - 0.5; size 1 with align_corners maps everything to 0), then clip;
                d/dq = +-1 (the sign flips with each reflection) times the clip's derivative.
interpolation
    bilinear: q = pad(p); taps floor(q) + {0, 1} with weights 1 - t, t (t = q - floor(q)).
    nearest:  q = pad(p); one tap rint(q) (round half to even, as std::nearbyint), weight 1.
    bicubic:  taps floor(p) + {-1, 0, 1, 2} of the *unpadded* p, weights the cubic
              convolution W(t+1), W(t), W(1-t), W(2-t) with A = -0.75,
                  W(s) = (A+2)|s|^3 - (A+3)|s|^2 + 1        for |s| <= 1,
                  W(s) = A|s|^3 - 5A|s|^2 + 8A|s| - 4A      for 1 < |s| < 2;
              the padding is applied to each tap *index* (so it has no derivative).
    out[n, c] = sum over tap pairs (i, j) of wy_i * wx_j * v(iy_i, ix_j), v = 0 off the image.

Backward (torch's grid_sampler_2d_backward): grad_input scatters wy_i * wx_j * grad_out onto
the in-range taps (taps mapped to the same pixel accumulate); grad_grid[..., 0] =
sum_c grad_out * sum_ij wy_i * dwx_j/dt * v(iy_i, ix_j) times dq/dg (unnormalize and padding
chained; bicubic: the unnormalize factor only), likewise for y. Nearest: grad_grid = 0.

Non-finite grids (torch 2.13 CPU, float32/float64, the vectorized kernel, checked against
it): every coordinate is unnormalized; border and reflection then map NaN (and +-inf under
reflection, whose reflected value is NaN) to 0, and +-inf to the clipped end under border.
So bilinear/nearest with border/reflection padding give finite outputs; with zeros padding a
NaN/inf coordinate gives NaN for bilinear (the weights are NaN, the taps read 0, 0 * NaN = NaN)
but 0 for nearest (the tap is out of range, nothing is multiplied); bicubic gives NaN for any
padding (its weights use the unpadded coordinate). Huge finite coordinates read 0 (zeros).
Beyond |p| ~ 2^52, k + 0.5 rounds to k, so a reflected bicubic tap can land on a half-integer:
the AVX2/AVX512 kernels of torch 2.11-2.14 round it to even, ATEN_CPU_CAPABILITY=default
(and from 2.15.0 the vector kernels too) truncates; the oracle rounds (np.rint). torch's
scalar CPU fallback (float32 with > 2^31 gather offsets) differs: it clips NaN to size - 1
and gives 0 for bilinear zeros (CUDA's scalar kernel: not checked).
Backward for non-finite grids: the oracle matches torch wherever torch's backward runs. torch's
CPU backward for bilinear crashes (SIGSEGV) with NaN under border and NaN/+-inf under
reflection: its backward clip propagates NaN (the forward's does not), and the NaN tap
becomes an out-of-range scatter index. The oracle keeps the forward's mapping there.
"""

from __future__ import annotations

import numpy as np

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")
CUBIC_A = -0.75

Axis = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def unnormalize(coord: np.ndarray, size: int, align_corners: bool) -> tuple[np.ndarray, float]:
    """Grid coordinate in [-1, 1] -> pixel position, and d position / d coord."""
    if align_corners:
        return (coord + 1) / 2 * (size - 1), (size - 1) / 2
    return ((coord + 1) * size - 1) / 2, size / 2


def _clip(q: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    hi = float(size - 1)
    out = np.where(np.isnan(q), 0.0, np.minimum(np.maximum(q, 0.0), hi))
    return out, ((q > 0) & (q < hi)).astype(np.float64)


def _reflect(q: np.ndarray, size: int, align_corners: bool) -> tuple[np.ndarray, np.ndarray]:
    if align_corners and size <= 1:
        return np.zeros_like(q), np.zeros_like(q)
    lo, twice_span = (0.0, 2.0 * (size - 1)) if align_corners else (-0.5, 2.0 * size)
    d = q - lo
    a = np.abs(d)
    with np.errstate(invalid="ignore"):
        extra = a - np.trunc(a / twice_span) * twice_span
    back = twice_span - extra
    flip = extra > back
    sign = np.where(flip ^ (d < 0), -1.0, 1.0)
    return np.where(flip, back, extra) + lo, sign


def _pad(q: np.ndarray, size: int, padding_mode: str,
         align_corners: bool) -> tuple[np.ndarray, np.ndarray]:
    """Apply the padding to positions q; returns (padded q, d padded / d q)."""
    if padding_mode == "zeros":
        return q, np.ones_like(q)
    if padding_mode == "border":
        return _clip(q, size)
    r, d_refl = _reflect(q, size, align_corners)
    out, d_clip = _clip(r, size)
    return out, d_refl * d_clip


def cubic_weights(t: np.ndarray, a: float = CUBIC_A) -> tuple[np.ndarray, np.ndarray]:
    """The 4 cubic-convolution weights for taps floor(p) + {-1, 0, 1, 2} at t = p - floor(p),
    and their derivatives d w / d t; each of shape (4, *t.shape)."""
    def near(s):  # |s| <= 1
        return ((a + 2) * s - (a + 3)) * s * s + 1, (3 * (a + 2) * s - 2 * (a + 3)) * s

    def far(s):  # 1 < |s| < 2
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a, (3 * a * s - 10 * a) * s + 8 * a

    (w0, d0), (w1, d1), (w2, d2), (w3, d3) = far(t + 1), near(t), near(1 - t), far(2 - t)
    return np.stack([w0, w1, w2, w3]), np.stack([d0, d1, -d2, -d3])


def _axis_taps(coord: np.ndarray, size: int, mode: str, padding_mode: str,
               align_corners: bool) -> Axis:
    """One axis: (tap index (k, ...) intp, in-range mask, weight, d weight / d coord)."""
    with np.errstate(invalid="ignore"):
        p, scale = unnormalize(coord, size, align_corners)
        if mode == "bicubic":
            base = np.floor(p)
            w, dw = cubic_weights(p - base)
            dw = dw * scale
            taps = base + np.arange(-1.0, 3.0).reshape((4,) + (1,) * p.ndim)
            if padding_mode != "zeros":  # rint, as the AVX2/AVX512 kernels (see module doc)
                taps = np.rint(_pad(taps, size, padding_mode, align_corners)[0])
        else:
            q, dq = _pad(p, size, padding_mode, align_corners)
            if mode == "nearest":
                taps = np.rint(q)[None]
                w, dw = np.ones_like(taps), np.zeros_like(taps)
            else:
                base = np.floor(q)
                t = q - base
                taps = np.stack([base, base + 1])
                w = np.stack([1 - t, t])
                dw = np.stack([-dq, dq]) * scale
        valid = (taps >= 0) & (taps <= size - 1)
    return np.where(valid, taps, 0).astype(np.intp), valid, w, dw


def _check(inp, grid, mode: str, padding_mode: str) -> tuple[np.ndarray, np.ndarray]:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if padding_mode not in PADDINGS:
        raise ValueError(f"padding_mode must be one of {PADDINGS}, got {padding_mode!r}")
    inp = np.asarray(inp, dtype=np.float64)
    grid = np.asarray(grid, dtype=np.float64)
    if inp.ndim != 4:
        raise ValueError(f"inp must be (N, C, H, W), got shape {inp.shape}")
    if grid.ndim != 4 or grid.shape[3] != 2:
        raise ValueError(f"grid must be (N, Ho, Wo, 2), got shape {grid.shape}")
    if grid.shape[0] != inp.shape[0]:
        raise ValueError(f"batch mismatch: inp {inp.shape}, grid {grid.shape}")
    if inp.shape[2] < 1 or inp.shape[3] < 1:
        raise ValueError(f"inp must have non-empty spatial dimensions, got shape {inp.shape}")
    return inp, grid


def _taps(inp, grid, mode, padding_mode, align_corners):
    inp, grid = _check(inp, grid, mode, padding_mode)
    h, w = inp.shape[2:]
    ty = _axis_taps(grid[..., 1], h, mode, padding_mode, bool(align_corners))
    tx = _axis_taps(grid[..., 0], w, mode, padding_mode, bool(align_corners))
    return inp, grid, ty, tx


def _gather(inp: np.ndarray, iy: np.ndarray, ix: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """inp[n, :, iy, ix] as (N, C, Ho, Wo), 0 where not ``valid``."""
    n = np.arange(inp.shape[0])[:, None, None]
    vals = np.moveaxis(inp[n, :, iy, ix], -1, 1)
    return np.where(valid[:, None], vals, 0.0)


def _pairs(ty: Axis, tx: Axis):
    """Every 2-D tap (i, j): index y, index x, in range, weight y, weight x, and derivatives."""
    for iy, vy, wy, dwy in zip(*ty, strict=True):
        for ix, vx, wx, dwx in zip(*tx, strict=True):
            yield iy, ix, vy & vx, wy[:, None], wx[:, None], dwy[:, None], dwx[:, None]


def grid_sample(inp: np.ndarray, grid: np.ndarray, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool = False) -> np.ndarray:
    """F.grid_sample(inp, grid, mode, padding_mode, align_corners) in float64 (see module doc)."""
    inp, grid, ty, tx = _taps(inp, grid, mode, padding_mode, align_corners)
    out = np.zeros(inp.shape[:2] + grid.shape[1:3])
    with np.errstate(invalid="ignore"):
        for iy, ix, valid, wy, wx, _, _ in _pairs(ty, tx):
            out += wy * wx * _gather(inp, iy, ix, valid)
    return out


def interp_magnitude(inp: np.ndarray, grid: np.ndarray, mode: str = "bilinear",
                     padding_mode: str = "zeros", align_corners: bool = False) -> np.ndarray:
    """Per output element, sum over taps of |wy_i * wx_j| * |v(iy_i, ix_j)| (out-of-range taps
    read 0), shape (N, C, Ho, Wo).

    This is the magnitude a forward rounding-error bound scales with: an implementation that
    forms the weights exactly and sums k products (k = 4 bilinear, 16 bicubic, 1 nearest) in
    precision u satisfies |out - ref| <= gamma_k * magnitude, gamma_k = k u / (1 - k u). The
    error of the weights themselves (t = q - floor(q) is rounded relative to |q|) is a separate
    term: about u * |q| * |d out / d q|, which the caller adds when the coordinates are large.
    """
    inp, grid, ty, tx = _taps(inp, grid, mode, padding_mode, align_corners)
    out = np.zeros(inp.shape[:2] + grid.shape[1:3])
    with np.errstate(invalid="ignore"):
        for iy, ix, valid, wy, wx, _, _ in _pairs(ty, tx):
            out += np.abs(wy * wx) * np.abs(_gather(inp, iy, ix, valid))
    return out


def grid_sample_backward(inp: np.ndarray, grid: np.ndarray, grad_out: np.ndarray,
                         mode: str = "bilinear", padding_mode: str = "zeros",
                         align_corners: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(grad_input (N, C, H, W), grad_grid (N, Ho, Wo, 2)) of grid_sample for the output
    gradient ``grad_out`` (N, C, Ho, Wo), analytic, in float64 (see the module doc)."""
    inp, grid, ty, tx = _taps(inp, grid, mode, padding_mode, align_corners)
    grad_out = np.asarray(grad_out, dtype=np.float64)
    want = inp.shape[:2] + grid.shape[1:3]
    if grad_out.shape != want:
        raise ValueError(f"grad_out must have shape {want}, got {grad_out.shape}")
    grad_inp = np.zeros_like(inp)
    gx = np.zeros(grid.shape[:3])
    gy = np.zeros(grid.shape[:3])
    n = np.arange(inp.shape[0])[:, None, None]
    for iy, ix, valid, wy, wx, dwy, dwx in _pairs(ty, tx):
        contrib = np.where(valid[:, None], wy * wx * grad_out, 0.0)
        np.add.at(grad_inp, (n, slice(None), iy, ix), np.moveaxis(contrib, 1, -1))
        if mode != "nearest":
            gv = grad_out * _gather(inp, iy, ix, valid)
            gx += (wy * dwx * gv).sum(axis=1)
            gy += (dwy * wx * gv).sum(axis=1)
    return grad_inp, np.stack([gx, gy], axis=-1)
