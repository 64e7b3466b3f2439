"""--time-budget (conformance/run/deadline.py): past the budget no test starts, the rest are
reported with the reason (not-run in the report: tests/test_honest_verdicts.py), the report
is still written; a bad value is a usage error."""

from __future__ import annotations

import re

from tests.conftest import SUITE

SLOW = """
import time
import pytest

@pytest.mark.parametrize("i", range(6))
def test_slow(i):
    time.sleep(2.0)
"""


def _budgeted_run(suite, folder, source: str, workers: str, budget: str):
    """Six 2 s tests from ``source`` under ``--time-budget``: (run, passed, skipped)."""
    folder.mkdir()
    (folder / "test_slow.py").write_text(source)
    run = suite(str(folder), "-n", workers, "-q", "-rs", "--time-budget", budget,
                report=False)
    assert run.returncode == 0, run.output[-2000:]
    counts = re.search(r"(\d+) passed, (\d+) skipped", run.stdout)
    assert counts, run.stdout[-2000:]
    passed, skipped = int(counts.group(1)), int(counts.group(2))
    assert passed + skipped == 6, run.stdout[-2000:]
    return run, passed, skipped


def test_tests_after_the_budget_are_skipped_for_time(suite, tmp_path):
    """Six 2 s tests and a 5 s budget: the first starts at once, and whatever starts after
    5 s is skipped (at most three run, however slow the start)."""
    run, passed, skipped = _budgeted_run(suite, tmp_path / "slow_tests", SLOW, "0", "5")
    assert 1 <= passed <= 3, run.stdout[-2000:]
    assert f"SKIPPED [{skipped}]" in run.stdout and "time budget spent" in run.stdout


def test_a_budget_must_be_positive(suite):
    for bad in ("0", "-5", "soon"):
        run = suite(str(SUITE / "topk"), "-q", "--time-budget", bad, report=False)
        assert run.returncode == 4
        assert "--time-budget takes a positive number of seconds" in run.stderr
        assert "Traceback" not in run.stderr


def test_the_clock_starts_at_the_first_test(suite, tmp_path):
    """A collection that takes 4 s (two xdist workers, each importing a slow module) and a
    3 s budget: the start-up is not counted, so tests run; the workers share one clock, so
    the 2 s tests that start within 3 s of the first are at most two per worker."""
    run, passed, _ = _budgeted_run(suite, tmp_path / "slow_start",
                                   "import time\ntime.sleep(4)\n" + SLOW, "2", "3")
    assert 2 <= passed <= 4, run.stdout[-2000:]
