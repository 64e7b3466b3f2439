"""The erfcx area's checks: the forward values by an ulp bound with the input's own
rounding allowed for, the backward by a forward-error bound of torch's formula.

Forward. erfcx is ill-conditioned for x << 0 (erfcx(x) ~ 2 exp(x^2), condition number
|x f'(x) / f(x)| ~ 2 x^2): forming x*x alone moves the result by ~x^2 ulps, so no
implementation is within a few ulps of the correctly rounded value there. The bound asks
for the exact erfcx of an input within one unit roundoff of x, give or take ``ULPS`` ulps
of the output (erfcx is decreasing, so that is an interval):

    f(x + u|x|) - ULPS ulp  <=  got  <=  f(x - u|x|) + ULPS ulp,    u = 2^-p of the dtype,

with +inf allowed exactly when f(x - u|x|) overflows the dtype, and the special values
(+-0 -> 1, +inf -> 0, -inf -> +inf, NaN -> NaN) exact. ULPS certifies: float32 and float64,
8 ulps: the common algorithm (Johnson's piecewise Chebyshev erfcx, in torch's Math.h and
SciPy) evaluates a degree-6 polynomial in y = 400 / (4 + x) per interval; Horner's rule
errs by at most gamma_12 ~ 12 u ~ 6 ulps relative to the sum of the terms' magnitudes (all
of one sign here), plus the roundings of y and of the result (~2 ulps). Measured on torch's
CPU kernel: 7.3 ulps (float32), 7.0 (float64), both near x = 0. float16 and bfloat16,
1 ulp: a kernel that computes in float32 and rounds once errs by 0.5 ulp of the half type
plus 8 float32 ulps (far below one half-type ulp); a kernel computing in the half type
itself is not what this certifies.

Backward. d/dx erfcx = 2x erfcx(x) - 2/sqrt(pi), computed by torch as
g * (2 x erfcx(x) - 2/sqrt(pi)) from the forward result; with the forward's error B(x) (the
bound above, linearised: ULPS ulp + u |x f'(x)|), elementwise

    |got - g d(x)| <= |g| (2|x| B(x) + 4u (2|x| f(x) + 2/sqrt(pi))) + u |g d(x)|,

checked where the forward is finite and below the dtype's max / 4 (beyond, 2x * inf).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from conformance.harness import recheck
from conformance.harness.compare import Measurement, elementwise_bound, exact
from conformance.harness.record import Record
from conformance.harness.tensors import dtype_name, rounded
from oracles import erfcx as ox

ULPS = {"float16": 1.0, "bfloat16": 1.0, "float32": 8.0, "float64": 8.0}
C = 2.0 / math.sqrt(math.pi)


def unit_roundoff(dtype: str) -> float:
    return 2.0 ** -ox.FORMATS[dtype][0]


def round_to(values: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """float64 values rounded to ``dtype`` (inf beyond its range)."""
    with np.errstate(over="ignore"):
        return rounded(np.asarray(values, dtype=np.float64), dtype_name(dtype))


def _expect_forward(x: np.ndarray, want: np.ndarray, special: np.ndarray,
                    dtype: torch.dtype, region: str) -> None:
    """--repro-dir: the forward criterion as an interval per element (the special values
    exact), for the standalone script to re-check the call (conformance/harness/recheck.py)."""
    name = dtype_name(dtype)
    u, ulps = unit_roundoff(name), ULPS[name]
    lower, upper = np.full(x.shape, -np.inf), np.full(x.shape, np.inf)
    xr = x[~special]
    with np.errstate(over="ignore", invalid="ignore"):
        hi, lo = ox.erfcx_exact(xr - u * np.abs(xr)), ox.erfcx_exact(xr + u * np.abs(xr))
        hi_d, lo_d = round_to(hi, dtype), round_to(lo, dtype)
        lower[~special] = lo - ulps * ox.ulp(lo_d, name)
        upper[~special] = np.where(np.isinf(hi_d), np.inf, hi + ulps * ox.ulp(hi_d, name))
    recheck.expect(recheck.within_interval(
        f"{region}: erfcx within {ulps:g} ulps of f(x(1 +- u)), special values exact ({name})",
        recheck.output(), lower, upper, expected=want, exact=special, dtype=dtype,
        device=True))


def check_forward(record: Record, x: np.ndarray, got: np.ndarray, dtype: torch.dtype,
                  region: str) -> None:
    name = dtype_name(dtype)
    u, ulps = unit_roundoff(name), ULPS[name]
    special = ~np.isfinite(x) | (x == 0)
    want = ox.erfcx_exact(x)
    if recheck.tracing():
        _expect_forward(x, want, special, dtype, region)
    bad_special = special & ~((got == want) | (np.isnan(got) & np.isnan(want)))
    record.require(exact(f"{region}: special values exact", int(bad_special.sum()),
                         int(special.sum()), _where(x, got, want, bad_special)))
    regular = ~special
    if not regular.any():
        return
    xr, gr = x[regular], got[regular]
    with np.errstate(over="ignore"):  # x (1 +- u) past the float64 max: +-inf, meant
        hi = ox.erfcx_exact(xr - u * np.abs(xr))  # erfcx decreases: the larger end
        lo = ox.erfcx_exact(xr + u * np.abs(xr))
    hi_d, lo_d = round_to(hi, dtype), round_to(lo, dtype)
    over = np.isinf(hi_d)
    with np.errstate(invalid="ignore"):
        below = np.where(gr < lo, (lo - gr) / ox.ulp(lo_d, name), 0.0)
        above = np.where(over, 0.0, np.where(gr > hi, (gr - hi) / ox.ulp(hi_d, name), 0.0))
    excess = np.maximum(below, above)
    excess = np.where(np.isnan(gr) | (np.isinf(gr) & ~over), np.inf, excess)
    i = int(np.argmax(excess))
    record.require(Measurement(
        f"{region}: |erfcx - f(x(1 +- u))| in ulps (bound {ulps:g} ulps, {name})",
        float(excess[i]), ulps,
        f"worst at x = {xr[i]!r}: got {gr[i]!r}, exact {ox.erfcx_exact(xr[i:i + 1])[0]!r}, "
        f"allowed [{lo[i]!r}, {hi[i]!r}] +- {ulps:g} ulps"))


def check_backward(record: Record, x: np.ndarray, g: np.ndarray, got: np.ndarray,
                   dtype: torch.dtype, leaf: torch.Tensor | None = None) -> None:
    """``leaf``: the input whose gradient ``got`` is (--repro-dir re-checks it)."""
    name = dtype_name(dtype)
    u, ulps = unit_roundoff(name), ULPS[name]
    fx, d = ox.erfcx_exact(x), ox.derivative(x)
    big = float(torch.finfo(dtype).max) / 4
    with np.errstate(over="ignore"):  # an overflowing x * erfcx(x) is left out, meant
        use = np.isfinite(x) & np.isfinite(fx) & (np.abs(fx) < big) & (2 * np.abs(x * fx) < big)
    shape = x.shape
    x, g, got, fx, d = x[use], g[use], got[use], fx[use], d[use]
    ref = g * d
    forward = ulps * ox.ulp(fx, name) + u * np.abs(x * d)
    # products ordered so that nothing overflows at x near the dtype's max
    bound = np.abs(g) * (2 * (np.abs(x) * forward) + 4 * u * (2 * np.abs(x * fx) + C)) \
        + u * np.abs(ref)
    check = f"grad = g (2x erfcx(x) - 2/sqrt(pi)) within the forward-error bound ({name})"
    if leaf is not None and recheck.tracing():  # unchecked elements: anything goes
        full_ref, full_bound = np.full(shape, np.nan), np.full(shape, np.inf)
        full_ref[use], full_bound[use] = ref, bound
        recheck.expect(recheck.within_bound(check, recheck.grad(leaf), full_ref, full_bound,
                                            dtype=dtype, device=True))
    record.require(elementwise_bound(check, got, ref, bound))


def _where(x: np.ndarray, got: np.ndarray, want: np.ndarray, bad: np.ndarray) -> str:
    idx = np.flatnonzero(bad)[:3]
    return "; ".join(f"erfcx({x[i]!r}) = {got[i]!r}, want {want[i]!r}" for i in idx)
