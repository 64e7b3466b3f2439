"""Statistical tests for samplers, with a stated family-wise false-alarm rate and power.

Every statistical check of a run is one hypothesis test at the same level ``ALPHA``:
``FAMILY_ALPHA / CHECK_BUDGET`` (Bonferroni). ``CHECK_BUDGET`` bounds the number of
statistical checks a run may make; the samplers' conftest counts the checks the collected
tests declare (plus one for all exact support checks of 16-bit samples together, whose
"impossible" values carry at most ALPHA / 1000 of probability per check) and stops the run
if they exceed it, so the family-wise false-alarm rate of any run is at most
``FAMILY_ALPHA``. The level is fixed, so a reproduce command that reruns
one test applies the same level as the full run.

The tests (all pure numpy/scipy):

- ``ks_test``: Kolmogorov-Smirnov against a CDF, exact for samples rounded to a floating
  format (the CDF is evaluated at the rounding boundaries, so the null is the continuous
  distribution pushed through round-to-nearest); conservative for discrete nulls.
- ``cvm_test``: Cramér-von Mises against a continuous CDF (the limiting law's tail).
- ``chisquare_test``: chi-square over cells with pooled tails (expected count >= 100),
  its tail exact-conservative at ALPHA (``conformance.stats.tails``).
- ``mean_test``: the targeted test: the sample mean of a bounded test function ``g``
  (a score of a location, scale or probability parameter) against its exact mean and
  variance under the null; the most powerful test against small parameter errors.
- ``two_sample_test``: Kolmogorov-Smirnov (continuous) or chi-square homogeneity
  (discrete; exact-conservative tail) between two samples (the device's and the CPU's).
- ``serial_test``: lag-1 autocorrelation, and the largest autocorrelation over all lags
  (a stream that repeats a block of itself), of values mapped to [0, 1] by the null's CDF.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from conformance.harness.compare import Measurement
from conformance.stats.tails import (
    chisquare_from_z,
    cvm_sf,
    ks2_equal_sf,
    sequential_hypergeom_z,
    sequential_z,
)
from oracles.formats import (  # noqa: F401 (re-exported)
    FORMATS,
    FloatFormat,
    representable,
    round_to,
    rounding_cells,
)

# Where set (the samplers' tests: seeded from --seed and the test id, independent of the
# data), chi-square links get randomised scores: exact level instead of conservative.
RANDOMISER: ContextVar[np.random.Generator | None] = ContextVar("randomiser", default=None)


def _uniforms(k: int) -> np.ndarray | None:
    gen = RANDOMISER.get()
    return None if gen is None else gen.random(k)


FAMILY_ALPHA = 1e-6
CHECK_BUDGET = 5000
ALPHA = FAMILY_ALPHA / CHECK_BUDGET  # 2e-10 per check
MIN_EXPECTED = 100.0


@dataclass(frozen=True)
class TestResult:
    """One statistical test: reject when ``pvalue < alpha``."""

    name: str
    statistic: float
    pvalue: float
    n: int
    detail: str = ""
    alpha: float = ALPHA

    @property
    def rejected(self) -> bool:
        return bool(self.pvalue < self.alpha)

    def measurement(self) -> Measurement:
        """``-log10 p`` against ``-log10 alpha``: a margin below 1 passes."""
        measured = -math.log10(max(self.pvalue, 1e-300))
        text = (f"p = {self.pvalue:.3g} vs alpha {self.alpha:.3g} (statistic "
                f"{self.statistic:.5g}, n = {self.n}){'; ' + self.detail if self.detail else ''}")
        return Measurement(self.name, measured, -math.log10(self.alpha), text)


# ---- tests ---------------------------------------------------------------------------------

def ks_test(x: np.ndarray, cdf: Callable[[np.ndarray], np.ndarray],
            fmt: FloatFormat | None = None, name: str = "KS",
            presorted: bool = False) -> TestResult:
    """One-sample KS against ``cdf`` pushed through rounding to ``fmt``.

    The null CDF is a step function at representable values when ``fmt`` is narrower than
    float64: D is evaluated at its jumps (left limits at the lower rounding boundaries), and
    the Kolmogorov p-value (Stephens' finite-n correction) is then conservative."""
    x = np.asarray(x, dtype=np.float64) if presorted else np.sort(np.asarray(x, np.float64))
    n = x.size
    lo, hi = rounding_cells(x, fmt)
    with np.errstate(invalid="ignore"):
        f_hi, f_lo = cdf(hi), cdf(lo)
    i = np.arange(1, n + 1)
    d = max(float(np.max(i / n - f_hi)), float(np.max(f_lo - (i - 1) / n)), 0.0)
    return TestResult(name, d, ks_sf(d, n), n, "D = sup|F_n - F|")


def ks_pmf_test(x: np.ndarray, values: np.ndarray, probs: np.ndarray,
                name: str = "KS") -> TestResult:
    """KS against a law on the sorted ``values`` (a rounded law): conservative p-value."""
    idx = np.clip(np.searchsorted(values, np.asarray(x, dtype=np.float64)), 0, values.size - 1)
    return ks_counts_test(np.bincount(idx, minlength=values.size), probs, name)


def ks_counts_test(counts: np.ndarray, probs: np.ndarray, name: str = "KS") -> TestResult:
    """KS of a sample given as counts over the sorted support of a discrete (rounded) law:
    sup |F_n - F| is attained at the support's points, so it needs no sort."""
    c = np.asarray(counts, dtype=np.float64)
    n = int(c.sum())
    d = float(np.max(np.abs(np.cumsum(c) / n - np.cumsum(probs / probs.sum()))))
    return TestResult(name, d, ks_sf(d, n), n, "D = sup|F_n - F|")


EXACT_BELOW = 100 * ALPHA  # ks_sf: where the exact finite-n tail replaces Stephens'


def ks_sf(d: float, n: int) -> float:
    """P(D_n >= d) for a continuous null. Stephens' finite-n form of the limiting law is
    slightly small there (by up to ~5 % near p = 1e-40 at n = 1e5: a level of ~1.02 alpha
    at 2e-10), so wherever it is near the level the exact distribution (scipy's
    ``kstwo``, Simard and L'Ecuyer; ~2 s at n = 8e5, hence only there) decides."""
    sq = math.sqrt(n)
    p = float(sps.kstwobign.sf(d * (sq + 0.12 + 0.11 / sq)))
    return float(sps.kstwo.sf(d, n)) if p < EXACT_BELOW else p


def cvm_test(x: np.ndarray, cdf: Callable[[np.ndarray], np.ndarray],
             name: str = "Cramér-von Mises", presorted: bool = False) -> TestResult:
    """Cramér-von Mises against a continuous CDF (float32/float64 samples, n >= 1e5); the
    p-value from the limiting law's tail (``stat_tails.cvm_sf``, monotone everywhere)."""
    u = cdf(np.asarray(x, dtype=np.float64))
    u = u if presorted else np.sort(u)
    n = u.size
    w2 = float(1 / (12 * n) + np.sum((u - (2 * np.arange(1, n + 1) - 1) / (2 * n)) ** 2))
    return TestResult(name, w2, cvm_sf(w2), n, "W^2, limiting law")


def pool_cells(counts: np.ndarray, probs: np.ndarray, n: int,
               min_expected: float = MIN_EXPECTED) -> tuple[np.ndarray, np.ndarray]:
    """Merge adjacent cells, left to right, until each expects at least ``min_expected``;
    a short last group joins its neighbour."""
    out_c: list[float] = []
    out_p: list[float] = []
    acc_c = acc_p = 0.0
    for c, p in zip(counts, probs, strict=True):
        acc_c, acc_p = acc_c + c, acc_p + p
        if acc_p * n >= min_expected:
            out_c.append(acc_c)
            out_p.append(acc_p)
            acc_c = acc_p = 0.0
    if acc_c or acc_p:
        if out_c:
            out_c[-1] += acc_c
            out_p[-1] += acc_p
        else:
            out_c, out_p = [acc_c], [acc_p]
    return np.array(out_c), np.array(out_p)


def chisquare_test(counts: np.ndarray, probs: np.ndarray, name: str = "chi-square",
                   extra: int = 0) -> TestResult:
    """Chi-square of cell counts against cell probabilities (pooled to expected >= 100),
    with a null tail that holds at ALPHA: the sum of the cells' sequential exact-binomial
    normal scores against chi-square(k - 1), conservative (``stat_tails``). ``extra``
    counts observations outside every cell: a certain rejection."""
    counts = np.asarray(counts, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    n = int(counts.sum()) + extra
    if extra:
        return TestResult(name, math.inf, 0.0, n, f"{extra} values outside the support")
    # a count in a cell of (numerically) zero probability is pooled with its neighbours:
    # whether a value is possible at all is the support check's call (torch's 24-bit grid
    # gives 0.0 in bfloat16 uniform_(-1, 3) a mass of 2^-24, its rounding cell ~1e-41)
    keep = (probs > 0) | (counts > 0)
    c, p = pool_cells(counts[keep], probs[keep] / probs.sum(), n)
    if c.size < 2:
        return TestResult(name, 0.0, 1.0, n, "a single cell")
    v = _uniforms(c.size - 1)
    z = sequential_z(c, p, v)
    stat, pval = chisquare_from_z(z)
    worst = int(np.argmax(np.abs(z)))
    how = "randomised" if v is not None else "exact-binomial"
    return TestResult(name, stat, pval, n, f"{c.size} cells, sum of {how} scores "
                      f"z^2; worst cell {worst}: observed {c[worst]:.0f}, expected "
                      f"{p[worst] * n:.1f}, z = {z[worst]:.2f}")


def binned_chisquare(x: np.ndarray, cdf: Callable[[np.ndarray], np.ndarray],
                     ppf: Callable[[np.ndarray], np.ndarray], fmt: FloatFormat | None,
                     cells: int = 100, name: str = "chi-square (binned)",
                     presorted: bool = False) -> TestResult:
    """Chi-square over ~equiprobable cells whose edges are representable values: a cell
    [e_j, e_j+1) holds exactly the reals in [lo(e_j), lo(e_j+1)), lo the rounding boundary."""
    x = np.asarray(x, dtype=np.float64)
    q = ppf(np.linspace(0, 1, cells + 1)[1:-1])
    q = q[np.isfinite(q)]
    edges = np.unique(round_to(q, fmt))
    lo, _ = rounding_cells(edges, fmt)
    f = np.concatenate([[0.0], cdf(lo), [1.0]])
    probs = np.diff(f)
    if presorted:  # cell j: the x with j edges <= x
        counts = np.diff(np.concatenate([[0], np.searchsorted(x, edges), [x.size]]))
    else:
        counts = np.bincount(np.searchsorted(edges, x, side="right"),
                             minlength=edges.size + 1)
    return chisquare_test(counts, probs, name)


def mean_test(g_values: np.ndarray, mean: float, var: float, name: str) -> TestResult:
    """Two-sided z test of the sample mean of g(X) against its null mean and variance.

    The one-term Edgeworth corrections of the two tails cancel in a two-sided test, so the
    false-alarm rate is exact to O(1/n) for a g with finite moments."""
    g = np.asarray(g_values, dtype=np.float64)
    n = g.size
    if not np.all(np.isfinite(g)):
        return TestResult(name, math.inf, 0.0, n, "non-finite test-function values")
    z = (float(g.mean()) - mean) / math.sqrt(var / n)
    p = float(2 * sps.norm.sf(abs(z)))
    return TestResult(name, z, p, n, f"mean {g.mean():.6g}, expected {mean:.6g}")


def mean_test_counts(g_points: np.ndarray, counts: np.ndarray, mean: float, var: float,
                     name: str) -> TestResult:
    """``mean_test`` of a sample given as counts over points (g evaluated at the points)."""
    c = np.asarray(counts, dtype=np.float64)
    seen = c > 0
    g = np.asarray(g_points, dtype=np.float64)[seen]
    n = int(c.sum())
    if not np.all(np.isfinite(g)):
        return TestResult(name, math.inf, 0.0, n, "non-finite test-function values")
    m = float(np.dot(c[seen], g) / n)
    z = (m - mean) / math.sqrt(var / n)
    return TestResult(name, z, float(2 * sps.norm.sf(abs(z))), n,
                      f"mean {m:.6g}, expected {mean:.6g}")


def two_sample_test(a: np.ndarray, b: np.ndarray, discrete: bool,
                    name: str = "two-sample") -> TestResult:
    """Samples ``a`` and ``b`` from one distribution? KS (continuous), or chi-square
    homogeneity over the pooled values (discrete or low precision; cells of >= 400). KS's
    p-value near the level is the exact tail for equal sizes (``ks2_equal_sf``), as the
    suite draws them; scipy's asymptotic one otherwise."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if not discrete:
        r = sps.ks_2samp(a, b, method="asymp")
        d, p = float(r.statistic), float(r.pvalue)
        if a.size == b.size and p < EXACT_BELOW:
            p = ks2_equal_sf(d, a.size)
        return TestResult(name + " KS", d, p, a.size + b.size)
    values = np.unique(np.concatenate([a, b]))
    ca = np.bincount(np.searchsorted(values, a), minlength=values.size).astype(float)
    cb = np.bincount(np.searchsorted(values, b), minlength=values.size).astype(float)
    total = ca + cb
    width = 4 * MIN_EXPECTED  # cells of >= 400 draws of the two samples together
    groups = np.cumsum(np.concatenate([[0], np.diff(np.floor(np.cumsum(total) / width))]) > 0)
    ga, gb = np.bincount(groups, weights=ca), np.bincount(groups, weights=cb)
    keep = ga + gb > 0
    if int(keep.sum()) < 2:
        return TestResult(name + " chi-square", 0.0, 1.0, a.size + b.size, "a single cell")
    stat, pval = chisquare_from_z(sequential_hypergeom_z(ga[keep], gb[keep],
                                                         _uniforms(int(keep.sum()) - 1)))
    return TestResult(name + " chi-square", stat, pval, a.size + b.size,
                      f"{int(keep.sum())} cells, sum of exact-hypergeometric scores z^2")


def serial_test(u: np.ndarray, name: str = "lag-1 autocorrelation") -> TestResult:
    """Lag-1 autocorrelation of ``u`` (finite values, e.g. the null CDF of the samples):
    sqrt(n) r_1 is N(0, 1) for independent draws."""
    u = np.asarray(u, dtype=np.float64)
    d = u - u.mean()
    denom = float(np.dot(d, d))
    n = u.size
    r = float(np.dot(d[:-1], d[1:]) / denom) if denom > 0 else 0.0
    z = r * math.sqrt(n)
    return TestResult(name, r, float(2 * sps.norm.sf(abs(z))), n, f"r_1 = {r:.4g}")


def repeat_test(u: np.ndarray, name: str = "no repeated blocks (all lags)") -> TestResult:
    """The largest autocorrelation over lags 1..n/2 (by FFT), Bonferroni over the lags: a
    stream that repeats a block of B values at some lag shows r ~ B/n there."""
    u = np.asarray(u, dtype=np.float64)
    n = u.size
    d = u - u.mean()
    size = 1 << (2 * n - 1).bit_length()
    f = np.fft.rfft(d, size)
    acf = np.fft.irfft(f * np.conj(f), size)[: n // 2 + 1]
    if acf[0] <= 0:
        return TestResult(name, 0.0, 1.0, n, "constant sample")
    lags = np.arange(1, n // 2 + 1)
    z = acf[1:] / acf[0] * np.sqrt(n - lags) * (n / (n - lags))
    k = int(np.argmax(np.abs(z)))
    p = float(min(1.0, 2 * sps.norm.sf(abs(z[k])) * lags.size))
    return TestResult(name, float(z[k]), p, n, f"worst lag {k + 1}: r = {acf[k + 1] / acf[0]:.4g}")


# ---- power -----------------------------------------------------------------------------------

def required_n(shift: float, sd: float, alpha: float = ALPHA, power: float = 0.99) -> int:
    """Sample size at which ``mean_test`` detects a mean shift of g(X) with the given power."""
    z = sps.norm.isf(alpha / 2) + sps.norm.isf(1 - power)
    if abs(shift) < 1e-12 * sd:
        return 2**62
    return math.ceil((z * sd / abs(shift)) ** 2)


def power_of(shift: float, sd: float, n: int, alpha: float = ALPHA) -> float:
    """Power of ``mean_test`` against a mean shift of g(X) (normal approximation)."""
    z = sps.norm.isf(alpha / 2)
    m = abs(shift) * math.sqrt(n) / sd
    return float(sps.norm.sf(z - m) + sps.norm.cdf(-z - m))
