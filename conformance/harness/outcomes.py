"""Outcomes beyond pass/fail, for tests to declare from inside their body.

The matrix and the implementations' declared capabilities mark most unsupported cases at
collection time; these helpers cover what is only known at run time.
"""

from __future__ import annotations

from typing import NoReturn

import pytest

# every outcome of a collected test, in the order the report lists them
OUTCOMES = (
    "passed", "failed", "error", "expected-fail", "unexpected-pass", "unsupported", "skipped",
)
UNSUPPORTED_TAG = "[unsupported]"
SKIPPED_TAG = "[skipped]"
# the outcomes that make a run fail (report.html's FAIL, diff's regressions, the release table)
BAD_OUTCOMES = ("failed", "error", "unexpected-pass")


def unsupported(reason: str) -> NoReturn:
    """The case does not apply by design (reported as unsupported, never as passed)."""
    pytest.skip(f"{UNSUPPORTED_TAG} {reason}")


def missing(reason: str) -> NoReturn:
    """Missing hardware or an optional package (reported as skipped, with the reason)."""
    pytest.skip(f"{SKIPPED_TAG} {reason}")
