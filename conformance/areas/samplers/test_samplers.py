"""Sampler conformance: the in-place samplers against scipy.stats oracles.

One class per area (``sampler.<method>``); every test runs per registered implementation
and per dtype of the area. Statistical checks run at the per-check level
``conformance.stats.gof.ALPHA`` (Bonferroni over the run's budget); each test declares how many
it makes (``stat_checks``). Generators are seeded from ``--seed`` and the test id: fixed in
the ci profile, fresh (and printed) in dev and thorough.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conformance.areas.samplers.checks import (
    Family,
    body_chisquare,
    draw,
    expect_error,
    fmt_of,
    goodness_of_fit,
    parameter_test,
    params_of,
    prefilled,
    require_in_place,
    seed_of,
    small_gof,
    stat_checks,
    to_numpy,
)
from conformance.areas.samplers.data import (
    OTHER_N,
    RESOLUTION_N,
    SERIAL_N,
    SMALL_REPEATS,
    SMALL_SIZES,
    SPECS,
    TAIL_N,
    TWO_SAMPLE_N,
    SamplerSpec,
    layout_shape,
    sized,
)
from conformance.areas.samplers.dependence import (
    RESOLUTION,
    TAIL_QUANTILES,
    collision_test,
    magnitude_serial,
    pair_chisquare,
    resolution_test,
    tail_checks,
)
from conformance.areas.samplers.stream_tests import StreamChecks
from conformance.harness.compare import exact
from conformance.harness.outcomes import unsupported
from conformance.harness.tensors import dtype_name
from conformance.stats.gof import repeat_test, serial_test, two_sample_test
from oracles.sampler_tails import tail_thresholds
from oracles.samplers import oracle

F32 = pytest.mark.parametrize("dtype", [torch.float32], ids=["float32"])



def _applies(spec: SamplerSpec, params: tuple[float, ...], dtype: torch.dtype) -> bool:
    """Integer dtypes hold random_ ranges only if they fit."""
    if spec.name != "random" or dtype.is_floating_point:
        return True
    info = torch.iinfo(dtype)
    return info.min <= params[0] and params[-1] - 1 <= info.max




class SamplerTests(StreamChecks):
    """The checks every sampler area runs (the stream and generator ones in
    ``StreamChecks``); subclasses set ``spec``."""

    spec: SamplerSpec

    @stat_checks(5)
    def test_goodness_of_fit(self, impl, dtype, device, record, rng):
        """The powered check: support, omnibus tests against the (rounded) law, and the
        targeted tests that detect a 1 % parameter error with probability >= 0.99."""
        spec, seed = self.spec, seed_of(rng)
        params = params_of(spec, spec.main, dtype)
        n = sized(spec.n)
        record.case(method=spec.method, params=params, n=n, generator_seed=seed)
        x = to_numpy(draw(impl, (n,), dtype, device, params, seed, record, spec.method))
        goodness_of_fit(Family(record, 5), oracle(spec.method, spec.main), x, fmt_of(dtype),
                        support=False)

    @stat_checks(6)
    def test_other_parameters(self, impl, dtype, device, record, rng):
        """Further parameter sets, omnibus tests only (n = OTHER_N)."""
        spec, fam = self.spec, Family(record, 6)
        for params in spec.others:
            if not _applies(spec, params, dtype):
                continue
            seed = seed_of(rng)
            p = params_of(spec, params, dtype)
            record.case(method=spec.method, params=p, n=OTHER_N, generator_seed=seed)
            x = to_numpy(draw(impl, (OTHER_N,), dtype, device, p, seed, record, spec.method))
            goodness_of_fit(fam, oracle(spec.method, params), x, fmt_of(dtype), targeted=False,
                            support=False)

    @stat_checks(1)
    def test_two_sample_vs_cpu(self, impl, dtype, device, record, rng):
        """The device's samples and torch's CPU samples come from one law (on a CPU run:
        two CPU generators with different seeds)."""
        spec, seed = self.spec, seed_of(rng)
        params = params_of(spec, spec.main, dtype)
        record.case(method=spec.method, params=params, n=TWO_SAMPLE_N, generator_seed=seed)
        x = to_numpy(draw(impl, (TWO_SAMPLE_N,), dtype, device, params, seed, record,
                            spec.method))
        cpu = torch.empty(TWO_SAMPLE_N, dtype=dtype)
        getattr(cpu, spec.method)(*params, generator=torch.Generator().manual_seed(seed + 1))
        against = "a second CPU generator" if device.type == "cpu" else "torch on the CPU"
        o = oracle(spec.method, spec.main)
        discrete = o.discrete or dtype_name(dtype) in ("float16", "bfloat16")
        Family(record, 1).require(two_sample_test(x, to_numpy(cpu), discrete,
                                                  f"{spec.method} on {device} vs {against}"))

    @stat_checks(4)
    def test_independence(self, impl, dtype, device, record, rng):
        """Successive draws independent: lag-1 autocorrelation of u = F(x) and of
        |u - 1/2| (a shared magnitude), consecutive pairs against the product law, and no
        block of the stream repeated at any lag (Bonferroni over the lags)."""
        spec, seed = self.spec, seed_of(rng)
        params = params_of(spec, spec.main, dtype)
        record.case(method=spec.method, params=params, n=SERIAL_N, generator_seed=seed)
        x = to_numpy(draw(impl, (SERIAL_N,), dtype, device, params, seed, record, spec.method))
        o = oracle(spec.method, spec.main)
        u = o.u(x)
        fam = Family(record, 4)
        fam.require(serial_test(u, f"lag-1 autocorrelation ({spec.method})"))
        fam.require(magnitude_serial(u, spec.method))
        fam.require(pair_chisquare(o, x, fmt_of(dtype), spec.method))
        fam.require(repeat_test(u, f"no repeated blocks, all lags ({spec.method})"))

    @stat_checks(5)
    def test_tails(self, impl, dtype, device, record, rng):
        """Far tails: the counts at or beyond the law's 1e-4 and 1e-5 quantiles (each side,
        in this dtype, overflow included), exact binomial tests at n = TAIL_N; and, on the
        same draws, the body: a 100-cell chi-square against the law rounded to the dtype (a
        shape error too fine for the powered check's n: a ziggurat whose wedges are
        under-weighted, 0.6 % of the mass, gives p ~ 1e-40 in float32)."""
        spec, seed = self.spec, seed_of(rng)
        params = params_of(spec, spec.main, dtype)
        o, fmt = oracle(spec.method, spec.main), fmt_of(dtype)
        if not tail_thresholds(o, fmt, TAIL_QUANTILES):
            unsupported(f"{spec.method}{spec.main} has no value beyond its 1e-4 quantiles in "
                        f"{dtype_name(dtype)} (within a factor 10)")
        record.case(method=spec.method, params=params, n=TAIL_N, generator_seed=seed)
        x = to_numpy(draw(impl, (TAIL_N,), dtype, device, params, seed, record, spec.method))
        fam = Family(record, 5)
        for result in tail_checks(o, x, fmt, f"{spec.method}{spec.main}"):
            fam.require(result)
        if not o.discrete:
            fam.require(body_chisquare(o, x, fmt, f"{spec.method}{spec.main}, n = {TAIL_N}"))

    @stat_checks(2)
    def test_small_sizes(self, impl, dtype, device, record, rng):
        """Tensors of 1 .. 47 elements (every remainder mod 16, the scalar epilogues of
        vectorised kernels), one generator: the elements past the last multiple of 16,
        and the others, each against the law (KS or chi-square, pooled over the calls)."""
        spec, seed = self.spec, seed_of(rng)
        params = params_of(spec, spec.main, dtype)
        record.case(method=spec.method, params=params, sizes="1..47", repeats=SMALL_REPEATS,
                    generator_seed=seed)
        gen = torch.Generator(device=device).manual_seed(seed)
        tails, heads, not_returned = [], [], 0
        for _ in range(SMALL_REPEATS):
            for size in SMALL_SIZES:
                t = prefilled((size,), dtype, device, spec.method, params)
                not_returned += impl(t, *params, generator=gen) is not t
                cut = size - size % 16
                heads.append(t[:cut])
                tails.append(t[cut:])
        calls = SMALL_REPEATS * len(SMALL_SIZES)
        record.require(exact("fills the tensor in place and returns it", not_returned, calls))
        o, fmt, fam = oracle(spec.method, spec.main), fmt_of(dtype), Family(record, 2)
        for part, chunks in (("remainder elements", tails), ("whole-vector elements", heads)):
            x = to_numpy(torch.cat(chunks))
            small_gof(fam, o, x, fmt, f"{part} of sizes 1..47")

    @stat_checks(6)
    @pytest.mark.parametrize("layout", ["transposed", "strided", "offset", "block"])
    def test_layouts(self, impl, dtype, device, record, rng, layout):
        """Non-contiguous views with odd extents, as large as the powered check's sample
        and checked as it is (support, omnibus and targeted tests), plus no block of the
        view repeated (a view filled with two copies of half its values); every element
        outside the view untouched."""
        spec, seed = self.spec, seed_of(rng)
        params = params_of(spec, spec.main, dtype)
        rows, cols = layout_shape(spec.n)
        sentinel = 77 if dtype == torch.uint8 or not dtype.is_floating_point else -12345.0
        if layout == "transposed":
            buf = torch.full((cols, rows), sentinel, dtype=dtype, device=device)
            view = buf.t()
        elif layout == "strided":
            buf = torch.full((rows, 2 * cols), sentinel, dtype=dtype, device=device)
            view = buf[:, ::2]
        elif layout == "offset":
            buf = torch.full((rows * cols + 7,), sentinel, dtype=dtype, device=device)
            view = buf[3:3 + rows * cols].view(rows, cols)
        else:
            buf = torch.full((rows + 4, cols + 6), sentinel, dtype=dtype, device=device)
            view = buf[2:-2, 3:-3]
        inside = torch.zeros(buf.shape, dtype=torch.bool, device=device)
        mask_view = inside.as_strided(view.shape, view.stride(), view.storage_offset())
        mask_view.fill_(True)
        record.case(method=spec.method, params=params, layout=layout,
                    shape=tuple(view.shape), stride=view.stride(), generator_seed=seed)
        out = impl(view, *params, generator=torch.Generator(device=device).manual_seed(seed))
        require_in_place(record, view, out)
        outside = buf[~inside]
        touched = int((outside != sentinel).sum())
        record.require(exact("elements outside the view untouched", touched, outside.numel()))
        o, fam = oracle(spec.method, spec.main), Family(record, 6)
        x = to_numpy(view)  # the view's logical (row-major) order
        goodness_of_fit(fam, o, x, fmt_of(dtype))
        fam.require(repeat_test(o.u(x), f"no repeated blocks in the view ({spec.method})"))

    @stat_checks(2)
    def test_resolution(self, impl, dtype, device, record, rng):
        """float64 draws carry float64 resolution (at most one in 2^20 is a float32 value),
        float32 draws float32 resolution (at most one in 2^8 a float16 or bfloat16 value):
        a law computed in a narrower type and cast fails with certainty at n =
        RESOLUTION_N, and so does a float64 uniform_ from 32 random bits (about 1 % of its
        draws are float32 values). The draws also repeat an earlier draw no more than a law
        with 40 (float64) or 23 (float32) bits of resolution would: one built on 32 (20)
        random bits repeats ~75 (~240,000) at RESOLUTION_N even where its values are not
        those of a narrower format. 16-bit draws: the chi-square over every representable
        value (test_goodness_of_fit) is their resolution test."""
        spec = self.spec
        if dtype not in RESOLUTION or oracle(spec.method, spec.main).discrete:
            unsupported(f"resolution is checked for continuous laws in float32 and float64 "
                        f"(a {dtype_name(dtype)} {spec.method} is covered by its chi-square "
                        "over every value)")
        seed = seed_of(rng)
        params = params_of(spec, spec.main, dtype)
        record.case(method=spec.method, params=params, n=RESOLUTION_N, generator_seed=seed)
        t = draw(impl, (RESOLUTION_N,), dtype, device, params, seed, record, spec.method)
        fam = Family(record, 2)
        fam.require(resolution_test(t, f"{spec.method}{spec.main}"))
        fam.require(collision_test(t, f"{spec.method}{spec.main}"))

    @F32
    def test_parameter_validation(self, impl, dtype, device, record):
        """Invalid parameters raise, with a message naming the parameter."""
        problems = []
        for params, pattern in self.spec.invalid:
            record.case(method=self.spec.method, params=params)
            t = torch.empty(16, dtype=dtype, device=device)
            problem = expect_error(impl, t, params_of(self.spec, params, dtype), pattern)
            if problem:
                problems.append(problem)
        record.require(exact("invalid parameters raise", len(problems),
                             len(self.spec.invalid), "; ".join(problems)))

    @stat_checks(1)
    def test_parameter_precision(self, impl, dtype, device, record, rng):
        """A parameter where rounding it to a narrower compute type moves the law most
        (``data.Precision``: p near 1 for bernoulli, p near 2^-24 for geometric, lambd a
        few float16 subnormal steps for exponential, a std between two bfloat16 values for
        half-precision normal), drawn at the n where the targeted test sees that move with
        probability >= 0.99 at ALPHA."""
        spec, name = self.spec, dtype_name(dtype)
        cases = [c for c in spec.precision if name in c.dtypes]
        if not cases:
            unsupported(f"no parameter-precision case for {spec.method} in {name}")
        fam = Family(record, 1)
        for c in cases[:1]:
            seed, n = seed_of(rng), sized(c.n)
            params = params_of(spec, c.params, dtype)
            record.case(method=spec.method, params=params, n=n, detects=c.rounding,
                        generator_seed=seed)
            x = to_numpy(draw(impl, (n,), dtype, device, params, seed, record, spec.method))
            fam.require(parameter_test(spec.method, c.params, x, fmt_of(dtype)))

    @stat_checks(4)
    def test_extreme_parameters(self, impl, dtype, device, record, rng):
        """Tiny and huge scales, p near 0 and 1, overflow to ±inf in narrow formats: the
        support always, and a goodness-of-fit check against the rounded law."""
        spec, fam = self.spec, Family(record, 4)
        name = dtype_name(dtype)
        for ext in spec.extremes:
            if ext.dtypes is not None and name not in ext.dtypes:
                continue
            seed = seed_of(rng)
            record.case(method=spec.method, params=ext.params, n=sized(ext.n), generator_seed=seed)
            x = to_numpy(draw(impl, (sized(ext.n),), dtype, device, ext.params, seed, record,
                                spec.method))
            o = oracle(spec.method, ext.params)
            if ext.statistical:
                small_gof(fam, o, x, fmt_of(dtype), support=False)
                continue
            bad = np.isnan(x) | (x < 1) | (np.isfinite(x) & (x != np.floor(x)))
            record.require(exact(f"support of {spec.method}{ext.params} (integers >= 1 or "
                                 "+inf on overflow)", int(bad.sum()), x.size))
            record.note(**{f"overflow_to_inf_{ext.params}": float(np.isinf(x).mean())})


class TestNormal(SamplerTests):
    pytestmark = pytest.mark.area("sampler.normal")
    spec = SPECS["normal"]


class TestLogNormal(SamplerTests):
    pytestmark = pytest.mark.area("sampler.log_normal")
    spec = SPECS["log_normal"]


class TestCauchy(SamplerTests):
    pytestmark = pytest.mark.area("sampler.cauchy")
    spec = SPECS["cauchy"]


class TestExponential(SamplerTests):
    pytestmark = pytest.mark.area("sampler.exponential")
    spec = SPECS["exponential"]


class TestUniform(SamplerTests):
    pytestmark = pytest.mark.area("sampler.uniform")
    spec = SPECS["uniform"]


class TestGeometric(SamplerTests):
    pytestmark = pytest.mark.area("sampler.geometric")
    spec = SPECS["geometric"]


class TestBernoulli(SamplerTests):
    pytestmark = pytest.mark.area("sampler.bernoulli")
    spec = SPECS["bernoulli"]

    @stat_checks(2)
    def test_tensor_p(self, impl, dtype, device, record, rng):
        """A tensor of probabilities (p = 0 and 1 included): exact at 0 and 1, and
        sum(x - p) / sqrt(sum p (1 - p)) standard normal elsewhere; then the same into a
        transposed output view, p in the view's logical layout."""
        from conformance.stats.gof import mean_test

        seed, n = seed_of(rng), sized(400_000)
        p = torch.from_numpy(np.random.default_rng(seed).uniform(0, 1, n))
        p[:1000], p[1000:2000] = 0.0, 1.0
        record.case(method="bernoulli_", p="tensor U(0, 1), 1000 zeros, 1000 ones", n=n,
                    generator_seed=seed)
        x = to_numpy(draw(impl, (n,), dtype, device, (p.to(device),), seed, record))
        pn = p.numpy()
        wrong = int(np.sum(x[:1000] != 0) + np.sum(x[1000:2000] != 1)
                    + np.sum((x != 0) & (x != 1)))
        record.require(exact("p = 0 gives 0, p = 1 gives 1, values in {0, 1}", wrong, n))
        w = pn * (1 - pn)
        scaled = (x - pn) / np.sqrt(w.mean())  # mean 0, variance mean(w)/mean(w) = 1
        fam = Family(record, 2)
        fam.require(mean_test(scaled, 0.0, 1.0, "tensor p: mean of x - p"))
        # a non-contiguous output (a transposed view) with p of the view's shape: element
        # (i, j) draws with p[i, j], whatever the output's memory order
        rows, cols = 257, 1557
        pv = torch.from_numpy(np.random.default_rng(seed + 1).uniform(0, 1, (rows, cols)))
        pv[:, :500], pv[:, 500:1000] = 0.0, 1.0
        buf = torch.full((cols, rows), 0.5, dtype=dtype, device=device)
        view = buf.t()
        record.case(method="bernoulli_", p="tensor, rows 0 / 1 / U(0, 1) by column",
                    layout="transposed", shape=(rows, cols), generator_seed=seed + 1)
        out = impl(view, pv.to(device), generator=torch.Generator(device=device)
                   .manual_seed(seed + 1))
        require_in_place(record, view, out)
        xv, pn = to_numpy(view).reshape(rows, cols), pv.numpy()
        wrong = int(np.sum(xv[:, :1000] != pn[:, :1000]) + np.sum((xv != 0) & (xv != 1)))
        record.require(exact("tensor p on a transposed output: p = 0 gives 0, p = 1 gives 1",
                             wrong, xv.size))
        rest, pr = xv[:, 1000:].reshape(-1), pn[:, 1000:].reshape(-1)
        wr = pr * (1 - pr)
        fam.require(mean_test((rest - pr) / np.sqrt(wr.mean()), 0.0, 1.0,
                              "tensor p on a transposed output: mean of x - p"))


class TestRandom(SamplerTests):
    pytestmark = pytest.mark.area("sampler.random")
    spec = SPECS["random"]

    @stat_checks(2)
    def test_default_ranges(self, impl, dtype, device, record, rng):
        """random_(to) is uniform on 0..to-1; random_() on 0..2^digits for floating
        dtypes (every value representable) and 0..max for integer dtypes."""
        fam, n = Family(record, 2), sized(100_000)
        if dtype.is_floating_point:
            top = 2 ** {torch.float16: 11, torch.bfloat16: 8, torch.float32: 24,
                        torch.float64: 53}[dtype]
        else:
            top = torch.iinfo(dtype).max
        for args, hi in (((7,), 7), ((), top + 1)):
            seed = seed_of(rng)
            record.case(method="random_", params=args, n=n, generator_seed=seed)
            x = to_numpy(draw(impl, (n,), dtype, device, args, seed, record))
            if hi <= 4096:
                small_gof(fam, oracle("random_", (0.0, float(hi))), x, None)
                continue
            out = int(np.sum((x < 0) | (x > top) | (x != np.floor(x))))
            record.require(exact(f"random_{args} in 0..{top}", out, n))
            cells = np.minimum((x / (hi / 64)).astype(np.int64), 63)
            from conformance.stats.gof import chisquare_test

            fam.require(chisquare_test(np.bincount(cells, minlength=64), np.full(64, 1 / 64),
                                       f"random_{args}: 64 equal cells of 0..{top}"))
