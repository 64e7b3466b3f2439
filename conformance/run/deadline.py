"""``--time-budget SECONDS``: stop starting tests once the run has used its budget.

Tests not yet started when the budget is spent are reported not-run with the reason (never
as passed or skipped), so a run that must fit a fixed window (a lent GPU's minutes, a CI
job's limit) still ends cleanly and writes its report; its verdict is INCOMPLETE unless
``--allow-partial`` accepts a partial run. The clock starts when the first test of the run
starts, on whichever process runs it: the interpreter's start, xdist's workers starting and
collecting are not counted (on a GPU host with 8 workers they took most of a 30 s budget).
The first process to start a test writes the time into the run's folder (``clock-start``,
created atomically); every other process reads it, so all workers stop at the same moment.
A test that has started runs to its end: the budget bounds when the last test starts, not
when it finishes (the per-test watchdog, ``--test-timeout``, bounds how long it runs).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

import pytest

from conformance.harness.outcomes import not_run

BUDGET = pytest.StashKey[float]()
FOLDER = pytest.StashKey[Path]()
DEADLINE = pytest.StashKey[float]()
CLOCK_FILE = "clock-start"


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
    """Read the budget (a bad value is a usage error); the clock starts later."""
    budget = parse(config.getoption("conformance_time_budget", None))
    if budget is not None:
        config.stash[BUDGET] = budget


def attach(config: pytest.Config, folder: Path) -> None:
    """The run's folder, shared by the controller and its workers: the clock's file."""
    config.stash[FOLDER] = folder


def clock_start(folder: Path | None) -> float:
    """The run's first test's start (epoch seconds): this process's now if it is the first
    to ask, else what the first one wrote."""
    now = time.time()
    if folder is None:
        return now
    target = folder / CLOCK_FILE
    tmp = folder / f".{CLOCK_FILE}.{os.getpid()}"
    try:
        tmp.write_text(repr(now))
        os.link(tmp, target)  # atomic: exactly one process creates it
        return now
    except FileExistsError:
        with contextlib.suppress(OSError, ValueError):
            return float(target.read_text())
        return now
    except OSError:  # an unwritable folder: this process's own clock
        return now
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()


def _deadline(config: pytest.Config) -> float | None:
    budget = config.stash.get(BUDGET, None)
    if budget is None:
        return None
    if DEADLINE not in config.stash:
        config.stash[DEADLINE] = clock_start(config.stash.get(FOLDER, None)) + budget
    return config.stash[DEADLINE]


def check(item: pytest.Item) -> None:
    """Leave ``item`` out (reported not-run, with the reason) if the budget is spent."""
    deadline = _deadline(item.config)
    if deadline is not None and time.time() > deadline:
        budget = item.config.getoption("conformance_time_budget")
        not_run(f"time budget spent: the run starts no test after --time-budget {budget} s; "
                "this one was not run")
