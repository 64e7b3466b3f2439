"""Outcome accounting: every test's verdict, and the report's content (versioned schema).

Works the same with and without xdist: the controller sees every worker's TestReport in
``pytest_runtest_logreport``; each carries the test's record as a user property, so the
controller alone builds the report (JUnit XML comes from pytest's own junitxml plugin).
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance import REPORT_SCHEMA_VERSION
from conformance.harness.outcomes import (
    NOT_RUN_TAG,
    OUTCOMES,
    RAN_OUTCOMES,
    SKIPPED_TAG,
    UNSUPPORTED_TAG,
    verdict,
)
from conformance.report.suite import identity

META_KEY = "conformance_meta"
RECORD_KEY = "conformance_record"
REASON_KEY = "conformance_reason"  # a failure's one-line reason, when the harness set it
CRASH_KEY = "conformance_crash"  # a dead process: {"outcome", "reason", "stack"}
PENDING = "pending"  # a test whose setup reported but whose verdict has not come (yet)


def _skip_reason(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "")


def _failure_text(report: Any) -> str:
    text = getattr(report, "longreprtext", "") or str(report.longrepr or "")
    for line in text.splitlines():
        if line.startswith("E "):
            return line[2:].strip().removeprefix("conformance.harness.expectations.CheckFailure: ")
    return text.strip().splitlines()[-1] if text.strip() else "failed"


def classify(report: Any) -> tuple[str, str] | None:
    """(outcome, reason) concluded from one phase's TestReport, or None if it concludes
    nothing (a passing setup or teardown)."""
    crash = _user_property(report, CRASH_KEY)
    if crash is not None:
        return crash["outcome"], crash["reason"]
    if report.when not in ("setup", "call", "teardown") and report.failed:
        return "crashed", _failure_text(report)  # xdist's report of a lost worker
    wasxfail = getattr(report, "wasxfail", None)
    if report.when == "call":
        if report.passed:
            if wasxfail is not None:
                return "unexpected-pass", str(wasxfail)
            return "passed", _user_property(report, REASON_KEY) or ""  # "fixed in X?"
        if report.skipped and wasxfail is not None:
            return "expected-fail", str(wasxfail)
        if report.failed:
            wrong = _user_property(report, REASON_KEY)
            return "failed", wrong or _failure_text(report)
    if report.skipped:
        if wasxfail is not None:
            return "expected-fail", str(wasxfail)
        reason = _skip_reason(report)
        if reason.startswith(UNSUPPORTED_TAG):
            return "unsupported", reason[len(UNSUPPORTED_TAG):].strip()
        if reason.startswith(NOT_RUN_TAG):
            return "not-run", reason[len(NOT_RUN_TAG):].strip()
        return "skipped", reason.removeprefix(SKIPPED_TAG).strip()
    if report.failed:
        return "error", f"{report.when}: {_failure_text(report)}"
    return None


def _user_property(report: Any, key: str) -> Any:
    for name, value in getattr(report, "user_properties", ()):
        if name == key:
            decode = key in (META_KEY, RECORD_KEY, CRASH_KEY) and isinstance(value, str)
            return json.loads(value) if decode else value
    return None


@dataclass
class Entry:
    nodeid: str
    outcome: str
    reason: str
    meta: dict[str, Any]
    duration: float = 0.0
    record: dict[str, Any] | None = None
    worker: str | None = None
    stack: str | None = None  # a crashed or timed-out test's stack (faulthandler's dump)

    def to_json(self) -> dict[str, Any]:
        checks = (self.record or {}).get("checks", [])
        margins = [c["margin"] for c in checks if c.get("margin") is not None]
        return {
            "nodeid": self.nodeid,
            "area": self.meta.get("area"),
            "impl": self.meta.get("impl"),
            "device": self.meta.get("device"),
            "dtype": self.meta.get("dtype"),
            "params": self.meta.get("params", {}),
            "outcome": self.outcome,
            "reason": self.reason,
            "matrix_entries": self.meta.get("matrix_entries") or [],
            "worst_margin": max(margins) if margins else None,
            "duration_s": round(self.duration, 4),
            "worker": self.worker,
            "checks": checks,
            "notes": {**(self.record or {}).get("notes", {}),
                      **({"stack": self.stack} if self.stack else {})},
            "tolerance_factor": (self.record or {}).get("tolerance_factor", 1.0),
            "reproduce": (self.record or {}).get("reproduce") or self.meta.get("reproduce"),
            "repro_script": (self.record or {}).get("repro_script"),
        }


_PRECEDENCE = {"crashed": 4, "timed-out": 4, "error": 3, "failed": 2, "unexpected-pass": 2}
RAN = RAN_OUTCOMES


def _generic(reason: str) -> str:
    """A reason without the case-specific part, to group cases that did not run."""
    return reason.split(" (", 1)[0] if reason.startswith("implementation ") else reason


@dataclass
class Collector:
    """Every conformance test's outcome, from its phases' reports. ``collected`` (test id ->
    metadata) is the run's collection: ``finalize`` gives each collected test that has no
    verdict the outcome not-run, so that every collected test ends with exactly one."""

    entries: dict[str, Entry] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    collected: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, report: Any) -> None:
        entry = self.entries.get(report.nodeid)
        meta = _user_property(report, META_KEY)
        if meta is None:  # a lost worker's report carries none: the test's own, if known
            meta = entry.meta if entry is not None else self.collected.get(report.nodeid)
        if meta is None:
            return  # not a conformance test
        verdict = classify(report)
        if entry is None:
            entry = Entry(report.nodeid, *(verdict or (PENDING, "")), meta=meta)
            self.entries[report.nodeid] = entry
        elif verdict is not None and (
            (report.when == "call" and entry.outcome not in ("crashed", "timed-out"))
            or _PRECEDENCE.get(verdict[0], 0) > _PRECEDENCE.get(entry.outcome, 0)
            or entry.outcome == PENDING
        ):
            entry.outcome, entry.reason = verdict
        crash = _user_property(report, CRASH_KEY)
        if crash is not None and crash.get("stack"):
            entry.stack = crash["stack"]
        entry.duration += float(getattr(report, "duration", 0.0) or 0.0)
        record = _user_property(report, RECORD_KEY)
        if record is not None:
            entry.record = record
        worker = getattr(getattr(report, "node", None), "workerid", None)
        entry.worker = worker or _user_property(report, "conformance_worker") or entry.worker

    def finalize(self, why: str) -> int:
        """Every collected test without a verdict becomes not-run (``why``: interrupted,
        past the time budget, the run died); returns how many."""
        n = 0
        for nodeid, meta in self.collected.items():
            if nodeid not in self.entries:
                self.entries[nodeid] = Entry(nodeid, "not-run", why, meta=meta)
                n += 1
        for e in self.entries.values():
            if e.outcome == PENDING:
                e.outcome, e.reason = "not-run", f"started, never finished: {why}"
                n += 1
        return n

    def counts(self) -> dict[str, int]:
        c = Counter("not-run" if e.outcome == PENDING else e.outcome
                    for e in self.entries.values())
        return {o: c.get(o, 0) for o in OUTCOMES}

    def by_area(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per area and implementation: counts per outcome, how many ran, why the rest did
        not (reason -> count, most frequent first) and the worst margin."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for e in self.entries.values():
            row = out.setdefault(e.meta.get("area") or "-", {}).setdefault(
                e.meta.get("impl") or "-",
                {**{o: 0 for o in OUTCOMES}, "ran": 0, "not_run": {}, "worst_margin": None})
            outcome = "not-run" if e.outcome == PENDING else e.outcome
            row[outcome] += 1
            if outcome in RAN:
                row["ran"] += 1
            else:
                key = f"{outcome}: {_generic(e.reason)}"
                row["not_run"][key] = row["not_run"].get(key, 0) + 1
            margin = e.to_json()["worst_margin"]
            if e.outcome == "expected-fail" or margin is None:
                continue  # known failures do not set the margin of what passes
            if row["worst_margin"] is None or margin > row["worst_margin"]:
                row["worst_margin"] = margin
        for impls in out.values():
            for row in impls.values():
                row["not_run"] = dict(sorted(row["not_run"].items(), key=lambda kv: -kv[1]))
        return out


_ENTRY_IN_REASON = re.compile(r"matrix ([a-z_]+\[\d+\]):")
# a pass under an expected failure measured on older releases only (plugin.fixed_in_note)
_FIXED = re.compile(r"fixed in (\S+) (\S+)\? matrix ([a-z_]+\[\d+\]): measured failing on "
                    r"\S+ up to \S+; narrow its versions to ([^;\s]+)")


# a pass under a strict expected failure in a build without the bug (verdicts.not_present_note)
NOT_PRESENT = re.compile(r"bug not present in this build: matrix ([a-z_]+\[\d+\])")


def entries_to_narrow(results: Iterable[Entry]) -> dict[str, tuple[str, str, int]]:
    """Expected failures that passed past their measured releases: label -> (the release,
    e.g. "torch 2.15.0", the gate to narrow the entry to, how many of its tests passed)."""
    fixed: dict[str, tuple[str, str, int]] = {}
    for e in results:
        if e.outcome != "passed":
            continue
        for dist, release, label, gate in _FIXED.findall(e.reason):
            old = fixed.get(label, (f"{dist} {release}", gate, 0))
            fixed[label] = (old[0], old[1], old[2] + 1)
    return fixed


def _count_entry_uses(entries: list[dict[str, Any]], results: list[Entry]) -> list[str]:
    """Set, per matrix entry, how many tests it decided (by label in the test's meta, or
    for capability entries by the reason they gave), and for an expected failure that
    passed past its measured releases the release that seems to fix it and the gate to
    narrow it to; one pass over the results. Returns one warning per such entry."""
    uses: dict[str, int] = {}
    for e in results:
        labels = set(e.meta.get("matrix_entries") or ()) | set(_ENTRY_IN_REASON.findall(e.reason))
        for label in labels:
            uses[label] = uses.get(label, 0) + 1
    fixed = entries_to_narrow(results)
    absent: dict[str, int] = {}
    for e in results:
        if e.outcome == "passed":
            for label in set(NOT_PRESENT.findall(e.reason)):
                absent[label] = absent.get(label, 0) + 1
    out = []
    for entry in entries:
        entry["tests"] = uses.get(entry["entry"], 0)
        if entry["entry"] in absent:
            entry["not_present_tests"] = absent[entry["entry"]]
        if entry["entry"] in fixed:
            release, gate, n = fixed[entry["entry"]]
            entry.update(fixed_in=release, narrow_to=gate, fixed_tests=n)
            out.append(f"matrix {entry['entry']} (area {entry['area']}): {n} of its "
                       f"{entry['tests']} tests passed on {release}, newer than the releases it "
                       f"was measured failing on: fixed in {release}? narrow its versions to "
                       f"{gate}")
    return out


def build_report(
    collector: Collector, environment: dict[str, Any], run: dict[str, Any]
) -> dict[str, Any]:
    """The report of a finished (or finalized) collection. Its ``verdict`` is the counts'
    (``outcomes.verdict``, ``run["allow_partial"]``); the caller may make it FAIL (a vacuous
    run) and sets ``exit_status``."""
    to_narrow = _count_entry_uses(run.get("matrix_entries", []),
                                  list(collector.entries.values()))
    collector.warnings.extend(w for w in to_narrow if w not in collector.warnings)
    _observed_dsa(environment, collector)
    return {
        "schema": "torch-conformance-report",
        "schema_version": REPORT_SCHEMA_VERSION,
        "tool_version": identity()["version"],
        "suite": identity(),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "run": run,
        "environment": environment,
        "collected": len(collector.entries),
        "verdict": verdict(collector.counts(), bool(run.get("allow_partial"))),
        "exit_status": None,
        "summary": collector.counts(),
        "areas": collector.by_area(),
        "warnings": list(collector.warnings),
        "results": [e.to_json() for e in sorted(collector.entries.values(),
                                                key=lambda e: e.nodeid)],
    }


def _observed_dsa(environment: dict[str, Any], collector: Collector) -> None:
    """The DSA mode the device_assert area's messages revealed, into the environment."""
    dsa = environment.get("device_side_assertions")
    if dsa is None:
        return
    modes = sorted({m for e in collector.entries.values() if e.meta.get("area") == "device_assert"
                    and (m := ((e.record or {}).get("notes") or {}).get("dsa_mode"))})
    if modes:
        dsa["observed"] = ", ".join(modes)
