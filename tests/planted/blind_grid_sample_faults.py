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

import torch
import torch.nn.functional as F

from . import blind_grid_sample_backward as _blind_grid_sample_backward
from . import blind_grid_sample_reference as _blind_grid_sample_reference
from .blind_grid_sample_engine import _attach, _run
from .blind_grid_sample_reference import ALL, HALF, Tensor, _grid_sample

# the outside implementations and the backward faults, reachable by this module's specs
# (--impl grid_sample=planted.blind_grid_sample_faults:<attr>)
numpy_cast = _blind_grid_sample_reference.numpy_cast
float32_compute = _blind_grid_sample_reference.float32_compute
grad_grid_scale_ignores_align = _blind_grid_sample_backward.grad_grid_scale_ignores_align
border_grad_zero_padding = _blind_grid_sample_backward.border_grad_zero_padding
half_grad_input_atomic = _blind_grid_sample_backward.half_grad_input_atomic
nan_grid_backward_raises = _blind_grid_sample_backward.nan_grid_backward_raises

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
