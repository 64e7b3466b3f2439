"""Outcome accounting and the report: JSON (versioned schema), Markdown summary.

Works the same with and without xdist: the controller sees every worker's TestReport in
``pytest_runtest_logreport``; each carries the test's record as a user property, so the
controller alone builds the report (JUnit XML comes from pytest's own junitxml plugin).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance import REPORT_SCHEMA_VERSION, __version__
from conformance.outcomes import SKIPPED_TAG, UNSUPPORTED_TAG
from conformance.report_tables import (
    BULKY_NOTES,
    export_table,
    graphs_table,
    indexing_table,
    times_table,
)

OUTCOMES = (
    "passed", "failed", "error", "expected-fail", "unexpected-pass", "unsupported", "skipped",
)
META_KEY = "conformance_meta"
RECORD_KEY = "conformance_record"
REASON_KEY = "conformance_reason"  # a failure's one-line reason, when the harness set it


def _skip_reason(report: Any) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr or "")


def _failure_text(report: Any) -> str:
    text = getattr(report, "longreprtext", "") or str(report.longrepr or "")
    for line in text.splitlines():
        if line.startswith("E "):
            return line[2:].strip().removeprefix("conformance.expectations.CheckFailure: ")
    return text.strip().splitlines()[-1] if text.strip() else "failed"


def classify(report: Any) -> tuple[str, str] | None:
    """(outcome, reason) concluded from one phase's TestReport, or None if it concludes
    nothing (a passing setup or teardown)."""
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
        return "skipped", reason.removeprefix(SKIPPED_TAG).strip()
    if report.failed:
        return "error", f"{report.when}: {_failure_text(report)}"
    return None


def _user_property(report: Any, key: str) -> Any:
    for name, value in getattr(report, "user_properties", ()):
        if name == key:
            decode = key in (META_KEY, RECORD_KEY) and isinstance(value, str)
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
            "notes": (self.record or {}).get("notes", {}),
            "tolerance_factor": (self.record or {}).get("tolerance_factor", 1.0),
            "reproduce": (self.record or {}).get("reproduce") or self.meta.get("reproduce"),
            "repro_script": (self.record or {}).get("repro_script"),
        }


_PRECEDENCE = {"error": 3, "failed": 2, "unexpected-pass": 2}
RAN = ("passed", "failed", "error", "expected-fail", "unexpected-pass")


def _generic(reason: str) -> str:
    """A reason without the case-specific part, to group cases that did not run."""
    return reason.split(" (", 1)[0] if reason.startswith("implementation ") else reason


@dataclass
class Collector:
    entries: dict[str, Entry] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def add(self, report: Any) -> None:
        meta = _user_property(report, META_KEY)
        if meta is None:
            return  # not a conformance test
        verdict = classify(report)
        entry = self.entries.get(report.nodeid)
        if entry is None:
            if verdict is None:
                verdict = ("passed", "")  # provisional until the call phase reports
            entry = Entry(report.nodeid, *verdict, meta=meta)
            self.entries[report.nodeid] = entry
        elif verdict is not None and (
            report.when == "call"
            or _PRECEDENCE.get(verdict[0], 0) > _PRECEDENCE.get(entry.outcome, 0)
        ):
            entry.outcome, entry.reason = verdict
        entry.duration += float(getattr(report, "duration", 0.0) or 0.0)
        record = _user_property(report, RECORD_KEY)
        if record is not None:
            entry.record = record
        worker = getattr(getattr(report, "node", None), "workerid", None)
        entry.worker = worker or _user_property(report, "conformance_worker") or entry.worker

    def counts(self) -> dict[str, int]:
        c = Counter(e.outcome for e in self.entries.values())
        return {o: c.get(o, 0) for o in OUTCOMES}

    def by_area(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per area and implementation: counts per outcome, how many ran, why the rest did
        not (reason -> count, most frequent first) and the worst margin."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for e in self.entries.values():
            row = out.setdefault(e.meta.get("area") or "-", {}).setdefault(
                e.meta.get("impl") or "-",
                {**{o: 0 for o in OUTCOMES}, "ran": 0, "not_run": {}, "worst_margin": None})
            row[e.outcome] += 1
            if e.outcome in RAN:
                row["ran"] += 1
            else:
                key = f"{e.outcome}: {_generic(e.reason)}"
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
    out = []
    for entry in entries:
        entry["tests"] = uses.get(entry["entry"], 0)
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
    to_narrow = _count_entry_uses(run.get("matrix_entries", []),
                                  list(collector.entries.values()))
    collector.warnings.extend(w for w in to_narrow if w not in collector.warnings)
    _observed_dsa(environment, collector)
    return {
        "schema": "torch-conformance-report",
        "schema_version": REPORT_SCHEMA_VERSION,
        "tool_version": __version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "run": run,
        "environment": environment,
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


def _margin(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _grouped_by_reason(rows: list[dict[str, Any]]) -> list[str]:
    """One line per (area, implementation, reason) with a count and an example test."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for r in rows:
        groups.setdefault((r["area"], r["impl"] or "-", r["reason"]), []).append(r["nodeid"])
    lines = ["| area | implementation | tests | reason | e.g. |", "|---|---|---|---|---|"]
    for (area, impl, reason), ids in sorted(groups.items()):
        example = ids[0].split("::", 1)[-1]
        cell = reason.replace("|", "\\|")
        lines.append(f"| {area} | `{impl}` | {len(ids)} | {cell} | `{example}` |")
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    env, run = report["environment"], report["run"]
    dev = env["device"]
    lines = [
        "# torch-conformance report",
        "",
        f"- device: **{dev['torch_device']}** ({dev['name']}; matrix key `{dev['matrix_key']}`)",
        f"- torch {env['torch']}, CUDA {env['cuda']}, HIP {env['hip']}, "
        f"Python {env['python']}, BLAS {env['blas'].get('BLAS_INFO', '?')}",
        f"- profile `{run['profile']}`, seed {run['seed']}, matrix `{run['matrix']}`",
        "- device-side assertions: " + ", ".join(
            f"{k}={v}" for k, v in (env.get("device_side_assertions") or {}).items()),
        "- matmul settings: " + ", ".join(f"{k}={v}" for k, v in
                                           env.get("matmul_settings", {}).items()),
        f"- created {report['created']}, command: `{run['command']}`",
        "",
        "## Summary",
        "",
        "| " + " | ".join(OUTCOMES) + " |",
        "|" + "---|" * len(OUTCOMES),
        "| " + " | ".join(str(report["summary"][o]) for o in OUTCOMES) + " |",
        "",
        "Margin = worst measured error / bound over the bounded checks (< 1 passes); expected",
        "failures are left out of it.",
        "",
        "## By area and implementation",
        "",
        "| area | implementation | passed | failed | error | xfail | xpass | unsupported "
        "| skipped | worst margin |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for area, impls in sorted(report["areas"].items()):
        for impl, row in sorted(impls.items()):
            lines.append(
                f"| {area} | `{impl}` | {row['passed']} | {row['failed']} | {row['error']} | "
                f"{row['expected-fail']} | {row['unexpected-pass']} | {row['unsupported']} | "
                f"{row['skipped']} | {_margin(row['worst_margin'])} |"
            )
    sections = [
        ("Failures", ("failed", "error", "unexpected-pass")),
        ("Expected failures", ("expected-fail",)),
        ("Unsupported (by design)", ("unsupported",)),
        ("Skipped (missing hardware or package)", ("skipped",)),
    ]
    for title, outcomes in sections:
        rows = [r for r in report["results"] if r["outcome"] in outcomes]
        if not rows:
            continue
        lines += ["", f"## {title} ({len(rows)})", ""]
        if outcomes[0] in ("unsupported", "skipped"):
            lines += _grouped_by_reason(rows)
            continue
        for r in rows[:200]:
            lines.append(f"- `{r['nodeid']}`: {r['reason']}")
            if r["outcome"] in ("failed", "error") and r.get("reproduce"):
                lines.append(f"  - reproduce: `{r['reproduce']}`")
            if r.get("repro_script"):
                lines.append(f"  - standalone reproducer: `{r['repro_script']}`")
        if len(rows) > 200:
            lines.append(f"- ... and {len(rows) - 200} more (see report.json)")
    entries = report["run"].get("matrix_entries") or []
    if entries:
        narrow = [m for m in entries if m.get("fixed_in")]
        if narrow:
            lines += ["", f"## Matrix entries to narrow ({len(narrow)})", "",
                      "Expected failures whose tests passed on a release newer than every "
                      "release they were measured failing on: counted as passed (the checks "
                      "ran and held), listed here so the entry is narrowed.", "",
                      "| entry | area | tests passed | fixed in? | narrow its versions to |",
                      "|---|---|---|---|---|"]
            lines += [f"| {m['entry']} | {m['area']} | {m['fixed_tests']} of {m['tests']} | "
                      f"{m['fixed_in']} | `{m['narrow_to']}` |" for m in narrow]
        lines += ["", "## Matrix entries", "",
                  "| entry | area | versions | measured on | applies here | tests | reason |",
                  "|---|---|---|---|---|---|---|"]
        for m in entries:
            here = "yes" if m["applies"] else f"no: {m['why_not']}"
            if m["applies"] and m.get("beyond_measured"):
                here += f" (not measured: {m['beyond_measured']})"
            reason = m["reason"].replace("|", "\\|")
            seen = "; ".join(f"{d} {', '.join(r)}" for d, r in (m.get("measured") or {}).items())
            lines.append(f"| {m['entry']} | {m['area']} | {m['versions'] or '-'} | "
                         f"{seen or '-'} | {here} | {m.get('tests', '-')} | {reason} |")
    lines += indexing_table(report["results"])
    lines += export_table(report["results"])
    lines += graphs_table(report["results"])
    lines += times_table(report)
    noted = [r for r in report["results"]
             if {k: v for k, v in r["notes"].items() if k not in BULKY_NOTES}]
    if noted:
        lines += ["", "## Notes recorded by checks", ""]
        seen: set[str] = set()
        for r in noted:
            text = ", ".join(f"{k}: {v}" for k, v in sorted(r["notes"].items())
                             if k not in BULKY_NOTES)
            line = f"- {r['area']} / `{r['impl']}` / {r['dtype']}: {text}"
            if line not in seen:
                seen.add(line)
                lines.append(line)
    if report["warnings"]:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in report["warnings"]]
    return "\n".join(lines) + "\n"


def _strict_json(value: Any) -> Any:
    """JSON has no infinities or NaN: write them as the strings "inf", "-inf", "nan"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict_json(v) for v in value]
    return value


def _dumps(report: dict[str, Any]) -> str:
    """Indented JSON with one result per line: readable and diffable, and written by json's
    C encoder for the bulk (indenting all of a large run's results took seconds)."""
    head = {k: v for k, v in report.items() if k != "results"}
    text = json.dumps(head, indent=1, allow_nan=False, default=str)
    if "results" not in report:
        return text
    rows = ",\n  ".join(json.dumps(r, allow_nan=False, default=str) for r in report["results"])
    body = f'"results": [\n  {rows}\n ]' if rows else '"results": []'
    return (text[:-2] + ",\n " if head else "{\n ") + body + "\n}"


def write_report(directory: Path, report: dict[str, Any],
                 plots: dict[str, str] | None = None) -> list[Path]:
    """report.json, summary.md and report.html (``plots``: its margin plots, if drawn
    already)."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "report.json"
    json_path.write_text(_dumps(_strict_json(report)) + "\n", encoding="utf-8")
    md_path = directory / "summary.md"
    md_path.write_text(render_markdown(report), encoding="utf-8")
    from conformance.html_report import render_html

    html_path = directory / "report.html"
    html_path.write_text(render_html(report, plots), encoding="utf-8")
    return [json_path, md_path, html_path]
