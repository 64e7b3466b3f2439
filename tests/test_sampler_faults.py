"""The sampler faults of the issue, and the 1 %-error samplers, plugged in through
``--impl sampler.<name>=planted.sampler_faults:<attr>``, are flagged by the suite with a
readable message and a reproduce line (one child run per group, builtins off)."""

from __future__ import annotations

import pytest

from tests.conftest import SUITE
from tests.planted import sampler_faults

ISSUE_FAULTS = [
    ("geometric", "geometric_from_zero", "support of geometric_"),
    ("cauchy", "cauchy_sigma_1pct", "scale score"),
    ("log_normal", "log_normal_std_squared", "log_normal_"),
    ("exponential", "exponential_scale_for_rate", "exponential_"),
    ("normal", "normal_repeats_block", "no repeated blocks"),
]


def _impls(pairs: list[tuple[str, str]]) -> list[str]:
    return [f"--impl=sampler.{area}=planted.sampler_faults:{attr}" for area, attr in pairs]


def test_issue_faults_are_flagged(tmp_path_factory):
    """Read from the fault list's run of the samplers (tests/test_fault_list.py): each
    fault's first failure names its broken property."""
    from tests.test_fault_list import group_run

    run = group_run(tmp_path_factory, "samplers")
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for area, attr, expected in ISSUE_FAULTS:
        name = f"planted.{attr}"
        failed = [r for r in results.get(name, []) if r["outcome"] == "failed"]
        assert failed, f"{name} was not flagged"
        assert any(expected in (r.get("reason") or "") or expected in str(r.get("checks"))
                   for r in failed), (name, [r.get("reason") for r in failed][:3])
        assert f"impl={name}" in run.stdout
        assert f"--impl=sampler.{area}=planted.sampler_faults:{attr}" in run.stdout
    assert "reproduce: PYTHONPATH=" in run.stdout


ONE_PCT = [(area, f"{area}_{which}_1pct")
           for area, kinds in sampler_faults.ONE_PERCENT.items() for which in kinds]


def test_one_percent_faults_are_flagged(suite):
    """The 1 %-error samplers fail the powered check in float32 and bfloat16 at a rate
    plausible for its stated power 0.99: each is detected with probability >= 0.99, so
    a fixed seed may miss one; the test fails only when the misses are implausible
    (P(this many misses | power 0.99) < 1e-6)."""
    from scipy import stats as sps

    run = suite(str(SUITE / "samplers"), "-n", "0", "-q", "-p", "no:randomly",
                "--no-builtins", "-k", "goodness_of_fit and (float32 or bfloat16)",
                *_impls(ONE_PCT))
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    missed, trials = [], 0
    for _area, attr in ONE_PCT:
        rows = results.get(f"planted.{attr}", [])
        assert len(rows) == 2, (attr, rows)
        trials += len(rows)
        missed += [r["nodeid"] for r in rows if r["outcome"] != "failed"]
    chance = float(sps.binom.sf(len(missed) - 1, trials, 0.01))
    print(f"1 %-error samplers flagged: {trials - len(missed)} of {trials}; "
          f"P(>= {len(missed)} misses | power 0.99) = {chance:.2g}; missed: {missed}")
    assert chance >= 1e-6, missed


@pytest.mark.parametrize("area", ["normal", "geometric"])
def test_correct_builtin_passes_through_impl(suite, area):
    """The shipped implementation passed through --impl passes the same tests."""
    run = suite(str(SUITE / "samplers"), "-n", "0", "-q", "-p", "no:randomly",
                "--no-builtins", "-k", "goodness_of_fit and float32",
                f"--impl=sampler.{area}=impls.samplers:{area}")
    assert run.returncode == 0, run.stdout[-3000:]
    assert run.report["summary"]["passed"] == 1


def test_declared_checks_fit_the_budget(suite):
    """The collected samplers area declares its statistical checks, within the budget."""
    import re

    from conformance.stats.gof import CHECK_BUDGET

    run = suite(str(SUITE / "samplers"), "--collect-only", "-p", "no:randomly", report=False)
    assert run.returncode == 0, run.output[-2000:]
    total = int(re.search(r"samplers: (\d+) statistical checks declared", run.stdout)[1])
    assert 0 < total <= CHECK_BUDGET
    print(f"declared statistical checks: {total} of {CHECK_BUDGET}")


@pytest.mark.harness_only  # the harness's handling of a budget: newest torch only in CI
def test_over_budget_says_so_with_and_without_workers(suite):
    """Past the check budget, -n 0 is a one-line usage error (exit 4); under xdist (a
    worker cannot end the run with one) every statistical test errors with the message."""
    from tests.planted.blind_sampler_faults import impl_args

    # only the tests that declare statistical checks (the exact ones run and fail or pass)
    base = [str(SUITE / "samplers"), "--no-builtins", *impl_args(), "-k",
            "not reproducible and not validation and not seed_bits and not generator_state"]
    serial = suite(*base, "-n", "0", report=False)
    assert serial.returncode == 4, serial.output[-2000:]
    assert "more than the budget of" in serial.stderr and "Traceback" not in serial.output
    workers = suite(*base, "-n", "1")
    assert workers.returncode == 1, workers.output[-2000:]
    results = workers.report["results"]
    assert results and all(r["outcome"] == "error" and "more than the budget of" in r["reason"]
                           for r in results)
    assert "give one reason: setup: RuntimeError: the collected sampler tests declare" in \
        workers.stdout, workers.stdout[-3000:]


# (area, planted sampler, dtype, the check that must flag it)
NEW_FAULTS = [
    ("normal", "normal_truncated_3p5", "float32", "test_tails"),
    ("normal", "normal_truncated_4sigma", "bfloat16", "test_tails"),
    ("normal", "normal_box_muller_12bit", "float32", "test_tails"),
    ("normal", "normal_box_muller_11bit", "float64", "test_tails"),
    ("exponential", "exponential_16bit_uniform", "float32", "test_tails"),
    ("normal", "normal_shared_radius", "float32", "test_independence"),
    ("normal", "normal_overlapping_calls", "float32", "test_streams_do_not_overlap"),
    ("normal", "normal_remainder_unscaled", "float32", "test_small_sizes"),
]


def test_tail_dependence_stream_and_remainder_faults_are_flagged(suite):
    """Samplers right in the body and wrong in the far tails, with dependent draws, with
    overlapping streams, or wrong only past the last multiple of 16: each flagged by the
    check built for it, with its reproduce line; the correct twins pass those checks."""
    checks = sorted({c for *_, c in NEW_FAULTS})
    run = suite(str(SUITE / "samplers"), "-n", "0", "-q", "-p", "no:randomly",
                "--no-builtins", "-k", f"({' or '.join(checks)}) and "
                f"({' or '.join(sorted({d for _, _, d, _ in NEW_FAULTS}))})",
                *_impls([(a, f) for a, f, _, _ in NEW_FAULTS]),
                "--impl=sampler.normal=impls.samplers:normal",
                "--impl=sampler.exponential=impls.samplers:exponential")
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for area, attr, dtype, check in NEW_FAULTS:
        rows = [r for r in results.get(f"planted.{attr}", [])
                if f"::{check}[" in r["nodeid"] and f"-{dtype}]" in r["nodeid"]]
        assert rows and all(r["outcome"] == "failed" for r in rows), (attr, dtype, rows)
        assert f"--impl=sampler.{area}=planted.sampler_faults:{attr}" in run.stdout
    for twin in ("torch.normal_", "torch.exponential_"):
        rows = results.get(twin, [])
        # expected-fail: torch < 2.12's half-precision normal_ (pytorch#166853, the matrix)
        bad = [r["nodeid"] for r in rows if r["outcome"] not in ("passed", "expected-fail")]
        assert len(rows) >= 8 and not bad, (twin, len(rows), bad)


@pytest.mark.parametrize("dtype,fault", [("float64", "exponential_32bit_uniform"),
                                         ("float32", "exponential_20bit_uniform")])
def test_a_law_from_too_few_random_bits_is_flagged_by_its_repeats(suite, dtype, fault):
    """Issue 64: -log(u) with u from 32 random bits in float64 (20 in float32) has the right
    law to 2^-32 (2^-20) and values that are not those of a narrower format (the
    representable count passes), but too few distinct values: test_resolution's repeat
    count flags it (float64: 66 repeats against at most 0.29 expected at the run's seed;
    float32: about 240,000 against at most 38,000); torch's exponential_ passes."""
    run = suite(str(SUITE / "samplers"), "-n", "0", "-q", "--no-builtins", "-k",
                f"TestExponential and test_resolution and {dtype}",
                f"--impl=sampler.exponential=planted.sampler_faults:{fault}",
                "--impl=sampler.exponential=impls.samplers:exponential")
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    (row,) = results[f"planted.{fault}"]
    assert row["outcome"] == "failed", row
    failed = [c["name"] for c in row["checks"] if c["failures"]]
    assert failed == ["resolution: draws that repeat an earlier draw (exponential_(2.0,))"], \
        failed
    (twin,) = results["torch.exponential_"]
    assert twin["outcome"] == "passed", twin["reason"]


# issue 40's blind faults (tests/planted/blind_sampler_faults.py, written without reading the
# checks): (fault, the test and dtype that kill it by construction, not by a rare event)
BLIND_KILLS = [
    ("normal_grid_tail_unwritten", "test_large_calls", "float32"),
    ("uniform_nan_lane_past_2_20", "test_large_calls", "float32"),
    ("normal_offset_capped_65536", "test_large_calls", "float32"),
    ("uniform_seed_int31", "test_reproducible", "float32"),
    ("log_normal_float64_via_float32", "test_resolution", "float64"),
    ("uniform_float64_32bit", "test_resolution", "float64"),
    ("bernoulli_p_bfloat16", "test_parameter_precision", "float32"),
    ("geometric_log1mp_float32", "test_parameter_precision", "float32"),
    ("exponential_lambd_float16", "test_parameter_precision", "float32"),
    ("normal_std_bfloat16_half_outputs", "test_parameter_precision", "bfloat16"),
    ("bernoulli_p_tensor_memory_order", "test_tensor_p", "float32"),
    ("normal_ziggurat_wedge_bug", "test_tails", "float32"),
]
OUTSIDE_TWINS = ["pcg64_normal", "philox_uniform", "pcg64_bernoulli", "philox_geometric",
                 "philox_exponential", "pcg64_log_normal", "ziggurat_normal"]


@pytest.mark.harness_only  # our planted samplers only; torch's behaviour is not involved
def test_blind_sampler_faults_are_killed_and_outside_samplers_pass(suite):
    """Each blind fault fails the check built for its family (not a rare event); correct
    outside samplers (numpy PCG64 / Philox writing into the tensor, a correct ziggurat) pass
    the same tests."""
    from tests.planted.blind_sampler_faults import FAULTS, OUTSIDE

    pairs = sorted({(t, d) for _, t, d in BLIND_KILLS})
    select = " or ".join(f"({t} and {d})" for t, d in pairs)
    impls = [f"--impl=sampler.{FAULTS[f][0]}=planted.blind_sampler_faults:{f}"
             for f, _, _ in BLIND_KILLS]
    impls += [f"--impl=sampler.{OUTSIDE[o]}=planted.outside_samplers:{o}"
              for o in OUTSIDE_TWINS]
    run = suite(str(SUITE / "samplers"), "-n", "2", "-q", "--no-builtins", "-k", select,
                *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for fault, test, dtype in BLIND_KILLS:
        rows = [r for r in results.get(f"blind.{fault}", [])
                if f"::{test}[" in r["nodeid"] and r["dtype"] == dtype]
        assert rows and all(r["outcome"] == "failed" for r in rows), (fault, test, dtype, rows)
    for twin in OUTSIDE_TWINS:
        rows = results.get(f"blind.{twin}", [])
        bad = [(r["nodeid"], r["reason"][:200]) for r in rows
               if r["outcome"] not in ("passed", "unsupported")]
        assert rows and not bad, (twin, bad)


# blind generator-state faults (tests/planted/blind_generator_faults.py, written without
# reading the checks): fault -> the test that kills it in every dtype
GENERATOR_KILLS = {
    "counter_per_generator": "test_generator_state",
    "rng_cached_per_generator": "test_generator_state",
    "advance_by_reseed": "test_streams_do_not_overlap",
    "advance_by_generator_seed": "test_reproducible",
    "state_head_as_seed_offset": "test_many_calls",
    "default_unseeded": "test_generator_state",
}


@pytest.mark.harness_only  # our planted samplers only; torch's behaviour is not involved
def test_blind_generator_faults_are_killed_and_twins_pass(suite):
    """Samplers that draw the right law in every call but tie their stream to something
    other than the generator's state (a counter per generator object, a seed read once, a
    reseed as the advance, the state's bytes read as CUDA's layout, an unseeded library
    generator without a generator) each fail the test built for it in every dtype; their
    correct twins and the correct outside samplers pass the same tests."""
    from tests.planted.blind_generator_faults import impl_args

    outside = [f"--impl=sampler.{area}=planted.outside_samplers:{name}" for area, name in
               (("normal", "pcg64_normal"), ("uniform", "philox_uniform"),
                ("exponential", "philox_exponential"))]
    run = suite(str(SUITE / "samplers"), "-n", "2", "-q", "--no-builtins", "-k",
                "generator_state or many_calls or reproducible or streams_do_not_overlap",
                *impl_args(), *outside)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for method in ("normal", "uniform", "exponential"):
        for fault, test in GENERATOR_KILLS.items():
            rows = [r for r in results.get(f"blind.{method}_{fault}", [])
                    if f"::{test}[" in r["nodeid"]]
            assert len(rows) == 4 and all(r["outcome"] == "failed" for r in rows), \
                (method, fault, [(r["nodeid"], r["outcome"]) for r in rows])
            twin = results.get(f"blind.{method}_{fault}_twin", [])
            assert twin and all(r["outcome"] == "passed" for r in twin), (fault, twin)
    for name in ("pcg64_normal", "philox_uniform", "philox_exponential"):
        rows = results.get(f"blind.{name}", [])
        assert len(rows) == 16 and all(r["outcome"] == "passed" for r in rows), \
            (name, [(r["nodeid"], r["outcome"], (r["reason"] or "")[:200]) for r in rows])


# issue 64's blind round for the repeat count (tests/planted/blind_sampler_bits.py, written
# without reading the checks): (fault, dtype) -> the test_resolution check that kills it by
# construction; uniform_float64_two_words_shared (consecutive values share bits) survives
# every sampler check and is listed, not asserted killed
BITS_KILLS = {
    ("exponential_mantissa_fill_lost_bit", "float32"): "draws that repeat an earlier draw",
    ("log_normal_lut_quantised_inverse_cdf", "float32"): "draws that repeat an earlier draw",
    ("log_normal_lut_quantised_inverse_cdf", "float64"): "draws that repeat an earlier draw",
    ("cauchy_counter_wraps_at_2_16", "float32"): "draws that repeat an earlier draw",
    ("cauchy_counter_wraps_at_2_16", "float64"): "draws that repeat an earlier draw",
    ("normal_float32_intermediate_box_muller", "float64"): "draws representable in float32",
}


@pytest.mark.harness_only  # our planted samplers only; torch's behaviour is not involved
def test_blind_few_bits_faults_are_killed_by_resolution_and_the_twin_passes(suite):
    from tests.planted.blind_sampler_bits import FAULTS, TWINS

    impls = [f"--impl=sampler.{law}=planted.blind_sampler_bits:{name}"
             for law, name, *_ in [*FAULTS, *TWINS]]
    run = suite(str(SUITE / "samplers"), "-n", "0", "-q", "--no-builtins", "-k",
                "test_resolution", *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for (name, dtype), check in BITS_KILLS.items():
        (row,) = [r for r in results[f"blind.{name}"] if r["dtype"] == dtype]
        failed = [c["name"] for c in row["checks"] if c["failures"]]
        assert row["outcome"] == "failed" and any(check in f for f in failed), (name, row)
    for _, name in TWINS:
        rows = [r for r in results[f"blind.{name}"] if r["dtype"] in ("float32", "float64")]
        assert len(rows) == 2 and all(r["outcome"] == "passed" for r in rows), rows
