"""``--time-budget SECONDS``: stop starting tests once the run has used its budget.

Tests not yet started when the budget is spent are reported not-run with the reason (never
as passed or skipped), so a run that must fit a fixed window (a lent GPU's minutes, a CI
job's limit) still ends cleanly and writes its report; its verdict is INCOMPLETE unless
``--allow-partial`` accepts a partial run. The clock starts when the controller configures;
xdist workers receive the controller's absolute deadline, so every worker stops at the same
moment. A test that has started runs to its end: the budget bounds when the last test starts,
not when it finishes.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from conformance.harness.outcomes import not_run

DEADLINE = pytest.StashKey[float]()


def addoption(group: Any) -> None:
    group.addoption("--time-budget", dest="conformance_time_budget", default=None,
                    metavar="SECONDS",
                    help="start no test after SECONDS of the run; the rest are reported "
                         "not-run and the run is INCOMPLETE (a fixed window: a lent GPU, a "
                         "CI job)")
    group.addoption("--allow-partial", dest="conformance_allow_partial", action="store_true",
                    default=False,
                    help="a run with tests not run (--time-budget) can still PASS; they "
                         "are counted not-run")


def parse(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise pytest.UsageError(f"--time-budget takes a positive number of seconds, "
                                f"not {value!r}")
    return seconds


def configure(config: pytest.Config) -> None:
    """Set the deadline: the controller's (handed to the workers), or its own."""
    budget = parse(config.getoption("conformance_time_budget", None))
    if budget is None:
        return
    given = getattr(config, "workerinput", {}).get("conformance_deadline")
    config.stash[DEADLINE] = float(given) if given is not None else time.time() + budget


def configure_node(node: Any) -> None:
    deadline = node.config.stash.get(DEADLINE, None)
    if deadline is not None:
        node.workerinput["conformance_deadline"] = deadline


def check(item: pytest.Item) -> None:
    """Leave ``item`` out (reported not-run, with the reason) if the budget is spent."""
    deadline = item.config.stash.get(DEADLINE, None)
    if deadline is not None and time.time() > deadline:
        budget = item.config.getoption("conformance_time_budget")
        not_run(f"time budget spent: the run starts no test after --time-budget {budget} s; "
                "this one was not run")
