"""The run's journal: every test report as it happens, so that a run that dies still
gets its report.

With ``--report DIR`` the controller appends to ``DIR/journal/journal.jsonl``, one JSON
line per event, flushed each time: a header (environment and run settings), every phase
report of every test, and "finished" at the end. The test processes write
``DIR/journal/manifest.json`` (the collection) and their crash files next to it
(``watchdog.py``). ``rebuild(DIR)`` turns the folder into the report: the reports are
replayed into a Collector, the test a dead process was running is crashed or timed-out (its
crash file says which, with the stack), and every other collected test without a verdict is
not-run. ``torch-conformance report DIR`` calls it; so does the next run into DIR, which
first moves a dead run's journal to ``DIR/incomplete-run/`` and writes its report there.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from conformance.report import mustpass
from conformance.report.collect import Collector, build_report
from conformance.report.write import write_report
from conformance.run.watchdog import read_crash, read_manifest, read_must_pass

FOLDER = "journal"
FILE = "journal.jsonl"
INCOMPLETE = "incomplete-run"


def _longrepr(report: Any) -> Any:
    if report.skipped and isinstance(report.longrepr, tuple):
        return list(report.longrepr)
    if report.failed:
        return getattr(report, "longreprtext", "") or str(report.longrepr or "")
    return None


def compact(report: Any) -> dict[str, Any]:
    """What the Collector reads from a TestReport, as JSON."""
    worker = getattr(getattr(report, "node", None), "workerid", None)
    out = {"e": "report", "nodeid": report.nodeid, "when": report.when,
           "outcome": report.outcome, "longrepr": _longrepr(report),
           "duration": getattr(report, "duration", 0.0),
           "user_properties": [list(p) for p in getattr(report, "user_properties", ())],
           "worker": worker}
    if hasattr(report, "wasxfail"):
        out["wasxfail"] = report.wasxfail
    return out


@dataclass
class Replayed:
    """A journaled report, with the attributes the Collector reads."""

    nodeid: str
    when: str
    outcome: str
    longrepr: Any = None
    duration: float = 0.0
    user_properties: list[tuple[str, Any]] = field(default_factory=list)
    worker: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, line: dict[str, Any]) -> Replayed:
        rep = cls(line["nodeid"], line["when"], line["outcome"],
                  tuple(line["longrepr"]) if isinstance(line["longrepr"], list)
                  else line["longrepr"], line.get("duration", 0.0),
                  [tuple(p) for p in line.get("user_properties", [])], line.get("worker"))
        if "wasxfail" in line:
            rep.extra["wasxfail"] = line["wasxfail"]
        return rep

    def __getattr__(self, name: str) -> Any:
        if name in ("passed", "failed", "skipped"):
            return self.outcome == name
        if name == "longreprtext":
            return self.longrepr if isinstance(self.longrepr, str) else ""
        if name in self.extra:
            return self.extra[name]
        raise AttributeError(name)


class Journal:
    """The controller's append-only journal (one line per event, flushed)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._fh: TextIO | None = (directory / FILE).open("w", encoding="utf-8")

    def write(self, event: dict[str, Any]) -> None:
        if self._fh is None:
            return
        self._fh.write(json.dumps(event, default=str) + "\n")
        self._fh.flush()

    def report(self, report: Any) -> None:
        self.write(compact(report))

    def close(self, finished: bool = True) -> None:
        if self._fh is not None:
            if finished:
                self.write({"e": "finished"})
            self._fh.close()
            self._fh = None


def _events(directory: Path) -> list[dict[str, Any]]:
    out = []
    for line in (directory / FILE).read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # the last line of a process killed mid-write
            break
    return out


def is_dead(report_dir: Path) -> bool:
    """Whether ``report_dir`` holds the journal of a run that died (never finished, no
    report written from it yet)."""
    path = report_dir / FOLDER / FILE
    if not path.exists():
        return False
    kinds = {e.get("e") for e in _events(report_dir / FOLDER)}
    return not kinds & {"finished", "rebuilt"}


def rebuild(report_dir: Path) -> dict[str, Any]:
    """Write ``report_dir``'s report from its journal (see the module's docstring)."""
    folder = report_dir / FOLDER
    events = _events(folder)
    header = next((e for e in events if e.get("e") == "header"), {})
    finished = any(e.get("e") == "finished" for e in events)
    collector = Collector()
    collector.collected = read_manifest(folder)
    for event in events:
        if event.get("e") == "report":
            collector.add(Replayed.of(event))
    why = "interrupted" if finished else "the run died before it started them"
    if not finished:
        for path in sorted(folder.glob("crash-*.txt")):
            crash = read_crash(path)
            if crash is None:
                continue
            entry = collector.entries.get(crash["nodeid"])
            if entry is not None and entry.outcome not in ("pending", "not-run"):
                continue  # that test had its verdict: the process died between tests
            if entry is None:
                meta = collector.collected.get(crash["nodeid"])
                if meta is None:
                    continue
                collector.add(Replayed(crash["nodeid"], "setup", "passed",
                                       user_properties=[("conformance_meta", meta)]))
                entry = collector.entries[crash["nodeid"]]
            entry.outcome, entry.reason, entry.stack = (crash["outcome"], crash["reason"],
                                                        crash["stack"])
    collector.finalize(why)
    report = build_report(collector, header.get("environment", {}), header.get("run", {}))
    mustpass.judge(report, read_must_pass(folder) or {})
    report["exit_status"] = header.get("exit_status")
    report["journal"] = {"finished": finished, "rebuilt": True, "folder": str(folder)}
    write_report(report_dir, report)
    with (folder / FILE).open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"e": "rebuilt", "verdict": report["verdict"]}) + "\n")
    return report


def recover(report_dir: Path) -> Path | None:
    """Before a new run into ``report_dir``: a dead run's journal moves to
    ``report_dir/incomplete-run`` and gets its report there; returns that folder."""
    if not is_dead(report_dir):
        if (report_dir / FOLDER).exists():
            shutil.rmtree(report_dir / FOLDER)  # a finished run's: the new run's replaces it
        return None
    target = report_dir / INCOMPLETE
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    shutil.move(str(report_dir / FOLDER), str(target / FOLDER))
    rebuild(target)
    return target
