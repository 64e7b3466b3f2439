"""pytest integration of ``conformance.processes.isolate``: the ``isolated`` fixture and marker, the
``--isolation`` option, and the shutdown of the warm children at the end of the run.

Loaded by ``conformance.plugin`` (its ``pytest_plugins``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from conformance.processes.isolate import Outcome, foreground_command, run_inprocess, run_isolated
from conformance.processes.isolate import shutdown as shutdown_children
from conformance.run.keys import ITEM_RECORD

DEFAULT_TIMEOUT = 30.0
TAIL_LINES = 20


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("torch-conformance")
    group.addoption("--isolation", dest="conformance_isolation", default="child",
                    choices=("child", "inprocess"),
                    help="how the isolated fixture runs its cases: child (default: a warm "
                         "child process per device) or inprocess (in the test process, "
                         "for debugging; a crash then ends the run)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "isolated(timeout=30, env=None): defaults of the test's isolated cases "
                   "(the isolated fixture): timeout in seconds, environment of the child")


def pytest_unconfigure(config: pytest.Config) -> None:
    from conformance.processes.ranks import shutdown as shutdown_ranks

    shutdown_ranks()
    shutdown_children()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Rank pools stop when their area's last test ends (the next test is in another
    folder): W idle rank processes per world size would otherwise hold memory and device
    contexts while the other areas run (the scheduler keeps an area's tests together)."""
    from conformance.processes import ranks

    if ranks.running() and (nextitem is None or nextitem.path.parent != item.path.parent):
        ranks.shutdown()


class Isolated:
    """``isolated(fn, *args, timeout=None, env=None, **kwargs) -> Outcome``: run a case in a
    child process on the run's device; ``explain()`` gives a failure message's tail."""

    def __init__(self, device: str, mode: str, timeout: float, env: dict[str, str],
                 note: Callable[[list[dict[str, Any]]], None]) -> None:
        self.device, self.mode = device, mode
        self.timeout, self.env = timeout, env
        self._note = note
        self.calls: list[tuple[Outcome, str | None]] = []
        self._notes: list[dict[str, Any]] = []  # each call's note, made once

    def __call__(self, fn: Callable[..., Any] | str, *args: Any, timeout: float | None = None,
                 env: dict[str, str] | None = None, hide: tuple[str, ...] = (),
                 **kwargs: Any) -> Outcome:
        """``hide``: keyword arguments left out of the foreground command (a temporary
        folder the case is given, say)."""
        env = {**self.env, **(env or {})}
        if self.mode == "inprocess":  # env cannot apply: torch is imported already
            outcome = run_inprocess(fn, *args, **kwargs)
        else:
            outcome = run_isolated(fn, *args, device=self.device,
                                   timeout=self.timeout if timeout is None else timeout,
                                   env=env, **kwargs)
        shown = {k: v for k, v in kwargs.items() if k not in hide}
        command = foreground_command(fn, args, shown, self.device, env)
        self.calls.append((outcome, command))
        self._notes.append({**outcome.to_json(), "foreground": command})
        self._note(self._notes)
        return outcome

    @property
    def outcomes(self) -> list[Outcome]:
        return [o for o, _ in self.calls]

    def command(self, outcome: Outcome | None = None) -> str | None:
        """The foreground command of ``outcome`` (default: the last case)."""
        for o, c in reversed(self.calls):
            if outcome is None or o is outcome:
                return c
        return None

    def explain(self, outcome: Outcome | None = None) -> str:
        """describe(), the stderr tail (last lines) and the command that reruns the case."""
        if outcome is None:
            if not self.calls:
                return "no isolated case ran"
            outcome = self.calls[-1][0]
        lines = [outcome.describe()]
        tail = outcome.stderr_tail.rstrip("\n").splitlines()[-TAIL_LINES:]
        if tail:
            lines.append(f"stderr (last {len(tail)} lines):")
            lines.extend(f"  {line}" for line in tail)
        command = self.command(outcome)
        lines.append(f"rerun in the foreground: {command}" if command else
                     "rerun in the foreground: (the arguments are not literals)")
        return "\n".join(lines)


@pytest.fixture
def isolated(request: pytest.FixtureRequest, device: torch.device) -> Isolated:
    """Run cases in a child process: ``outcome = isolated(fn, *args, **kwargs)``.
    Defaults from ``@pytest.mark.isolated(timeout=..., env=...)``; outcomes go to the
    test's Record notes (``isolated``) when the test uses ``record``."""
    marker = request.node.get_closest_marker("isolated")
    options: dict[str, Any] = dict(marker.kwargs) if marker else {}
    if marker and marker.args:
        options.setdefault("timeout", marker.args[0])
    unknown = set(options) - {"timeout", "env"}
    if unknown:
        raise pytest.UsageError(f"{request.node.nodeid}: @pytest.mark.isolated takes timeout "
                                f"and env, not {sorted(unknown)}")
    timeout = float(options.get("timeout") or DEFAULT_TIMEOUT)
    env = {str(k): str(v) for k, v in (options.get("env") or {}).items()}

    def note(outcomes: list[dict[str, Any]]) -> None:
        rec = request.node.stash.get(ITEM_RECORD, None)
        if rec is not None:
            rec.note(isolated=outcomes)

    mode = request.config.getoption("conformance_isolation")
    return Isolated(str(device), mode, timeout, env, note)
