"""The erfcx area's checks: the forward values within a derived bound with the input's own
rounding allowed for, the backward against the true derivative.

Forward. erfcx is ill-conditioned for x << 0 (erfcx(x) ~ 2 exp(x^2), condition number
|x f'(x) / f(x)| ~ 2 x^2): forming x*x alone moves the result by ~x^2 ulps, so no
implementation is within a few ulps of the correctly rounded value there. The bound asks
for the exact erfcx of an input within one unit roundoff of x, widened by the allowance
derived from the common algorithm's rounding (erfcx_bound.py; erfcx decreases, so that is
an interval):

    f(x + u|x|) - A(x)  <=  got  <=  f(x - u|x|) + A(x),    u = 2^-p of the compute format,

with +inf allowed exactly when the upper end overflows the dtype, and the special values
(+-0 -> 1, +inf -> 0, -inf -> +inf, NaN -> NaN) exact. float16 and bfloat16 certify a
kernel computing in float32 and rounding once: float32's u and allowance plus half an ulp
of the half type (a kernel computing in the half type itself fails).

Backward. d(x) = erfcx'(x) = 2x erfcx(x) - 2/sqrt(pi) (the oracle's 40 digits). The formula
g (2x erfcx(x) - 2/sqrt(pi)) from a forward within the bound B(x) = A(x) + u |x d(x)| errs
by at most F = |g| (2|x| B(x) + 4u (2|x| f(x) + 2/sqrt(pi))); for large x it cancels
(2x f(x) -> 2/sqrt(pi)) and F exceeds the gradient itself. So, elementwise,

    |got - g d(x)| <= |g| min(F / |g|, (2^-8 + 4u) |d(x)|) + final rounding,

the formula's bound where that is tighter, else the gradient to bfloat16's precision (2^-8
relative: the coarsest format a gradient is kept in; 4u for the conditioning |x d'/d| <= 3
there): a gradient of the wrong sign, flushed to 0 or off by a factor fails. Below the
dtype's smallest normal the gradient may be anything that small (flushed to zero). Checked where the
forward is finite and below the dtype's max / 4 (beyond, 2x * inf).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import torch

from conformance.areas.special import erfcx_bound as bound
from conformance.harness import recheck
from conformance.harness.compare import Measurement, elementwise_bound, exact
from conformance.harness.record import Record
from conformance.harness.tensors import dtype_name, rounded
from oracles import erfcx as ox

C = 2.0 / math.sqrt(math.pi)
RELATIVE = 2.0 ** -8  # the backward where the formula cancels: bfloat16's precision


def round_to(values: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """float64 values rounded to ``dtype`` (inf beyond its range)."""
    with np.errstate(over="ignore"):
        return rounded(np.asarray(values, dtype=np.float64), dtype_name(dtype))


def forward_interval(x: np.ndarray, dtype: torch.dtype
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lower, upper, lo, hi) for finite nonzero x: [lo, hi] = f(x(1 +- u)) with the compute
    format's u, widened by the derived allowance (erfcx_bound.py); upper is +inf where its
    end overflows the dtype (an infinity is then a right answer). Cached: every plugged-in
    implementation of a run is held to the same inputs."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    return _interval(x.tobytes(), dtype_name(dtype), dtype)


@lru_cache(maxsize=64)
def _oracle(what: str, key: bytes) -> np.ndarray:
    """ox.erfcx_exact or ox.derivative of the float64 values in ``key`` (cached, read-only)."""
    out = getattr(ox, what)(np.frombuffer(key, dtype=np.float64))
    out.flags.writeable = False
    return out


def exact_of(x: np.ndarray, what: str = "erfcx_exact") -> np.ndarray:
    return _oracle(what, np.ascontiguousarray(x, dtype=np.float64).tobytes()).reshape(
        np.shape(x))


@lru_cache(maxsize=32)
def _interval(key: bytes, name: str, dtype: torch.dtype
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    x = np.frombuffer(key, dtype=np.float64)
    u = bound.compute_unit(name)
    with np.errstate(over="ignore", invalid="ignore"):  # x (1 +- u) past the float64 max
        hi = ox.erfcx_exact(x - u * np.abs(x))  # erfcx decreases: the larger end
        lo = ox.erfcx_exact(x + u * np.abs(x))
        lower = np.where(np.isinf(lo), lo, lo - bound.allowance(x, lo, name))
        upper = hi + bound.allowance(x, hi, name)
    upper = np.where(np.isinf(round_to(upper, dtype)), np.inf, upper)
    return lower, upper, lo, hi


def _expect_forward(x: np.ndarray, want: np.ndarray, special: np.ndarray,
                    dtype: torch.dtype, region: str) -> None:
    """--repro-dir: the forward criterion as an interval per element (the special values
    exact), for the standalone script to re-check the call (conformance/harness/recheck.py)."""
    lower, upper = np.full(x.shape, -np.inf), np.full(x.shape, np.inf)
    lower[~special], upper[~special] = forward_interval(x[~special], dtype)[:2]
    recheck.expect(recheck.within_interval(
        f"{region}: erfcx within the derived bound of f(x(1 +- u)), special values exact "
        f"({dtype_name(dtype)})", recheck.output(), lower, upper, expected=want,
        exact=special, dtype=dtype, device=True))


def check_forward(record: Record, x: np.ndarray, got: np.ndarray, dtype: torch.dtype,
                  region: str) -> None:
    name = dtype_name(dtype)
    special = ~np.isfinite(x) | (x == 0)
    want = exact_of(x)
    if recheck.tracing():
        _expect_forward(x, want, special, dtype, region)
    bad_special = special & ~((got == want) | (np.isnan(got) & np.isnan(want)))
    record.require(exact(f"{region}: special values exact", int(bad_special.sum()),
                         int(special.sum()), _where(x, got, want, bad_special)))
    regular = ~special
    if not regular.any():
        return
    xr, gr = x[regular], got[regular]
    lower, upper, lo, hi = forward_interval(xr, dtype)
    f = want[regular]
    # the deviation from the exact value over the allowed one on its side (<= 1 passes:
    # the same as lower <= got <= upper, and a margin that shows how close got came)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        up = np.where(np.isinf(upper), 0.0, (gr - f) / (upper - f))
        down = np.where(np.isinf(f), np.where(gr >= lower, 0.0, np.inf), (f - gr) / (f - lower))
        out = np.where(gr > f, up, np.where(gr < f, down, 0.0))
    out = np.where(np.isnan(gr) | (np.isinf(gr) & ~np.isinf(upper)), np.inf,
                   np.where(np.isnan(out), np.inf, out))
    i = int(np.argmax(out))
    scale = ox.ulp(round_to(np.array([f[i]]), dtype), name)[0]
    dev = abs(gr[i] - f[i]) / scale if np.isfinite(gr[i]) and np.isfinite(f[i]) else math.inf
    side = upper[i] if gr[i] > f[i] else lower[i]
    allowed = abs(side - f[i]) / scale
    record.require(Measurement(
        f"{region}: |erfcx - f(x(1 +- u))| in ulps over the derived bound's ulps ({name})",
        float(out[i]), 1.0,
        f"worst at x = {xr[i]!r}: got {gr[i]!r}, exact {f[i]!r}, {dev:.3g} ulps from it, "
        f"{allowed:.3g} allowed on that side: f(x(1 +- u)) in [{lo[i]!r}, {hi[i]!r}] and the "
        f"derived allowance (conformance/areas/special/erfcx_bound.py)"))


def backward_bound(x: np.ndarray, g: np.ndarray, fx: np.ndarray, d: np.ndarray, name: str
                   ) -> np.ndarray:
    """|got - g d(x)| allowed: the formula's forward-error bound where that is below
    RELATIVE |d|, else RELATIVE (+ 4u, the derivative's conditioning; u the compute
    format's), plus the final rounding (module docstring)."""
    u = bound.compute_unit(name)
    forward = bound.allowance(x, fx, name) + u * np.abs(x * d)
    # products ordered so that nothing overflows at x near the dtype's max
    formula = 2 * (np.abs(x) * forward) + 4 * u * (2 * np.abs(x * fx) + C)
    relative = (RELATIVE + 4 * u) * np.abs(d)
    ref = np.abs(g * d)
    # below the normal range, anything up to the smallest normal: a subnormal gradient may
    # be flushed to zero (FTZ, as GPU kernels compile by default; x * x overflowing first)
    final = (0.5 * ox.ulp(ref, name) if bound.COMPUTE[name] != name else u * ref) \
        + 2.0 ** ox.FORMATS[name][1]
    return np.abs(g) * np.minimum(formula, relative) + final


def check_backward(record: Record, x: np.ndarray, g: np.ndarray, got: np.ndarray,
                   dtype: torch.dtype, leaf: torch.Tensor | None = None) -> None:
    """``leaf``: the input whose gradient ``got`` is (--repro-dir re-checks it)."""
    name = dtype_name(dtype)
    fx, d = exact_of(x), exact_of(x, "derivative")
    big = float(torch.finfo(dtype).max) / 4
    with np.errstate(over="ignore"):  # an overflowing x * erfcx(x) is left out, meant
        use = np.isfinite(x) & np.isfinite(fx) & (np.abs(fx) < big) & (2 * np.abs(x * fx) < big)
    shape = x.shape
    x, g, got, fx, d = x[use], g[use], got[use], fx[use], d[use]
    ref = g * d
    allowed = backward_bound(x, g, fx, d, name)
    check = (f"grad = g erfcx'(x) within the formula's forward-error bound, at most "
             f"2^-8 relative ({name})")
    if leaf is not None and recheck.tracing():  # unchecked elements: anything goes
        full_ref, full_bound = np.full(shape, np.nan), np.full(shape, np.inf)
        full_ref[use], full_bound[use] = ref, allowed
        recheck.expect(recheck.within_bound(check, recheck.grad(leaf), full_ref, full_bound,
                                            dtype=dtype, device=True))
    record.require(elementwise_bound(check, got, ref, allowed))


def _where(x: np.ndarray, got: np.ndarray, want: np.ndarray, bad: np.ndarray) -> str:
    idx = np.flatnonzero(bad)[:3]
    return "; ".join(f"erfcx({x[i]!r}) = {got[i]!r}, want {want[i]!r}" for i in idx)
