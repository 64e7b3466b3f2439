"""Running the campaign's stages: each in its own process group, under a wall cap and the
campaign's global deadline, and its result kept in the work folder across calls.

A stage's processes are a process group in the campaign's session, never a new session:
the device tool ends a command's session when the command returns, and a stage in a
session of its own would outlive it. The stage's leader (and, through
``CONFORMANCE_DIE_WITH_PARENT``, its xdist workers) get SIGKILL if their parent dies, so
an outer timeout that kills the campaign takes the stages with it. A stage killed at its
cap has its report written from its journal (what ran keeps its outcome; the rest is
not-run).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from conformance.cli.campaign_stages import ROOT, Stage, bench_command, pytest_command
from conformance.harness.lifetime import DIE_WITH_PARENT_ENV, new_group_dying_with_parent

STATE_FILE = "campaign.json"
# statuses after which a stage is not run again by a later call of the same checkout (not:
# "not run", "waiting for the CuTe DSL", "cut at the deadline")
FINAL = ("ok", "tests failed", "partial (time budget)", "incomplete", "killed at its cap",
         "error")


@dataclass
class StageResult:
    name: str
    window_s: float
    purpose: str
    status: str = "not run"
    why: str = ""  # for a stage not run, or waiting
    call: int = 0  # which call of the campaign ran it
    wall_s: float = 0.0
    returncode: int | None = None
    command: list[str] = field(default_factory=list)
    report: str | None = None  # the stage's report folder, or benchmark JSON
    counts: dict[str, int] = field(default_factory=dict)
    skipped_for_time: int = 0
    log_tail: str = ""

    @classmethod
    def load(cls, data: dict[str, Any]) -> StageResult:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


class Interrupted(Exception):
    """A signal (SIGTERM from an outer timeout, SIGINT, SIGHUP) ended the campaign."""


class Runner:
    """Starts stage process groups and kills the running one at a signal or the deadline."""

    def __init__(self) -> None:
        self.group: int | None = None
        self.signal: str | None = None
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # once: then finish up
            signal.signal(sig, signal.SIG_IGN)
        self.signal = signal.Signals(signum).name
        self.kill()
        raise Interrupted(self.signal)

    def kill(self) -> None:
        if self.group is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.group, signal.SIGKILL)

    def run(self, cmd: list[str], cap_s: float, log: Path) -> tuple[int | None, float]:
        """cmd in its own process group, killed with its group at cap_s: (returncode, or
        None when killed; wall seconds)."""
        env = {**os.environ, "PYTHONUNBUFFERED": "1", DIE_WITH_PARENT_ENV: "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT),
                                                           os.environ.get("PYTHONPATH")]))}
        start = time.monotonic()
        with log.open("w") as fh:
            proc = subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env,
                                    preexec_fn=new_group_dying_with_parent
                                    if sys.platform.startswith("linux") else None)
            self.group = proc.pid
            try:
                rc: int | None = proc.wait(timeout=max(cap_s, 0.1))
            except subprocess.TimeoutExpired:
                rc = None
            finally:
                self.kill()  # the leader's children too, whatever happened
                proc.wait()
                self.group = None
        return rc, time.monotonic() - start


def run_stage(runner: Runner, stage: Stage, work: Path, window: float, cap_s: float,
              dry_run: bool, call: int) -> StageResult:
    res = StageResult(stage.name, window, stage.purpose, call=call)
    log = work / f"{stage.name}.log"
    if stage.bench:
        res.report = str(work / f"{stage.name}.json")
        res.command = bench_command(stage, Path(res.report), window, dry_run)
    else:
        res.report = str(work / stage.name)
        res.command = pytest_command(stage, Path(res.report), window, dry_run)
    rc, res.wall_s = runner.run(res.command, cap_s, log)
    res.returncode = rc
    res.log_tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
    if stage.bench:
        written = Path(res.report).is_file()
        res.status = ("killed at its cap" if rc is None else
                      "ok" if rc == 0 and written else "error")
        if rc is None and written:
            res.why = "the benchmark JSON holds what was measured before the kill"
        return res
    if rc is None:
        res.status = "killed at its cap"
        res.why = rebuild_from_journal(Path(res.report))
    res.counts, res.skipped_for_time = counts(Path(res.report))
    if rc is None:
        pass
    elif not res.counts:
        res.status = "error"
    elif rc in (0, 1):
        res.status = "ok" if rc == 0 else "tests failed"
    elif rc == 2:  # INCOMPLETE: tests not run, for time or otherwise
        res.status = "partial (time budget)" if res.skipped_for_time else "incomplete"
    else:
        res.status = "error"
    return res


def interrupted(stage: Stage, work: Path, window: float, call: int) -> StageResult:
    """The stage that was running when a signal ended the campaign (not final: a later
    call reruns it)."""
    res = StageResult(stage.name, window, stage.purpose, status="interrupted", call=call)
    if not stage.bench:
        res.report = str(work / stage.name)
        res.why = rebuild_from_journal(Path(res.report))
        res.counts, res.skipped_for_time = counts(Path(res.report))
    return res


def rebuild_from_journal(report_dir: Path) -> str:
    """Write a killed stage's report from its journal; returns what happened."""
    from conformance.report.manifest import write_manifest
    from conformance.run.journal import FILE, FOLDER, rebuild

    if not (report_dir / FOLDER / FILE).is_file():
        return "killed before its journal began (start-up or collection)"
    try:
        report = rebuild(report_dir)
        write_manifest(report_dir)
    except Exception as exc:  # a journal cut mid-line; say so rather than stop the campaign
        return f"its journal could not be read: {type(exc).__name__}: {exc}"
    return f"report written from its journal: verdict {report['verdict']}"


def counts(report_dir: Path) -> tuple[dict[str, int], int]:
    path = report_dir / "report.json"
    if not path.is_file():
        return {}, 0
    data = json.loads(path.read_text())
    timed_out = sum(1 for r in data["results"] if r["outcome"] == "not-run"
                    and "time budget spent" in (r.get("reason") or ""))
    return dict(data["summary"]), timed_out


def load_state(work: Path, checkout: str) -> tuple[int, dict[str, StageResult]]:
    """(this call's number, the results of earlier calls of the same checkout)."""
    path = work / STATE_FILE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return 1, {}
    if data.get("checkout") != checkout:
        return 1, {}
    results = {r["name"]: StageResult.load(r) for r in data.get("results", [])}
    return int(data.get("calls", 0)) + 1, results


def save_state(work: Path, checkout: str, call: int, results: dict[str, StageResult]) -> None:
    payload = {"checkout": checkout, "calls": call,
               "results": [asdict(r) for r in results.values()]}
    tmp = work / f".{STATE_FILE}.tmp"
    tmp.write_text(json.dumps(payload, indent=1))
    os.replace(tmp, work / STATE_FILE)
