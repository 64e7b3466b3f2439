"""Sampler oracles: scipy.stats distributions with the parameterisation of each torch method.

torch method -> distribution (scipy):

- ``normal_(mean, std)``: N(mean, std^2) -> ``norm(loc=mean, scale=std)``
- ``log_normal_(mean, std)``: exp(N(mean, std^2)); mean and std are those of the underlying
  normal -> ``lognorm(s=std, scale=exp(mean))``
- ``cauchy_(median, sigma)``: density 1 / (pi sigma (1 + ((x - median) / sigma)^2))
  -> ``cauchy(loc=median, scale=sigma)``
- ``exponential_(lambd)``: rate lambd, density lambd exp(-lambd x) -> ``expon(scale=1/lambd)``
- ``uniform_(from, to)``: U[from, to) -> ``uniform(loc=from, scale=to - from)``; a value
  that rounds to ``to`` is stored as ``from`` (torch's "reverse bound")
- ``geometric_(p)``: trials up to the first success, support 1, 2, ... -> ``geom(p)``
- ``bernoulli_(p)``: 1 with probability p -> ``bernoulli(p)``
- ``random_(from, to)``: integers from .. to - 1, uniform -> ``randint(from, to)``

Each oracle also gives the targeted test functions g (bounded scores of its location,
scale or probability parameter), their exact mean and variance under the null (continuous,
or the distribution pushed through rounding to a 16-bit float format), and the
distribution pushed through that rounding (with overflow to ±inf). Torch-free.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy import stats as sps

from oracles.formats import FloatFormat, representable, round_to, rounding_cells

CLIP = 8.0  # standardised scores are clipped at ±CLIP sigma (keeps them bounded)
G = Callable[[np.ndarray], np.ndarray]


def _clip(z: np.ndarray) -> np.ndarray:
    return np.clip(np.nan_to_num(z, nan=0.0, posinf=CLIP, neginf=-CLIP), -CLIP, CLIP)


def _cauchy_loc(z: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.where(np.abs(z) > 1e100, 2.0 / z, 2.0 * z / (1.0 + z * z))


def _cauchy_scale(z: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1.0 - 2.0 / (1.0 + z * z)


@dataclass(frozen=True)
class Oracle:
    """One torch sampler call ``t.<method>(*params)`` as a distribution."""

    method: str
    params: tuple[float, ...]
    dist: Any  # a frozen scipy.stats distribution
    discrete: bool
    tests: dict[str, G] = field(default_factory=dict)
    fold: tuple[float, float] | None = None  # (to, from): rounding to `to` is stored as `from`
    strict_lower: bool = False  # support excludes its lower end (log_normal, exponential)
    # continuous moments are integrated over ``under`` mapped through ``to_x`` (log_normal:
    # the underlying normal and exp), which quad handles faster and more accurately
    under: Any = None
    to_x: Callable[[np.ndarray], np.ndarray] | None = None

    def cdf(self, x: np.ndarray) -> np.ndarray:
        return self.dist.cdf(np.asarray(x, dtype=np.float64))

    def ppf(self, q: np.ndarray) -> np.ndarray:
        return self.dist.ppf(q)

    def u(self, x: np.ndarray) -> np.ndarray:
        """The samples mapped to [0, 1] by the CDF (for serial tests)."""
        return np.nan_to_num(self.cdf(x), nan=0.5)

    def support_values(self) -> np.ndarray:
        """Discrete oracles: the support up to probability 1 - 1e-15 of its tail."""
        lo = self.dist.support()[0]
        hi = self.dist.ppf(1 - 1e-15)
        return np.arange(max(lo, self.dist.ppf(1e-15) - 1), hi + 1, dtype=np.float64)

    def rounded_pmf(self, fmt: FloatFormat) -> tuple[np.ndarray, np.ndarray]:
        """Continuous oracle pushed through round-to-nearest into a 16-bit ``fmt``: every
        value (±inf included) and its probability."""
        values = representable(fmt)
        lo, hi = rounding_cells(values, fmt)
        probs = self.cell_probs(lo, hi)
        if self.fold is not None:
            to, frm = (float(np.asarray(v, dtype=np.float64)) for v in self.fold)
            i_to = np.searchsorted(values, float(round_to(to, fmt)))
            i_from = np.searchsorted(values, float(round_to(frm, fmt)))
            if i_to < values.size and values[i_to] == float(round_to(to, fmt)):
                probs[i_from] += probs[i_to]
                probs[i_to] = 0.0
        return values, probs

    def cell_probs(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """P(lo <= X < hi), accurate in both tails."""
        med = self.dist.median()
        with np.errstate(invalid="ignore"):
            upper = self.dist.sf(lo) - self.dist.sf(hi)
            lower = self.dist.cdf(hi) - self.dist.cdf(lo)
        return np.clip(np.where(lo >= med, upper, lower), 0.0, 1.0)

    def moments(self, g: G, fmt: FloatFormat | None) -> tuple[float, float]:
        """Mean and variance of g(X) under the null (X rounded to a 16-bit ``fmt``)."""
        if self.discrete:
            k = self.support_values()
            p = self.dist.pmf(k)
            gv = g(k)
        elif fmt is not None and fmt.name in ("float16", "bfloat16"):
            k, p = self.rounded_pmf(fmt)
            gv = g(k)
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                dist = self.under if self.under is not None else self.dist
                to_x = self.to_x or (lambda y: y)

                def h(y: Any) -> np.ndarray:
                    return g(to_x(np.asarray(y, dtype=np.float64)))

                m1 = float(dist.expect(h, epsabs=1e-13, epsrel=1e-12, limit=400))
                m2 = float(dist.expect(lambda y: h(y) ** 2, epsabs=1e-13, epsrel=1e-12,
                                       limit=400))
            return m1, max(m2 - m1 * m1, 1e-300)
        keep = p > 0
        p, gv = p[keep] / p.sum(), gv[keep]
        m1 = float(np.dot(p, gv))
        return m1, max(float(np.dot(p, (gv - m1) ** 2)), 1e-300)


def _loc_scale_tests(loc: float, scale: float) -> dict[str, G]:
    return {"location score": lambda x: _clip((np.asarray(x) - loc) / scale),
            "scale score": lambda x: _clip((np.asarray(x) - loc) / scale) ** 2}


def oracle(method: str, params: tuple[float, ...]) -> Oracle:
    """The oracle of ``t.<method>(*params)`` (method name with or without the trailing _)."""
    m = method.rstrip("_")
    if m == "normal":
        mean, std = params
        return Oracle(m, params, sps.norm(mean, std), False, _loc_scale_tests(mean, std))
    if m == "log_normal":
        mean, std = params

        def z(x: np.ndarray) -> np.ndarray:
            with np.errstate(divide="ignore", invalid="ignore"):
                return (np.log(np.asarray(x, dtype=np.float64)) - mean) / std

        tests = {"location score": lambda x: _clip(z(x)),
                 "scale score": lambda x: _clip(z(x)) ** 2}
        return Oracle(m, params, sps.lognorm(s=std, scale=np.exp(mean)), False, tests,
                      strict_lower=True, under=sps.norm(mean, std), to_x=np.exp)
    if m == "cauchy":
        median, sigma = params
        tests = {"location score": lambda x: _cauchy_loc((np.asarray(x) - median) / sigma),
                 "scale score": lambda x: _cauchy_scale((np.asarray(x) - median) / sigma)}
        return Oracle(m, params, sps.cauchy(median, sigma), False, tests)
    if m == "exponential":
        (lambd,) = params
        tests = {"rate score": lambda x: np.clip(np.nan_to_num(lambd * np.asarray(x),
                                                               posinf=40.0), 0, 40.0)}
        return Oracle(m, params, sps.expon(scale=1.0 / lambd), False, tests, strict_lower=True)
    if m == "uniform":
        a, b = params
        w = b - a
        tests = {"location (mean)": lambda x: (np.asarray(x) - a) / w,
                 "scale (variance)": lambda x: ((np.asarray(x) - a) / w - 0.5) ** 2}
        return Oracle(m, params, sps.uniform(a, w), False, tests, fold=(b, a))
    if m == "geometric":
        (p,) = params
        cap = float(sps.geom(p).ppf(1 - 1e-12))
        tests = {"p score (mean)": lambda x: np.minimum(np.asarray(x, dtype=np.float64), cap)}
        return Oracle(m, params, sps.geom(p), True, tests)
    if m == "bernoulli":
        (p,) = params
        return Oracle(m, params, sps.bernoulli(p), True,
                      {"p score (mean)": lambda x: np.asarray(x, dtype=np.float64)})
    if m == "random":
        lo, hi = params
        w = hi - lo
        tests = {"location (mean)": lambda x: (np.asarray(x, dtype=np.float64) - lo) / w,
                 "scale (variance)": lambda x: ((np.asarray(x, dtype=np.float64) - lo) / w
                                                - 0.5) ** 2}
        return Oracle(m, params, sps.randint(lo, hi), True, tests)
    raise ValueError(f"no oracle for method {method!r}")


def perturbed(method: str, params: tuple[float, ...], which: str,
              eps: float = 0.01) -> tuple[float, ...]:
    """The parameters with a relative error ``eps``: ``which`` is "location" (shifted by
    eps times the scale), "scale" (times 1 + eps) or "p" (times 1 + eps)."""
    m = method.rstrip("_")
    if m in ("normal", "log_normal", "cauchy"):
        loc, scale = params
        return (loc + eps * scale, scale) if which == "location" else (loc, scale * (1 + eps))
    if m == "exponential":
        return (params[0] * (1 + eps),)
    if m in ("uniform", "random"):
        a, b = params
        w = b - a
        if m == "random":  # integer bounds: at least one step
            w = max(1.0, round(eps * w)) / eps
        if which == "location":
            return (a + eps * w, b + eps * w)
        return (a, a + w * (1 + eps))
    if m in ("geometric", "bernoulli"):
        return (params[0] * (1 + eps),)
    raise ValueError(method)


def detectable(method: str, params: tuple[float, ...], fmt: FloatFormat | None,
               eps: float = 0.01) -> list[tuple[str, str, float, float]]:
    """For each kind of parameter error and each targeted test: (error kind, test name,
    mean shift of g under the error, null sd of g)."""
    m = method.rstrip("_")
    kinds = {"exponential": ["rate"], "geometric": ["p"], "bernoulli": ["p"]}.get(
        m, ["location", "scale"])
    base = oracle(method, params)
    out = []
    for kind in kinds:
        alt = oracle(method, perturbed(method, params, kind, eps))
        alt = dataclasses.replace(alt, tests=base.tests)
        for name, g in base.tests.items():
            m0, v0 = base.moments(g, fmt)
            m1, _ = alt.moments(g, fmt)
            out.append((kind, name, m1 - m0, float(np.sqrt(v0))))
    return out
