"""``--repro-dir`` over a session (controller, or the only process): the directory prepared
at the start, one reproducer per failure group written at the end
(conformance/report/repro_dir.py). Test processes stage candidates (conformance/run/fixtures.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conformance.harness.runstate import STATE
from conformance.report.repro_dir import ReproDirError, finalize, prepare
from conformance.run.keys import COLLECTOR

_WRITTEN = pytest.StashKey[list[Path]]()


def _directory(config: pytest.Config) -> Path | None:
    state = config.stash.get(STATE, None)
    if state is None or state.repro_dir is None or hasattr(config, "workerinput"):
        return None
    return None if config.option.collectonly else state.repro_dir


@pytest.hookimpl(trylast=True)  # after the plugin's pytest_configure made the run state
def pytest_configure(config: pytest.Config) -> None:
    directory = _directory(config)
    if directory is None:
        return
    try:
        prepare(directory)
    except (ReproDirError, OSError) as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(trylast=True)  # after the accounting's: every test has its outcome
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    directory = _directory(session.config)
    collector = session.config.stash.get(COLLECTOR, None)
    if directory is None or collector is None:
        return
    results = [e.to_json() for e in collector.entries.values()]
    session.config.stash[_WRITTEN] = finalize(directory, results)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    written = config.stash.get(_WRITTEN, None)
    if written:
        directory = written[0].parent
        terminalreporter.write_line(
            f"--repro-dir: {len(written)} standalone reproducer{'s' if len(written) != 1 else ''}"
            f" (one per failure group; python FILE re-checks, exit 0 once fixed) in {directory}")
