"""Directed checks of an FA4-class algorithm model (feature "fa4_algorithm": the object has
``config``, ``trace`` and ``exp2``; impls/attention/fa4/model.py) against the algorithm's
statement (impls/attention/fa4/spec.py), with predictions computed here in float64.

- the software exp2 is within the spec polynomial's own error bound of exp2,
- P is rounded to the input dtype before the P V product (a two-key case whose output
  tells a rounded P from an unrounded one),
- the conditional rescaling: O is rescaled exactly when the running max grew by more than
  8 log2 units, so that every P fed to P V is at most 2**8,
- the backward's dS is computed from the P its kernel declares (spec.BWD: the fp32 P on
  sm90, the rounded P on sm100; a case whose dK tells them apart),
- and the result stays within the FlashAttention rule when scores keep growing along the
  row (test_regressions.py::test_growing_scores runs that for every implementation).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from conformance.harness.compare import Measurement
from conformance.harness.outcomes import unsupported
from impls.attention.fa4 import spec

pytestmark = [pytest.mark.area("attention"), pytest.mark.needs("fa4_algorithm")]


@pytest.fixture(autouse=True)
def _declares_the_model_interface(impl):
    """Only objects that name "fa4_algorithm" explicitly have config/trace/exp2 (an
    implementation without a feature list claims every feature, not this interface)."""
    if impl.caps.features is None or "fa4_algorithm" not in impl.caps.features:
        unsupported(f"implementation {impl.name} is not an FA4 algorithm model "
                    "(does not declare 'fa4_algorithm')")

ULP32 = 2.0**-24


def spec_poly_error() -> float:
    """Max relative error of the spec's cubic (fp32 coefficients, float64 evaluation) on a
    dense grid of [0, 1): the bound a faithful software exp2 meets up to fp32 rounding."""
    c = np.asarray(spec.EXP2_POLY, np.float32).astype(np.float64)
    f = np.linspace(0.0, 1.0, 1 << 18, endpoint=False)
    p = c[0] + f * (c[1] + f * (c[2] + f * c[3]))
    return float(np.max(np.abs(p / np.exp2(f) - 1.0)))


def test_software_exp2(impl, dtype, record):
    """exp2 over [-126, 8] (the range P takes) within the spec polynomial's error plus four
    fp32 roundings (three FMAs, the exponent add is exact); 2**k exact at integers."""
    y = np.concatenate([np.linspace(-126.0, 8.0, 200_001),
                        np.random.default_rng(3).uniform(-30.0, 8.0, 100_000)])
    y = y.astype(np.float32)
    got = impl.fn.exp2(torch.from_numpy(y)).double().numpy()
    want = np.exp2(y.astype(np.float64))
    rel = np.abs(got / want - 1.0)
    worst = int(np.argmax(rel))
    record.case(points=int(y.size), range="[-126, 8]", software=impl.fn.config.emu_from
                is not None)
    record.require(Measurement(
        "software exp2 within the spec polynomial's error", float(rel[worst]),
        spec_poly_error() + 4 * ULP32, f"worst at y = {float(y[worst])!r}: got "
        f"{float(got[worst])!r}, exp2 = {float(want[worst])!r}"))
    ints = np.arange(-126, 9, dtype=np.float32)
    got_i = impl.fn.exp2(torch.from_numpy(ints)).double().numpy()
    bad = int(np.count_nonzero(got_i != np.exp2(ints.astype(np.float64))))
    record.require(Measurement("exp2 exact at integers", bad, 0, f"{bad} of {ints.size} "
                               "integers give a value other than 2**k", exact=True))


def _two_keys(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """q . k = (0, a) with a < 0 chosen so that P2 = 2**(a log2 e) lies a third of the way
    between two representable values below 1: rounding moves it by a whole ulp."""
    bits = {torch.float16: 11, torch.bfloat16: 8}[dtype]  # ulp just below 1 is 2**-bits
    target = 1.0 - 3.0 * 2.0 ** -(bits + 2)
    a = torch.tensor(math.log(target), dtype=dtype)
    q = torch.zeros(1, 1, 1, 64, dtype=dtype)
    q[..., 0] = 1.0
    k = torch.zeros(1, 1, 2, 64, dtype=dtype)
    k[0, 0, 1, 0] = a
    v = torch.ones(1, 1, 2, 64, dtype=dtype)
    v[0, 0, 1] = -1.0
    return q, k, v


def test_p_rounded_before_pv(impl, dtype, record):
    """Two keys with V = +1 and -1: out = (1 - P2) / (1 + P2) with P2 rounded to the input
    dtype in the numerator only (the row sum adds fp32 P), per spec forward step 6."""
    q, k, v = _two_keys(dtype)
    out = impl.fn(q, k, v, scale=1.0)
    c = np.float64(np.float32(spec.LOG2E))  # scale 1: c = log2(e) as the kernel gets it
    y = np.float32(np.float64(k[0, 0, 1, 0].float()) * c)
    p2 = float(np.exp2(np.float64(y)))
    p2_r = float(torch.tensor(p2).to(dtype).double())
    rounded, unrounded = (1.0 - p2_r) / (1.0 + p2), (1.0 - p2) / (1.0 + p2)
    gap = abs(rounded - unrounded)
    got = float(out[0, 0, 0, 0].double())
    record.case(dtype=str(dtype), p2=p2, p2_rounded=p2_r)
    assert gap > 16 * torch.finfo(dtype).eps * abs(rounded), "the case does not discriminate"
    record.require(Measurement(
        "P rounded to the input dtype before P V", abs(got - rounded), gap / 4,
        f"got {got!r}; with P rounded {rounded!r}, without {unrounded!r}"))


def _round_to(x: float, dtype: torch.dtype) -> tuple[float, float]:
    """(x rounded to dtype, distance of x from the nearest rounding tie in units of the
    dtype's ulp at x: 0.5 is as far from a tie as a value gets)."""
    r = float(torch.tensor(x, dtype=torch.float64).to(dtype).double())
    ulp = torch.finfo(dtype).eps * 2.0 ** (math.frexp(abs(x))[1] - 1)  # at x in [2^e-1, 2^e)
    frac = (x - r) / ulp
    return r, 0.5 - abs(frac)


def _ds_predictions(a: float, out0: float, lse: float, dtype: torch.dtype
                    ) -> tuple[float, float, float] | None:
    """dK of the second key in the ds case (below) from the spec's backward, in float64 with
    the kernels' fp32 roundings: (from the rounded P, from the fp32 P, the smallest distance
    of a rounding from a tie), or None where no step's rounding is safely away from a tie."""
    c = float(np.float32(spec.LOG2E))  # scale 1, no score_mod: c = fp32(log2 e)
    l2 = float(np.float32(np.float32(lse) * np.float32(spec.LOG2E)))
    p = float(np.float32(np.exp2(np.float64(np.float32(a * c - l2)))))  # fma, ex2
    p_r, safe_p = _round_to(p, dtype)
    delta = float(np.float32(out0))  # dO = e0: Delta = 1 * out[0]
    factor = float(np.float32(1.0 - delta))  # dP - Delta with dP = dO . v_2 = 1
    ds_r, safe_r = _round_to(float(np.float32(p_r * factor)), dtype)
    ds, safe_u = _round_to(float(np.float32(p * factor)), dtype)
    return ds_r, ds, min(safe_p, safe_r, safe_u)


def test_ds_from_declared_p(impl, dtype, record):
    """One query, keys (0, a) on coordinate 0, V = (0, e0), dO = e0, scale 1: dK[1, 0] =
    dS_2 = P_2 (1 - out_0), rounded. The spec's backward (spec.BWD) fixes whether the kernel
    multiplies the fp32 P or the rounded P_r; the case is the first a (over a fixed list)
    where the two give different dK and every rounding is away from a tie."""
    rounded_p = spec.BWD[impl.fn.arch]["ds_from_rounded_p"]
    for a in np.linspace(-0.05, -3.0, 400):
        q = torch.zeros(1, 1, 1, 64, dtype=dtype)
        q[..., 0] = 1.0
        k = torch.zeros(1, 1, 2, 64, dtype=dtype)
        k[0, 0, 1, 0] = float(a)
        v = torch.zeros(1, 1, 2, 64, dtype=dtype)
        v[0, 0, 1, 0] = 1.0
        with torch.no_grad():
            out, lse = impl.fn(q, k, v, scale=1.0, return_lse=True)
        a_d = float(k[0, 0, 1, 0].double())
        ds_r, ds, safe = _ds_predictions(a_d, float(out[0, 0, 0, 0]), float(lse[0, 0, 0]),
                                         dtype)
        if ds_r != ds and safe > 1.0 / 16:
            break
    else:
        pytest.fail("no case in the list tells dS from P and from P_r apart")
    k.requires_grad_(True)
    d_out = torch.zeros_like(q)
    d_out[..., 0] = 1.0
    got_out = impl.fn(q, k, v, scale=1.0)
    (dk,) = torch.autograd.grad(got_out, k, d_out)
    got = float(dk[0, 0, 1, 0].double())
    want, other = (ds_r, ds) if rounded_p else (ds, ds_r)
    record.case(dtype=str(dtype), a=a_d, arch=impl.fn.arch, ds_from_rounded_p=rounded_p,
                tie_distance=safe)
    record.require(Measurement(
        f"dS from the {'rounded' if rounded_p else 'fp32'} P (spec.BWD[{impl.fn.arch!r}])",
        abs(got - want), abs(want - other) / 4,
        f"dK = {got!r}; from the rounded P {ds_r!r}, from the fp32 P {ds!r}"))


def _staircase(dtype: torch.dtype, growth: float, tiles: int) -> tuple[torch.Tensor, ...]:
    """One row whose kv tiles (in visiting order, last to first) have maxima growing by
    ``growth`` log2 units; scale 1, so a score s is s * log2(e) log2 units."""
    n = spec.BLOCK_N
    q = torch.zeros(1, 1, 1, 64, dtype=dtype)
    q[..., 0] = 1.0
    k = torch.zeros(1, 1, n * tiles, 64, dtype=dtype)
    rng = np.random.default_rng(int(growth * 100) + tiles)
    for t in range(tiles):  # visiting index t is tile (tiles - 1 - t)
        lo = (tiles - 1 - t) * n
        scores = growth * t * spec.LN2 - rng.uniform(0.0, 2.0, n)
        scores[rng.integers(n)] = growth * t * spec.LN2  # the tile's max
        k[0, 0, lo:lo + n, 0] = torch.from_numpy(scores)
    v = torch.from_numpy(rng.standard_normal((1, 1, n * tiles, 64))).to(dtype)
    return q, k, v


def expected_rescales(tile_max: list[float], c: float) -> tuple[int, float]:
    """The spec's step 4 on float64 tile maxima: (rescales after the first tile, the largest
    exponent P reaches, in log2 units)."""
    m, count, top = -math.inf, 0, 0.0
    for t in tile_max:
        if m == -math.inf:
            m = t
        elif (max(m, t) - m) * c > spec.RESCALE_THRESHOLD:
            m, count = t, count + 1
        top = max(top, (t - m) * c)
    return count, top


@pytest.mark.parametrize("growth", [3.0, 7.5, 9.0, 10.0, 12.0], ids=lambda g: f"g{g:g}")
def test_rescale_threshold(impl, dtype, record, growth):
    """Rescaling happens exactly when the max grew by more than 8 log2 units, and every P
    fed to P V is at most 2**8 (so P fits the MMA's input type, down to fp8 e4m3)."""
    tiles = 5
    q, k, v = _staircase(dtype, growth, tiles)
    _, _, trace = impl.fn.trace(q, k, v, scale=1.0)
    s = k[0, 0, :, 0].double().numpy().reshape(tiles, spec.BLOCK_N)  # q . k exactly
    maxima = [float(s[tiles - 1 - t].max()) for t in range(tiles)]
    want, top = expected_rescales(maxima, spec.LOG2E)
    got = int(trace.rescales.max())
    record.case(growth_log2=growth, tiles=tiles, expected_rescales=want)
    record.require(Measurement("O rescaled exactly when the max grew by > 8 log2 units",
                               abs(got - want), 0, f"{got} rescales, the spec makes {want}",
                               exact=True))
    max_p = float(trace.max_p.max())
    record.require(Measurement(
        "P fed to P V at most 2**threshold", max_p, 2.0**spec.RESCALE_THRESHOLD * (1 + 1e-6),
        f"largest P {max_p!r} (log2 {math.log2(max_p):.3f}); the spec's largest exponent "
        f"here is {top:.3f}"))
