"""Sampler checks: draw through the implementation, then exact and statistical checks.

Every statistical check goes through ``Family.require``, which counts it against what the
test declared with ``stat_checks`` (the conftest adds the declarations of every collected
test to bound the run's family of tests; see ``conformance.stats.gof``).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import torch

from conformance.areas.samplers.data import STREAM_N, SamplerSpec
from conformance.areas.samplers.support import (  # noqa: F401  (impossible_values: tests)
    bits16,
    impossible_values,
    pattern_index,
    require_support,
)
from conformance.areas.samplers.support import rounded_law as _rounded
from conformance.harness.compare import exact
from conformance.harness.record import Record
from conformance.harness.tensors import dtype_name, exact_numpy
from conformance.stats.gof import (
    FORMATS,
    FloatFormat,
    TestResult,
    binned_chisquare,
    chisquare_test,
    cvm_test,
    ks_counts_test,
    ks_test,
    mean_test,
    mean_test_counts,
    representable,
)
from oracles.samplers import Oracle, oracle

F = TypeVar("F", bound=Callable[..., Any])


def stat_checks(count: int) -> Callable[[F], F]:
    """Declare the most statistical checks one run of the test makes."""
    def mark(fn: F) -> F:
        fn.stat_checks = count  # type: ignore[attr-defined]
        return fn
    return mark


class Family:
    """The statistical checks of one test, each at level ALPHA, at most ``declared``."""

    def __init__(self, record: Record, declared: int) -> None:
        self.record = record
        self.declared = declared
        self.used = 0
        self.results: list[TestResult] = []

    def require(self, result: TestResult) -> TestResult:
        __tracebackhide__ = True
        self.used += 1
        if self.used > self.declared:
            raise RuntimeError(f"test made more statistical checks than the {self.declared} "
                               "it declares (the run's false-alarm budget counts declarations)")
        self.results.append(result)
        self.record.require(result.measurement())
        return result


def fmt_of(dtype: torch.dtype) -> FloatFormat | None:
    return FORMATS.get(dtype_name(dtype)) if dtype.is_floating_point else None


def prefilled(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device,
              method: str | None, params: tuple[Any, ...]) -> torch.Tensor:
    """A tensor holding a value the law cannot produce (NaN, or an integer outside the
    support), so that an element the sampler leaves unwritten fails the support check."""
    if dtype.is_floating_point:
        return torch.full(shape, float("nan"), dtype=dtype, device=device)
    if method is not None and not any(isinstance(p, torch.Tensor) for p in params):
        fill = _outside_support(method, tuple(float(p) for p in params), dtype)
        if fill is not None:
            return torch.full(shape, fill, dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


@functools.lru_cache(maxsize=256)
def _outside_support(method: str, params: tuple[float, ...], dtype: torch.dtype
                     ) -> int | None:
    lo, hi = oracle(method, params).dist.support()
    info = torch.iinfo(dtype)
    for v in (lo - 1, hi + 1):
        if math.isfinite(v) and info.min <= v <= info.max:
            return int(v)
    return None


def draw(impl: Any, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device,
         params: tuple[Any, ...], seed: int, record: Record, method: str | None = None
         ) -> torch.Tensor:
    """Fill a tensor (prefilled with an impossible value when ``method`` is given) through
    ``impl`` with a generator seeded ``seed``; require that it was filled in place and
    returned."""
    __tracebackhide__ = True
    t = prefilled(shape, dtype, device, method, params)
    gen = torch.Generator(device=device).manual_seed(seed)
    out = impl(t, *params, generator=gen)
    require_in_place(record, t, out)
    if method is not None:  # every element drawn, counted on the device
        require_support(record, law_of(method, params), t, None)
    return t


def law_of(method: str, params: tuple[Any, ...]) -> Oracle:
    """The oracle of a call's (scalar) parameters."""
    return oracle(method, tuple(float(p) for p in params))


def require_in_place(record: Record, t: torch.Tensor, out: Any) -> None:
    __tracebackhide__ = True
    problems = []
    if not isinstance(out, torch.Tensor):
        problems.append(f"returned {type(out).__name__}, not the tensor")
    elif (out.data_ptr(), out.shape, out.stride(), out.dtype) != (
            t.data_ptr(), t.shape, t.stride(), t.dtype):
        problems.append("returned a different tensor than the one it was asked to fill")
    record.require(exact("fills the tensor in place and returns it", len(problems), 1,
                         "; ".join(problems)))


def device_bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bit patterns of ``t`` on its device (floats as same-width integers), 1-D."""
    view = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32,
            torch.float64: torch.int64}.get(t.dtype)
    flat = t.reshape(-1)
    return flat.view(view) if view is not None else flat


def bits_of(t: torch.Tensor) -> np.ndarray:
    """The raw bit patterns of ``t`` (floats as same-width integers), flattened, on the host."""
    return device_bits(t).cpu().numpy()


def to_numpy(t: torch.Tensor) -> np.ndarray:
    return exact_numpy(t).astype(np.float64).reshape(-1)


@functools.lru_cache(maxsize=256)
def null_moments(method: str, params: tuple[float, ...], fmt_name: str | None,
                 test: str) -> tuple[float, float]:
    o = oracle(method, params)
    fmt = FORMATS.get(fmt_name) if fmt_name in ("float16", "bfloat16") else None
    return o.moments(o.tests[test], fmt)


def discrete_chisquare(o: Oracle, x: np.ndarray, name: str) -> TestResult:
    """Chi-square over the support (pooled tails); a long support (more than 4096 values)
    in ~200 cells of consecutive integers cut at the law's quantiles."""
    lo = o.dist.support()[0]
    top = o.dist.ppf(1 - 1e-15)
    if top - max(lo, o.dist.ppf(1e-15)) <= 4096:
        k = o.support_values()
    else:
        k = np.unique(np.concatenate([[max(lo, o.dist.ppf(1e-15))],
                                      o.dist.ppf(np.linspace(0, 1, 201)[1:-1])]))
    # cell j holds the integers k[j] .. k[j+1] - 1; the last also everything above
    idx = np.clip(np.searchsorted(k, x, side="right") - 1, 0, k.size - 1)
    counts = np.bincount(idx, minlength=k.size)
    upper = np.concatenate([o.dist.cdf(k[1:] - 1), [1.0]])
    lower = np.concatenate([[0.0], upper[:-1]])
    return chisquare_test(counts, upper - lower, name)


def rounded_counts(x: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Counts of a 16-bit sample over every value of its format, from the bit patterns (no
    search); NaN is left out (the support check fails it)."""
    index = pattern_index(fmt.name)
    raw = np.bincount(bits16(x, fmt), minlength=2**16)
    ok = index >= 0
    return np.bincount(index[ok], weights=raw[ok], minlength=representable(fmt).size)


def ks_rounded(o: Oracle, x: np.ndarray, fmt: FloatFormat, name: str,
               counts: np.ndarray | None = None) -> TestResult:
    """KS against the law rounded to a 16-bit format (torch's folding of ``to`` included),
    from the counts over its values (no sort)."""
    _, probs, _ = _rounded(o.method, o.params, fmt.name)
    return ks_counts_test(rounded_counts(x, fmt) if counts is None else counts, probs,
                          name)


def goodness_of_fit(fam: Family, o: Oracle, x: np.ndarray, fmt: FloatFormat | None,
                    targeted: bool = True, support: bool = True) -> None:
    """Support, then: discrete: chi-square; 16-bit floats: chi-square over every
    representable value and KS, both against the rounded law; float32/float64: KS,
    Cramér-von Mises and binned chi-square; then the targeted tests (``targeted``).
    ``support=False``: ``draw`` checked the support of these samples already."""
    __tracebackhide__ = True
    if support:
        require_support(fam.record, o, x, fmt)
    label = f"{o.method}_{o.params}"
    low = fmt is not None and fmt.name in ("float16", "bfloat16")
    if o.discrete:
        fam.require(discrete_chisquare(o, x, f"chi-square, pooled tails ({label})"))
    elif low:
        values, probs, _ = _rounded(o.method, o.params, fmt.name)
        counts = rounded_counts(x, fmt)
        fam.require(chisquare_test(counts, probs, f"chi-square vs the law rounded to "
                                                  f"{fmt.name} ({label})"))
        fam.require(ks_rounded(o, x, fmt, f"KS vs the law rounded to {fmt.name} ({label})",
                               counts))
    else:
        xs = np.sort(x)  # once, for the three
        fam.require(ks_test(xs, o.cdf, fmt, f"KS ({label})", presorted=True))
        fam.require(cvm_test(xs, o.cdf, f"Cramér-von Mises ({label})", presorted=True))
        fam.require(binned_chisquare(xs, o.cdf, o.ppf, fmt, 100, f"chi-square, 100 cells "
                                                                 f"({label})", True))
    if targeted:
        for test, g in o.tests.items():
            mean, var = null_moments(o.method, o.params, fmt.name if low else None, test)
            if low and not o.discrete:  # from the counts: g at 65536 points, not at n
                with np.errstate(all="ignore"):
                    fam.require(mean_test_counts(g(values), counts, mean, var,
                                                 f"{test} ({label})"))
            else:
                fam.require(mean_test(g(x), mean, var, f"{test} ({label})"))


def small_gof(fam: Family, o: Oracle, x: np.ndarray, fmt: FloatFormat | None,
              what: str = "", support: bool = True) -> None:
    """One statistical check (chi-square for discrete laws, else KS vs the rounded law)."""
    __tracebackhide__ = True
    if support:
        require_support(fam.record, o, x, fmt)
    label = f"{o.method}_{o.params}{', ' + what if what else ''}"
    if o.discrete:
        fam.require(discrete_chisquare(o, x, f"chi-square ({label})"))
    elif fmt is not None and fmt.name in ("float16", "bfloat16"):
        fam.require(ks_rounded(o, x, fmt, f"KS vs the law rounded to {fmt.name} ({label})"))
    else:
        fam.require(ks_test(x, o.cdf, fmt, f"KS ({label})"))


def expect_error(impl: Any, t: torch.Tensor, params: tuple[Any, ...], pattern: str
                 ) -> str | None:
    """None if the call raised with a message matching ``pattern``, else what happened."""
    try:
        impl(t, *params)
        if t.device.type != "cpu":
            torch.accelerator.synchronize()
    except (RuntimeError, ValueError) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if re.search(pattern, str(exc), re.IGNORECASE):
            return None
        return f"params {params}: raised {type(exc).__name__} {text!r}, expected /{pattern}/"
    return f"params {params}: no error"


def parameter_test(method: str, params: tuple[float, ...], x: np.ndarray,
                   fmt: FloatFormat | None) -> TestResult:
    """The targeted test of ``test_parameter_precision``: bernoulli the mean of x (p),
    geometric the mean of p x (1), exponential the mean of lambd x (1), a location-scale
    law in a 16-bit format its scale score against the law rounded to that format."""
    name = method.rstrip("_")
    label = f"{method}{params}"
    if name == "bernoulli":
        p = params[0]
        return mean_test(x, p, p * (1 - p), f"mean of x ({label})")
    if name == "geometric":
        p = params[0]
        return mean_test(p * x, 1.0, 1.0 - p, f"mean of p x ({label})")
    if name == "exponential":
        return mean_test(params[0] * x, 1.0, 1.0, f"mean of lambd x ({label})")
    if fmt is None or fmt.name not in ("float16", "bfloat16"):
        raise ValueError(f"no parameter-precision test for {method} in {fmt}")
    o = oracle(method, params)
    values, _, _ = _rounded(o.method, o.params, fmt.name)
    mean, var = null_moments(o.method, o.params, fmt.name, "scale score")
    with np.errstate(all="ignore"):
        return mean_test_counts(o.tests["scale score"](values), rounded_counts(x, fmt), mean,
                                var, f"scale score ({label}, {fmt.name})")


def body_chisquare(o: Oracle, x: np.ndarray, fmt: FloatFormat | None, label: str
                   ) -> TestResult:
    """A continuous law's body on a large sample: 100 equiprobable cells with edges at
    representable values (exact for the law rounded to ``fmt``). Fewer, wider cells than
    the powered check's chi-square over every 16-bit value: more power against an error
    spread thinly over the body."""
    return binned_chisquare(x, o.cdf, o.ppf, fmt, 100, f"chi-square, 100 cells ({label})")


def seed_of(rng: np.random.Generator) -> int:
    """A test's generator seed, from its rng (seeded from --seed and the test id)."""
    return int(rng.integers(2**62))


def params_of(spec: SamplerSpec, params: tuple[float, ...], dtype: torch.dtype) -> tuple:
    """The call's parameters: random_ takes Python ints."""
    return tuple(int(p) for p in params) if spec.name == "random" else params


def draw_with(impl: Any, gen: torch.Generator, dtype: torch.dtype, device: torch.device,
              params: tuple, record: Record, method: str, n: int = STREAM_N) -> torch.Tensor:
    """``n`` values from ``gen`` (not reseeded: successive calls continue its stream), their
    support checked."""
    t = prefilled((n,), dtype, device, method, params)
    impl(t, *params, generator=gen)
    require_support(record, law_of(method, params), t, None)
    return t
