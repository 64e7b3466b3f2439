"""No vacuous runs: an implementation plugged in through --impl whose checks all came out
unsupported or skipped has not been tested, and the run says so and fails (unless
--allow-empty); areas without any implementation are one line each, not skipped tests."""

from __future__ import annotations

import pytest

from tests.conftest import SUITE

pytestmark = pytest.mark.harness_only  # no torch behaviour: newest torch only in CI


def test_impl_that_runs_nothing_fails_the_run(suite):
    args = (str(SUITE / "topk" / "test_topk.py"), "--device=cpu", "-n", "0", "--no-builtins",
            "--impl=topk=planted.contract_typos:cuda_only")
    run = suite(*args)
    assert run.returncode == 1, run.output[-3000:]
    line = [x for x in run.stdout.splitlines() if "ran no check" in x]
    assert len(line) == 1 and line[0].startswith(
        "ERROR: implementation planted.cuda_only (--impl topk=planted.contract_typos:cuda_only)"
        " ran no check: 280 unsupported: implementation planted.cuda_only declares devices "
        "['cuda'], not cpu"), line
    assert run.report["vacuous"] and run.report["summary"]["unsupported"] == 280
    assert "      not run: 280 unsupported: implementation planted.cuda_only declares " \
           "devices ['cuda'], not cpu" in run.stdout
    row = run.report["areas"]["topk"]["planted.cuda_only"]
    assert row["ran"] == 0 and sum(row["not_run"].values()) == 280
    allowed = suite(*args, "--allow-empty")
    assert allowed.returncode == 0, allowed.output[-3000:]
    assert "ran no check" not in allowed.stdout and not allowed.report["vacuous"]


def test_no_builtins_areas_without_implementations_are_one_line(suite):
    run = suite(str(SUITE / "topk" / "test_topk.py"), str(SUITE / "samplers"), "--device=cpu",
                "-n", "0", "--no-builtins", "--impl=topk=planted.topk_faults:ignores_sorted",
                "-k", "test_special_values and float64")
    assert run.returncode == 1, run.output[-3000:]  # the planted fault is flagged
    results = run.report["results"]
    assert results and all("topk" in r["area"] for r in results)  # no sampler "tests"
    assert "sampler.normal" in run.report["areas_without_implementations"]
    lines = [li for li in run.stdout.splitlines() if "no implementation registered" in li]
    assert len(lines) == 1 and lines[0].endswith("(--no-builtins)"), lines  # one line
    assert "sampler.* (8)" in lines[0] and "topk" not in lines[0], lines[0]
    row = run.report["areas"]["topk"]["planted.ignores_sorted"]
    assert row["ran"] >= 1


def test_a_run_that_ran_nothing_is_not_passed(suite):
    """Graph capture on the CPU: every shipped runtime is a GPU's, so every test is
    unsupported; the run says it tested nothing and is not PASS (unless --allow-empty)."""
    args = (str(SUITE / "graphs" / "test_graphs.py"), "--device=cpu", "-n", "0")
    run = suite(*args)
    assert run.returncode == 1, run.output[-3000:]
    assert run.report["verdict"] == "FAIL" and run.report["summary"]["passed"] == 0
    assert any(v.startswith("nothing ran: all ") for v in run.report["vacuous"])
    assert any(line.startswith("  graphs: 4 implementations ran nothing here")
               and line.endswith("not tested, not passed") for line in run.stdout.splitlines())
    assert "no failure, nothing left unrun" not in run.stdout
    allowed = suite(*args, "--allow-empty")
    assert allowed.returncode == 0 and not allowed.report["vacuous"], allowed.output[-3000:]
