"""``torch-conformance diff OLD NEW``: what changed between two reports.

First the settings (``report/settings.py``: suite version and commit, matrix, profile,
seed, device, torch and driver, every implementation's ``module:attr``): a change there
means the two runs are not like with like, exit status 1 unless ``--ignore-settings``.
Then regressions (exit 1): a test that fails, errors, crashes, times out or passes
unexpectedly in NEW but did not in OLD (a new test that fails counts); coverage lost (exit
1 unless ``--allow-coverage-loss``): a test that ran in OLD and did not run in NEW (skipped,
unsupported, not-run or absent). Reported besides: fixed tests, tests that pass where the
matrix expects a known bug ("bug not present in this build"), every other outcome change,
margins that moved by more than a factor (``--fail-on-margin``), tests that appeared or
disappeared, and the rest of the environment's differences.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.harness.outcomes import BAD_OUTCOMES, RAN_OUTCOMES
from conformance.report.collect import NOT_PRESENT
from conformance.report.consistency import check_report
from conformance.report.plots import as_margin
from conformance.report.settings import changed

BAD = BAD_OUTCOMES
MARGIN_FLOOR = 1e-3  # margins below this on both sides are noise-level: never "moved"


class ReportError(ValueError):
    """A path that is not a report (a usage error: one line, exit 4)."""


def load_report(path: str | Path) -> dict[str, Any]:
    """A report from its directory or its report.json."""
    p = Path(path)
    if p.is_dir():
        p = p / "report.json"
    if not p.is_file():
        raise ReportError(f"{path}: no report.json there")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ReportError(f"{p}: not a readable report ({type(exc).__name__})") from None
    if not isinstance(data, dict) or data.get("schema") != "torch-conformance-report":
        raise ReportError(f"{p}: not a torch-conformance report")
    return data


def _flatten(value: Any, prefix: str = "") -> dict[str, str]:
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    return {prefix.rstrip("."): json.dumps(value) if isinstance(value, list) else str(value)}


def _margins(result: dict[str, Any]) -> dict[str, float]:
    out = {}
    for c in result.get("checks") or ():
        m = as_margin(c.get("margin"))
        if m is not None:
            out[c["name"]] = max(out.get(c["name"], m), m)
    return out


@dataclass
class Diff:
    old: str
    new: str
    factor: float
    regressions: list[dict[str, Any]] = field(default_factory=list)
    fixed: list[dict[str, Any]] = field(default_factory=list)
    bugs_absent: list[dict[str, Any]] = field(default_factory=list)  # known bug, not in NEW
    changed: list[dict[str, Any]] = field(default_factory=list)
    coverage_lost: list[dict[str, Any]] = field(default_factory=list)
    margins: list[dict[str, Any]] = field(default_factory=list)
    appeared: list[str] = field(default_factory=list)
    disappeared: list[str] = field(default_factory=list)
    environment: list[tuple[str, str, str]] = field(default_factory=list)
    settings: list[tuple[str, str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # an input that does not add up

    def failing(self, coverage: bool = True, margin: bool = False,
                settings: bool = True) -> bool:
        worse = [m for m in self.margins if m["ratio"] > 1]
        return bool(self.regressions or self.problems or (coverage and self.coverage_lost)
                    or (margin and worse) or (settings and self.settings))

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def diff_reports(old: dict[str, Any], new: dict[str, Any], *, factor: float = 2.0,
                 old_name: str = "OLD", new_name: str = "NEW") -> Diff:
    d = Diff(old_name, new_name, factor)
    d.problems = [f"{name}: {p}" for name, rep in ((old_name, old), (new_name, new))
                  for p in check_report(rep)]
    before = {r["nodeid"]: r for r in old["results"]}
    after = {r["nodeid"]: r for r in new["results"]}
    for nodeid, r in sorted(after.items()):
        o = before.get(nodeid)
        row = {"nodeid": nodeid, "area": r["area"], "old": o["outcome"] if o else None,
               "new": r["outcome"], "reason": r["reason"], "reproduce": r.get("reproduce")}
        if o is None:
            d.appeared.append(nodeid)
            if r["outcome"] in BAD:
                d.regressions.append(row)
            continue
        if r["outcome"] in BAD and o["outcome"] not in BAD:
            d.regressions.append(row)
        elif _absent_bug(r) and not _absent_bug(o):
            d.bugs_absent.append(row)
        elif o["outcome"] in BAD and r["outcome"] not in BAD:
            d.fixed.append(row)
        elif o["outcome"] != r["outcome"]:
            (d.coverage_lost if o["outcome"] in RAN_OUTCOMES and r["outcome"] not in RAN_OUTCOMES
             else d.changed).append(row)
        if o["outcome"] == r["outcome"] == "passed":
            d.margins += _moved(nodeid, _margins(o), _margins(r), factor)
    for nodeid, o in sorted(before.items()):
        if nodeid not in after:
            d.disappeared.append(nodeid)
            if o["outcome"] in RAN_OUTCOMES:
                d.coverage_lost.append({"nodeid": nodeid, "area": o["area"], "old": o["outcome"],
                                        "new": None, "reason": "not in NEW",
                                        "reproduce": o.get("reproduce")})
    d.margins.sort(key=lambda m: -abs(_log(m["ratio"])))
    d.settings = changed(old, new)
    shown = {"torch", "cuda", "hip", "cuda_driver", "tool_version"}
    env_old = _flatten({**old["environment"], "tool_version": old.get("tool_version")})
    env_new = _flatten({**new["environment"], "tool_version": new.get("tool_version")})
    for key in sorted(set(env_old) | set(env_new)):
        if env_old.get(key) != env_new.get(key) and key not in shown:
            d.environment.append((key, env_old.get(key, "-"), env_new.get(key, "-")))
    return d


def _absent_bug(result: dict[str, Any]) -> bool:
    """A pass where the matrix expects a known bug's failure (--stale-entries=report)."""
    return result["outcome"] == "passed" and NOT_PRESENT.search(result.get("reason") or "") \
        is not None


def _log(x: float) -> float:
    import math

    return math.log(x) if 0 < x < float("inf") else float("inf")


def _moved(nodeid: str, old: dict[str, float], new: dict[str, float],
           factor: float) -> list[dict[str, Any]]:
    out = []
    for name in sorted(set(old) & set(new)):
        a, b = old[name], new[name]
        if max(a, b) < MARGIN_FLOOR:
            continue
        ratio = max(b, MARGIN_FLOOR) / max(a, MARGIN_FLOOR)
        if ratio > factor or ratio < 1 / factor:
            out.append({"nodeid": nodeid, "check": name, "old": a, "new": b, "ratio": ratio})
    return out


def _rows(d: Diff) -> list[tuple[str, list[dict[str, Any]]]]:
    return [("Regressions", d.regressions), ("Fixed", d.fixed),
            ("Known bugs not present in NEW", d.bugs_absent),
            ("Coverage lost", d.coverage_lost), ("Other outcome changes", d.changed)]


def verdict_of(d: Diff) -> str:
    if d.problems:
        return "A REPORT DOES NOT ADD UP"
    if d.regressions:
        return "REGRESSED"
    if d.settings:
        return "SETTINGS CHANGED (not like with like)"
    return "COVERAGE LOST" if d.coverage_lost else "no regressions"


def render_text(d: Diff, markdown: bool = False) -> str:
    code = (lambda s: f"`{s}`") if markdown else (lambda s: s)
    head = "## " if markdown else ""
    lines = [f"{'# ' if markdown else ''}torch-conformance diff: {verdict_of(d)}", "",
             f"OLD {code(d.old)}", f"NEW {code(d.new)}", ""]
    if d.problems:
        lines += [f"{head}Reports that do not add up ({len(d.problems)})"]
        lines += [f"- {p}" for p in d.problems] + [""]
    if d.settings:
        lines += [f"{head}Settings changed ({len(d.settings)})"]
        lines += [f"- {k}: {a} -> {b}" for k, a, b in d.settings]
        lines += ["(the runs are not like with like: --ignore-settings compares them anyway)",
                  ""]
    lines.append(f"{len(d.regressions)} regressions, {len(d.fixed)} fixed, "
                 f"{len(d.bugs_absent)} known bugs not present, "
                 f"{len(d.coverage_lost)} coverage lost, {len(d.changed)} other outcome "
                 f"changes, {len(d.margins)} margins moved more than {d.factor:g}x, "
                 f"{len(d.appeared)} appeared, {len(d.disappeared)} disappeared")
    for title, rows in _rows(d):
        if rows:
            lines += ["", f"{head}{title} ({len(rows)})"]
            for r in rows:
                lines.append(f"- {code(r['nodeid'])}: {r['old'] or 'absent'} -> "
                             f"{r['new'] or 'absent'}" + (f": {r['reason']}" if r["reason"]
                                                          else ""))
                if title == "Regressions" and r.get("reproduce"):
                    lines.append(f"  reproduce: {code(r['reproduce'])}")
    if d.margins:
        lines += ["", f"{head}Margins moved more than {d.factor:g}x ({len(d.margins)})"]
        lines += [f"- {code(m['nodeid'])} {m['check']}: {m['old']:.3g} -> {m['new']:.3g} "
                  f"({m['ratio']:.3g}x)" for m in d.margins]
    for title, ids in (("Appeared", d.appeared), ("Disappeared", d.disappeared)):
        if ids:
            lines += ["", f"{head}{title} ({len(ids)})"] + [f"- {code(i)}" for i in ids[:500]]
            if len(ids) > 500:
                lines.append(f"- ... and {len(ids) - 500} more")
    if d.environment:
        lines += ["", f"{head}Environment differences ({len(d.environment)})"]
        lines += [f"- {k}: {a} -> {b}" for k, a, b in d.environment]
    return "\n".join(lines) + "\n"


def render_html(d: Diff) -> str:
    from conformance.report.html import render_template

    return render_template("diff.html.j2", d=d, sections=_rows(d), verdict=verdict_of(d))
