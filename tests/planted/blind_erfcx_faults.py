"""Blind erfcx faults and outside implementations
(``--impl special.erfcx=planted.blind_erfcx_faults:<attr>``).

Written WITHOUT reading how the suite checks erfcx: only from the contract
(``docs/contracts.md``, ``special.erfcx``), torch's ``calc_erfcx`` (ATen ``Math.h``, Steven G.
Johnson's Faddeeva-package algorithm), scipy's ``erfcx`` documentation and upstream reports.

Every attribute but ``scipy_cast`` runs ``_port``, an independent port of Johnson's scheme
in torch: for 0 <= x <= 50, y100 = 400 / (4 + x) and one of 100 degree-6 polynomials in
t = 2 y100 - (2k + 1) on [k, k + 1) (fitted here with mpmath: Chebyshev-truncated, monomial
in t, as Johnson's Maple table); for x > 50 his continued fraction (ispi / x past
5e7); for x < 0, 2 exp(x^2) - erfcx(-x) (2 exp(x^2) below -6.1, inf below -26.7). It runs in
x's dtype for float32 / float64 and in float32 for float16 / bfloat16, rounded once. The
backward is a custom autograd.Function: grad * (2 x erfcx(x) - 2 / sqrt(pi)) in the same
working dtype (x * erfcx(x) first: 2 x overflows; the asymptotic series past 1e5).

A fault is a knob of ``_port`` (or of the backward) switched on only where a real kernel
would plausibly be wrong; everywhere else it is the correct port. Upstream reports used:
pytorch#122426 (erfcx(inf)), jax#38607 (zeros near 26.6), pytorch#58194 (the float32
overflow cutoff). ``FAULTS`` lists the faults,
``CORRECT`` the two outside implementations (``scipy_cast``, ``port_float32``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

import mpmath
import numpy as np
import scipy.special
import torch

Tensor = torch.Tensor
Fwd = Callable[[Tensor], Tensor]
Bwd = Callable[[Tensor, Tensor], Tensor]
HALF = (torch.float16, torch.bfloat16)
ISPI = 0.56418958354775628694807945156  # 1 / sqrt(pi)
DEG = 6


@cache
def _coefficients() -> np.ndarray:
    """(100, 7): interval k's polynomial in t = 2 y100 - (2k + 1), ascending powers.

    erfcx(400 / y100 - 4) on y100 in [k, k + 1] expanded in Chebyshev polynomials of t from
    16 Chebyshev nodes at 40 digits, truncated after T_6 and converted to powers of t (the
    way Johnson's Maple script built ``erfcx_y100``; the first four coefficients agree with
    his to ~1e-18)."""
    n = 16
    mono = [[int(c) for c in np.polynomial.chebyshev.cheb2poly([0] * j + [1])]
            for j in range(DEG + 1)]
    out = np.zeros((100, DEG + 1))
    with mpmath.workdps(40):
        theta = [mpmath.pi * (i + mpmath.mpf(1) / 2) / n for i in range(n)]
        for k in range(100):
            xs = [400 / (k + (mpmath.cos(th) + 1) / 2) - 4 for th in theta]
            vals = [mpmath.exp(x * x) * mpmath.erfc(x) for x in xs]
            cheb = [2 * mpmath.fsum(v * mpmath.cos(j * th)
                                    for v, th in zip(vals, theta, strict=True)) / n
                    for j in range(DEG + 1)]
            cheb[0] /= 2
            for p in range(DEG + 1):
                out[k, p] = float(mpmath.fsum(cheb[j] * mono[j][p] for j in range(p, DEG + 1)))
    return out


def _rdiv(a: float, b: Tensor) -> Tensor:
    """a / b correctly rounded (``a / tensor`` is ``b.reciprocal() * a``: two roundings)."""
    return torch.div(torch.full_like(b, a), b)


def _square(x: Tensor) -> Tensor:
    return x * x


def _half_square(half: torch.dtype, x: Tensor) -> Tensor:
    """x * x formed in the half type ``half``, then widened back to x's dtype."""
    h = x.to(half)
    return (h * h).to(x.dtype)


def _y100(y100: Tensor, short: Tensor, deg: int) -> Tensor:
    """Johnson's ``erfcx_y100`` (1 at y100 >= 100: |x| < 4 eps), degree deg where short."""
    k = torch.nan_to_num(y100.floor(), nan=0.0).clamp(0, 99)
    c = torch.tensor(_coefficients(), dtype=y100.dtype, device=y100.device)[k.long()]
    drop = torch.arange(DEG + 1, device=y100.device) > deg
    c = torch.where(short[..., None] & drop, 0.0, c)
    t = 2 * y100 - (2 * k + 1)
    acc = c[..., DEG]
    for j in range(DEG - 1, -1, -1):
        acc = c[..., j] + acc * t
    return torch.where(y100 >= 100, 1.0, acc)


@dataclass(frozen=True)
class Knobs:
    """Where ``_port`` departs from Johnson (the defaults are his algorithm)."""

    cf_from: float = 50.0  # the continued fraction's threshold
    cf_short: float = 0.0  # up to here, the fraction one level short
    huge: bool = True  # the ispi / x branch past 5e7
    sq_exp: Callable[[Tensor], Tensor] = _square  # x^2 for exp(x^2)
    sq_cf: Callable[[Tensor], Tensor] = _square  # x^2 for the continued fraction
    exp_f32: bool = False  # exp(x^2) in float32
    neg: tuple[float, float] = (-6.1, 2.0)  # the c exp(x^2) branch: (below, c)
    short: tuple[float, float, int] = (0.0, 0.0, DEG)  # (lo, hi, degree) for |x|
    rdiv: Callable[[float, Tensor], Tensor] = _rdiv  # scalar / tensor
    two_step: bool = False  # y100 = 100 * (4 / (4 + |x|))
    fmax_guard: bool = False  # x = fmax(x, -26.7) first (fmaxf ignores NaN)
    product: tuple[float, float] = (0.0, 0.0)  # exp(x^2) * erfc(x) on [lo, hi)


def _port(x: Tensor, k: Knobs) -> Tensor:
    """Johnson's calc_erfcx, elementwise in x's dtype, departing where ``k`` says."""
    if k.fmax_guard:
        x = torch.fmax(x, torch.full_like(x, -26.7))
    ax = x.abs()
    y100 = 100 * k.rdiv(4, 4 + ax) if k.two_step else k.rdiv(400, 4 + ax)
    poly = _y100(y100, (ax >= k.short[0]) & (ax < k.short[1]), k.short[2])
    xx = k.sq_cf(x)
    cf = ISPI * (xx * (xx + 4.5) + 2) / (x * (xx * (xx + 5) + 3.75))
    short_cf = k.rdiv(ISPI, x + k.rdiv(0.5, x + k.rdiv(1, x + k.rdiv(1.5, x))))
    cf = torch.where(x <= k.cf_short, short_cf, cf)
    if k.huge:
        cf = torch.where(x > 5e7, k.rdiv(ISPI, x), cf)
    xe = k.sq_exp(x)
    e = torch.exp(xe.float()).to(x.dtype) if k.exp_f32 else torch.exp(xe)
    below = torch.where(x < k.neg[0], k.neg[1] * e, 2 * e - poly)
    below = torch.where(x < -26.7, math.inf, below)
    out = torch.where(x >= 0, torch.where(x > k.cf_from, cf, poly), below)
    erfc = torch.special.erfc(x)  # flushed to zero when subnormal (FTZ, as XLA / GPUs)
    erfc = torch.where(erfc < torch.finfo(x.dtype).tiny, 0.0, erfc)
    band = (x >= k.product[0]) & (x < k.product[1])
    out = torch.where(band, torch.exp(x * x) * erfc, out)
    return torch.where(x.isnan(), x, out)


def _slope(x: Tensor, y: Tensor) -> Tensor:
    """d erfcx / dx = 2 x erfcx(x) - 2 / sqrt(pi) in x's dtype: x * y first (2 x overflows
    near the maximum), -1 / (sqrt(pi) x^2) (1 - 3 / (2 x^2)) past 1e5 (the difference
    cancels there; the series' next term is below 4e-20 relative)."""
    asym = _rdiv(-ISPI, x * x) * (1 - _rdiv(1.5, x * x))
    return torch.where(x > 1e5, asym, 2 * (x * y) - 2 * ISPI)


class _Erfcx(torch.autograd.Function):
    """y = fwd(x) in a working dtype, rounded once to x's dtype; grad * bwd(x, y)."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, fwd: Fwd, bwd: Bwd) -> Tensor:
        y = fwd(x)
        ctx.save_for_backward(x, y)
        ctx.bwd = bwd
        return y.to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None]:
        x, y = ctx.saved_tensors
        xw = x.to(y.dtype)
        return (grad.to(y.dtype) * ctx.bwd(xw, y)).to(x.dtype), None, None


def _work(dtype: torch.dtype) -> torch.dtype:
    return torch.float64 if dtype == torch.float64 else torch.float32


def _run(x: Tensor, on: tuple[torch.dtype, ...] = (), bwd: Bwd | None = None,
         **knobs: Any) -> Tensor:
    """The port; the ``knobs`` (and ``bwd``) only where x's dtype is in ``on``."""
    hit = x.dtype in on
    k = Knobs(**knobs) if hit else Knobs()
    b = bwd if hit and bwd is not None else _slope
    return _Erfcx.apply(x, lambda v: _port(v.to(_work(v.dtype)), k), b)


# ------------------------------------------------------------------ correct implementations


def _scipy64(x: Tensor) -> Tensor:
    y = scipy.special.erfcx(x.detach().to("cpu", torch.float64).numpy())
    return torch.from_numpy(np.asarray(y, dtype=np.float64)).to(x.device)


def scipy_cast(x: Tensor) -> Tensor:
    """scipy.special.erfcx (Johnson's C code, float64) on the CPU, cast once to x's dtype;
    the backward is the exact derivative 2 x erfcx(x) - 2 / sqrt(pi) in float64 (``_slope``:
    its asymptotic series past 1e5), cast once."""
    return _Erfcx.apply(x, _scipy64, _slope)


def port_float32(x: Tensor) -> Tensor:
    """The port with ordinary rounding: every operation in float32 for float32 inputs (the
    same code in float64 for float64, float32 and one rounding for the half types)."""
    return _run(x)


# ------------------------------------------------------------------------------- faults

F32, F64, BOTH = (torch.float32,), (torch.float64,), (torch.float32, torch.float64)


def half_neg_constant(x: Tensor) -> Tensor:
    """Half types: 2.8 exp(x^2) below -6.5 (1.4x too large) -- a kernel whose exp-dominated
    branch has a mistyped constant. Float16 overflows below -3.2 (inf either way): only
    bfloat16 on [-9.4, -6.5) can show it."""
    return _run(x, HALF, neg=(-6.5, 2.8))


def half_square_exp(x: Tensor) -> Tensor:
    """Half types: exp(x * x) with x * x formed in the half type (``scalar_t x2 = x * x``
    before the float32 ``exp``), the rest in float32. Relative error of exp up to x^2 u_half:
    ~5 (float16, x > -3.2) to ~44 (bfloat16, x > -9.4) ulps of the half result; but that is
    erfcx of x (1 + u / 2), inside a one-unit-roundoff input band (expected to pass)."""
    return _run(x, HALF, sq_exp=partial(_half_square, x.dtype))


def half_square_shared(x: Tensor) -> Tensor:
    """As ``half_square_exp``, with the half x * x also reused by the continued fraction
    (x > 50): in float16 x * x overflows from x = 256, and inf / inf gives NaN for
    256 <= x <= 65504 (true values 2.2e-3 to 8.6e-6); bfloat16 only loses the exp rounding."""
    sq = partial(_half_square, x.dtype)
    return _run(x, HALF, sq_exp=sq, sq_cf=sq)


def _grad_zero(x: Tensor, y: Tensor) -> Tensor:
    return torch.where(x > 700, 0.0, _slope(x, y))


def _grad_flip(x: Tensor, y: Tensor) -> Tensor:
    return torch.where(x > 700, -_slope(x, y), _slope(x, y))


def f32_grad_zero_past_700(x: Tensor) -> Tensor:
    """Float32: forward right, the gradient 0 for x > 700 (an underflow shortcut: "erfcx'
    ~ -1/(sqrt(pi) x^2) < 1.2e-6, flush it"); the true value is -1.15e-6 at 700, -5.6e-9 at
    1e4, against ~1.3e-7 of cancellation in the float32 formula itself."""
    return _run(x, F32, bwd=_grad_zero)


def f32_grad_sign_past_700(x: Tensor) -> Tensor:
    """Float32: forward right, the gradient's sign flipped for x > 700 (a custom
    autograd.Function whose large-x branch returns +1 / (sqrt(pi) x^2)): off by 2.3e-6 at
    700, 1.1e-8 at 1e4."""
    return _run(x, F32, bwd=_grad_flip)


def f64_deg5_half_to_one(x: Tensor) -> Tensor:
    """Float64: the polynomials for |x| in [0.5, 1) (y100 in (80, 88.9]) one term short (no
    t^6: "the last coefficient is ~1.7e-13"): |G t^6| / erfcx, up to ~2600 ulps at the
    interval ends (t = +-1), ~40 ulps at |t| = 1/2, ~0 mid-interval."""
    return _run(x, F64, short=(0.5, 1.0, 5))


def f32_cubic_table(x: Tensor) -> Tensor:
    """Float32: every polynomial cut after t^3 ("E t^4 < 3e-8 relative: below float32's
    half ulp"). Measured: no change against the correct port (equivalent in practice)."""
    return _run(x, F32, short=(0.0, 50.0, 3))


def f32_quadratic_half_to_one(x: Tensor) -> Tensor:
    """Float32: the polynomials for |x| in [0.5, 1) cut after t^2: D t^3 ~ 1e-6 relative,
    up to ~30 ulps (correct port: ~5)."""
    return _run(x, F32, short=(0.5, 1.0, 2))


def f64_cf_from_35(x: Tensor) -> Tensor:
    """Float64: the continued fraction from x > 35 instead of 50 (a kernel moving Johnson's
    branch point "to skip the table"): its truncation error is ~7 ulps at 35, ~4.6 at 40,
    ~2.7 at 45 (correct: ~1.7)."""
    return _run(x, F64, cf_from=35.0)


def f64_cf_from_30(x: Tensor) -> Tensor:
    """Float64: as ``f64_cf_from_35`` from x > 30: ~33 ulps at 30, ~18 at 32."""
    return _run(x, F64, cf_from=30.0)


def f32_cf_from_4(x: Tensor) -> Tensor:
    """Float32 only: the continued fraction from x > 4 ("the asymptotic branch is good
    enough for float"): ~16 ulps at 4, ~12 at 4.5, ~5 at 5, within rounding past ~6
    (correct port: ~3)."""
    return _run(x, F32, cf_from=4.0)


def f64_cf_short_to_60(x: Tensor) -> Tensor:
    """Float64: for 50 < x <= 60 the fraction one level short
    (ispi / (x + 0.5 / (x + 1 / (x + 1.5 / x))), a "4-term expansion" port): ~250 ulps at
    50, ~200 at 51 to 60."""
    return _run(x, F64, cf_short=60.0)


def y100_two_step(x: Tensor) -> Tensor:
    """Float32 and float64: y100 = 100 * (4 / (4 + |x|)) as Johnson's comment words it
    ("y100 = 100*y, where y = 4/(4+x)"), one more rounding than 400 / (4 + x): near x = 0
    the output moves by up to ~4.5 more units (worst seen: float64 9.3 ulps vs 7.5 at
    x ~ 2e-7, float32 8.0 vs 6.8 near 3e-3)."""
    return _run(x, BOTH, two_step=True)


def rdiv_reciprocal(x: Tensor) -> Tensor:
    """Float32 and float64: every scalar / tensor written as Python's ``400 / t``, which
    torch evaluates as ``t.reciprocal() * 400`` (two roundings): +~4 ulps at Johnson's
    interval ends (found while writing ``port_float32``: its first version did this)."""
    return _run(x, BOTH, rdiv=lambda a, b: a / b)


def f64_reflect_exp_f32(x: Tensor) -> Tensor:
    """Float64, x < 0: erfcx(x) = 2 exp(x^2) - erfcx(-x) with exp(x^2) in float32 (a
    float-only ``expf``): ~1e8 ulps wherever x < 0 is not tiny, and inf for
    -26.6 < x < -9.4 (float32 exp overflows)."""
    return _run(x, F64, exp_f32=True)


def no_huge_branch(x: Tensor) -> Tensor:
    """All dtypes: Johnson's ``x > 5e7: ispi / x`` branch dropped ("the fraction is
    accurate there too"): (x^2)^2 overflows, inf / inf = NaN, for x > ~4.3e9 in float32 and
    bfloat16, x > ~1.1e77 in float64, and x = +inf everywhere (true: 0; pytorch#122426 asked
    for NaN there, reading the docs' exp(x^2) erfc(x) literally)."""
    return _run(x, (*HALF, *BOTH), huge=False)


def nan_fmax_guard(x: Tensor) -> Tensor:
    """All dtypes: the overflow guard x = fmax(x, -26.7) applied first (CUDA's fmaxf returns
    the other operand for NaN): erfcx(NaN) = erfcx(-26.7) = +inf instead of NaN."""
    return _run(x, (*HALF, *BOTH), fmax_guard=True)


def product_band(x: Tensor) -> Tensor:
    """All dtypes: exp(x^2) * erfc(x) kept up to exp's overflow point, on [26, 26.64)
    (float64) / [9, 9.42) (float32 work dtype), subnormals flushed, as in jax#38607: 0 on
    ~[26.54, 26.64) / ~[9.2, 9.42) (true ~0.021 / ~0.06); x^2's rounding costs up to x^2 u
    (~700 / ~80 ulps) elsewhere in the band."""
    band = (26.0, 26.64) if x.dtype == torch.float64 else (9.0, 9.42)
    return _run(x, (*HALF, *BOTH), product=band)


FAULTS = ("half_neg_constant", "half_square_exp", "half_square_shared",
          "f32_grad_zero_past_700", "f32_grad_sign_past_700", "f64_deg5_half_to_one",
          "f32_cubic_table", "f32_quadratic_half_to_one", "f64_cf_from_35", "f64_cf_from_30",
          "f32_cf_from_4", "f64_cf_short_to_60", "y100_two_step", "rdiv_reciprocal",
          "f64_reflect_exp_f32", "no_huge_branch", "nan_fmax_guard", "product_band")
CORRECT = ("scipy_cast", "port_float32")
for _name in FAULTS + CORRECT:
    globals()[_name].conformance_name = f"blind.{_name}"
