"""Outcomes beyond pass/fail, for tests to declare from inside their body.

The matrix and the implementations' declared capabilities mark most unsupported cases at
collection time; these helpers cover what is only known at run time.
"""

from __future__ import annotations

from typing import NoReturn

import pytest

# every collected test ends as exactly one of these, in the order the report lists them:
# crashed (its process died: a signal), timed-out (the per-test watchdog stopped it),
# not-run (never started, or started and never finished: interrupted, a worker lost,
# past --time-budget)
OUTCOMES = (
    "passed", "failed", "error", "crashed", "timed-out", "expected-fail", "unexpected-pass",
    "unsupported", "skipped", "not-run",
)
UNSUPPORTED_TAG = "[unsupported]"
SKIPPED_TAG = "[skipped]"
NOT_RUN_TAG = "[not-run]"
# the outcomes that make a run FAIL (report.html, diff's regressions, the release table)
BAD_OUTCOMES = ("failed", "error", "crashed", "timed-out", "unexpected-pass")
# the outcomes of a test that ran (the others did not: unsupported, skipped, not-run)
RAN_OUTCOMES = ("passed", "failed", "error", "crashed", "timed-out", "expected-fail",
                "unexpected-pass")
VERDICTS = ("PASS", "FAIL", "INCOMPLETE")


def verdict(counts: dict[str, int], allow_partial: bool = False) -> str:
    """The run's verdict from its outcome counts: INCOMPLETE when tests did not run (unless
    ``allow_partial``), else FAIL when one failed, errored, crashed, timed out or passed
    unexpectedly, else PASS. Skipped and unsupported tests (by design, or left out by a
    profile's matrix ``budget`` entry) never make a run incomplete."""
    if counts.get("not-run", 0) and not allow_partial:
        return "INCOMPLETE"
    if any(counts.get(o, 0) for o in BAD_OUTCOMES):
        return "FAIL"
    return "PASS"


def unsupported(reason: str) -> NoReturn:
    """The case does not apply by design (reported as unsupported, never as passed)."""
    pytest.skip(f"{UNSUPPORTED_TAG} {reason}")


def not_run(reason: str) -> NoReturn:
    """The test was not run (e.g. past the time budget): never passed, makes a run
    INCOMPLETE."""
    pytest.skip(f"{NOT_RUN_TAG} {reason}")


def missing(reason: str) -> NoReturn:
    """Missing hardware or an optional package (reported as skipped, with the reason)."""
    pytest.skip(f"{SKIPPED_TAG} {reason}")
