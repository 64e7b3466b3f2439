"""The stream checks every sampler area runs (mixed into ``test_samplers.SamplerTests``):
calls and seeds that must not share values, large and many calls on one generator,
reproducibility, seed bits, and a stream that follows the generator's state."""

from __future__ import annotations

import torch

from conformance.areas.samplers.checks import (
    Family,
    bits_of,
    device_bits,
    draw_with,
    fmt_of,
    law_of,
    params_of,
    prefilled,
    require_support,
    seed_of,
    stat_checks,
)
from conformance.areas.samplers.data import LARGE, STREAM_N, SamplerSpec
from conformance.areas.samplers.dependence import call_overlaps, stream_overlap
from conformance.areas.samplers.generator_state import (
    HIGH_SEED_BITS,
    MANY_CALLS,
    call_length,
    default_generator_problems,
    generator_drops_high_bits,
    repeated_calls,
    state_problems,
)
from conformance.harness.compare import exact
from conformance.harness.outcomes import unsupported
from oracles.samplers import oracle

LOW_SEED_BITS = (16, 24, 31)


class StreamChecks:
    """Stream and generator tests; the concrete test classes set ``spec``."""

    spec: SamplerSpec

    @stat_checks(1)
    def test_streams_do_not_overlap(self, impl, dtype, device, record, rng):
        """A call and the next one on the same generator, and a generator seeded
        differently, share no run of L consecutive values (L from the law's collision
        probability: one shared run has probability <= ALPHA / 10 under independence)."""
        spec, seed = self.spec, seed_of(rng)
        params = params_of(spec, spec.main, dtype)
        record.case(method=spec.method, params=params, n=STREAM_N, generator_seed=seed)
        gen = torch.Generator(device=device).manual_seed(seed)
        first = draw_with(impl, gen, dtype, device, params, record, spec.method)
        second = draw_with(impl, gen, dtype, device, params, record, spec.method)
        other = draw_with(impl, torch.Generator(device=device).manual_seed(seed + 1), dtype,
                          device, params, record, spec.method)
        o = oracle(spec.method, spec.main)
        Family(record, 1).require(stream_overlap(
            {"call 1": bits_of(first), "call 2": bits_of(second), "seed + 1": bits_of(other)},
            o, fmt_of(dtype), spec.method))

    @stat_checks(1)
    def test_large_calls(self, impl, dtype, device, record, rng, conformance_state):
        """Consecutive calls on one generator of 2^22 + 13 values (2 calls in ci) or 2^24 +
        13 (2 in dev, 8 in thorough), past the 2^16, 2^22 and 2^24 marks where a kernel's
        grid or a generator's per-call offset may wrap: every value in the support, counted
        on the device (a kernel that leaves the end of a large tensor unwritten, or writes
        an impossible value once in 2^24), and no call repeating a run of values of the
        call before it (a counter advanced by less than a call consumes)."""
        spec, seed = self.spec, seed_of(rng)
        params = params_of(spec, spec.main, dtype)
        n, calls = LARGE[conformance_state.profile]
        record.case(method=spec.method, params=params, n=n, calls=calls,
                    generator_seed=seed)
        gen = torch.Generator(device=device).manual_seed(seed)
        bits = []
        for _ in range(calls):
            t = draw_with(impl, gen, dtype, device, params, record, spec.method, n)
            bits.append(device_bits(t))
        o = oracle(spec.method, spec.main)
        Family(record, 1).require(call_overlaps(bits, o, fmt_of(dtype), spec.method))

    def test_reproducible(self, impl, dtype, device, record, rng):
        """A seeded generator on the device reproduces the stream bit for bit, whatever the
        global RNG does; another seed, or the next draw, gives another stream."""
        spec, seed = self.spec, seed_of(rng)
        params = params_of(spec, spec.main, dtype)
        record.case(method=spec.method, params=params, generator_seed=seed)

        def run(s: int, twice: bool = False) -> list[torch.Tensor]:
            gen = torch.Generator(device=device).manual_seed(s)
            outs = []
            for _ in range(2 if twice else 1):
                t = draw_with(impl, gen, dtype, device, params, record, spec.method, 4099)
                outs.append(device_bits(t).cpu())
            return outs

        torch.manual_seed(seed % 1000)
        a, a_next = run(seed, twice=True)
        torch.manual_seed(seed % 1000 + 1)
        b, b_next = run(seed, twice=True)
        (c,) = run(seed + 1)
        problems = []
        for call, x, y in ((1, a, b), (2, a_next, b_next)):
            if not torch.equal(x, y):
                problems.append(f"same seed, different stream in call {call} "
                                f"({int((x != y).sum())} of {x.numel()} differ)")
        if torch.equal(a, c):
            problems.append("another seed gave the same stream")
        if torch.equal(a, a_next):
            problems.append("the next draw repeated the first")
        for bit in LOW_SEED_BITS:  # a seed truncated to 16, 24 or 31 bits
            if torch.equal(a, run(seed ^ (1 << bit))[0]):
                problems.append(f"seeds differing only in bit {bit} gave the same stream")
        record.require(exact("seeded generator reproduces its stream", len(problems),
                             4 + len(LOW_SEED_BITS), "; ".join(problems)))

    def test_high_seed_bits(self, impl, dtype, device, record, rng):
        """Seeds differing only in a bit from 32 to 63 give different streams (a 64-bit
        seed is not truncated to 32 bits), where the device's own generator keeps those
        bits (CUDA's Philox does; the CPU's mt19937 takes 32, pytorch#87509: an
        implementation drawing from it cannot do better, so the test does not apply)."""
        spec, seed = self.spec, seed_of(rng) & 0xFFFF_FFFF
        lost = generator_drops_high_bits(device)
        if lost:
            unsupported(f"this device's torch.Generator ignores seed bits {lost} (torch.rand "
                        "draws the same stream): nothing an implementation draws from it can "
                        "tell those seeds apart")
        params = params_of(spec, spec.main, dtype)
        record.case(method=spec.method, params=params, generator_seed=seed,
                    bits=HIGH_SEED_BITS)

        def first(s: int) -> torch.Tensor:
            gen = torch.Generator(device=device).manual_seed(s)
            return device_bits(draw_with(impl, gen, dtype, device, params, record,
                                         spec.method, 4099)).cpu()

        base = first(seed)
        same = [bit for bit in HIGH_SEED_BITS if torch.equal(base, first(seed | (1 << bit)))]
        record.require(exact("seeds differing only in a high bit give different streams",
                             len(same), len(HIGH_SEED_BITS),
                             f"bits {same} gave the seed's own stream" if same else ""))

    def test_generator_state(self, impl, dtype, device, record, rng):
        """The stream follows the generator's state: a state restored with set_state, or
        cloned with clone_state, after a call continues with the next call; manual_seed
        restarts a used generator; where the generator counts a Philox offset (CUDA),
        set_offset(get_offset()) resumes there on a new generator of the same seed. Calls
        without a generator draw from torch's default one: torch.manual_seed reproduces
        them."""
        spec, seed = self.spec, seed_of(rng)
        params = params_of(spec, spec.main, dtype)
        record.case(method=spec.method, params=params, n=STREAM_N, generator_seed=seed)
        problems, checked = state_problems(
            lambda: torch.Generator(device=device).manual_seed(seed), seed,
            lambda gen: device_bits(draw_with(impl, gen, dtype, device, params, record,
                                              spec.method)))

        def without_generator() -> torch.Tensor:
            t = prefilled((STREAM_N,), dtype, device, spec.method, params)
            impl(t, *params)
            require_support(record, law_of(spec.method, params), t, None)
            return device_bits(t)

        more, count = default_generator_problems(without_generator, seed, device)
        problems, checked = problems + more, checked + count
        record.require(exact("the stream follows the generator's state", len(problems),
                             checked, "; ".join(problems)))

    @stat_checks(1)
    def test_many_calls(self, impl, dtype, device, record, rng):
        """1,000 successive calls on one generator (more than mt19937's 624-word cycle),
        each just long enough that equal calls are a rejection at alpha: no call repeats
        another (a stream keyed by a position in a cycle comes back to the same values)."""
        spec, seed = self.spec, seed_of(rng)
        params = params_of(spec, spec.main, dtype)
        o, fmt = oracle(spec.method, spec.main), fmt_of(dtype)
        size = call_length(o, fmt)
        record.case(method=spec.method, params=params, n=size, calls=MANY_CALLS,
                    generator_seed=seed)
        gen = torch.Generator(device=device).manual_seed(seed)
        calls = []
        for _ in range(MANY_CALLS):
            t = prefilled((size,), dtype, device, spec.method, params)
            impl(t, *params, generator=gen)
            calls.append(t)
        every = torch.cat(calls)
        require_support(record, law_of(spec.method, params), every, None)
        bits = bits_of(every).reshape(MANY_CALLS, size)
        Family(record, 1).require(repeated_calls(list(bits), o, fmt, spec.method))
