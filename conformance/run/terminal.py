"""The run's terminal summary, short enough to read at any failure count.

- Areas without an implementation: one line (families folded: ``indexing.* (22)``).
- Per implementation: a row only where something needs attention (a failure, a test that
  did not run, or a user's own implementation); the others are one line.
- Failures grouped (``conformance.report.triage``): per group a head line, the first
  example's reason and its reproduce line; past ``GROUP_FROM`` failures pytest's own
  per-failure tracebacks and "short test summary" lines are left out (unless ``--tb`` or
  ``-r`` was given), since the groups and report.html say it all in a few lines.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.harness.outcomes import BAD_OUTCOMES, OUTCOMES
from conformance.report import mustpass, triage
from conformance.report.collect import entries_to_narrow

NOT_RUN_SHOWN = 5  # reasons listed per plugged-in implementation
ROWS_SHOWN = 12  # implementation rows before "... N more"
GROUP_FROM = 10  # failures from which tracebacks give way to the grouped summary
_DEFAULT_REPORTCHARS = ("fE",)  # pytest's -r default (8.x, 9.x)


def fold_areas(areas: list[str]) -> str:
    """``indexing.gather, indexing.take, topk`` -> ``indexing.* (2), topk``."""
    families: dict[str, list[str]] = {}
    for a in areas:
        families.setdefault(a.split(".", 1)[0] if "." in a else a, []).append(a)
    parts = []
    for family, members in families.items():
        if len(members) > 1 or members[0] != family:
            parts.append(f"{family}.* ({len(members)})" if len(members) > 1 else members[0])
        else:
            parts.append(family)
    return ", ".join(parts)


def quiet_tracebacks(config: pytest.Config, bad: int) -> bool:
    """Past GROUP_FROM failures, leave out pytest's per-failure sections (unless the user
    asked for them with --tb / -r); True if they were left out."""
    if bad < GROUP_FROM or config.option.tbstyle != "auto":
        return False
    config.option.tbstyle = "no"
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None and config.option.reportchars in _DEFAULT_REPORTCHARS:
        tr.reportchars = tr.reportchars.replace("f", "").replace("E", "")
    return True


def _row(area: str, impl: str, row: dict[str, Any]) -> str:
    margin = row["worst_margin"]
    shown = "-" if margin is None else f"{margin:.3g}"
    failed = sum(row[o] for o in BAD_OUTCOMES)
    return (f"  {area:<8} {impl:<24} ran {row['ran']:>4}  passed {row['passed']:>4}  "
            f"failed {failed:>3}  xfail {row['expected-fail']:>3}  "
            f"unsupported {row['unsupported']:>4}  skipped {row['skipped']:>3}  "
            f"worst margin {shown}" + (f"  NOT RUN {row['not-run']}" if row["not-run"] else ""))


def implementation_lines(by_area: dict[str, dict[str, dict[str, Any]]],
                         plugged: set[str]) -> list[str]:
    """Rows for implementations with failures, tests not run, or plugged in by the user;
    one line for the rest."""
    shown, quiet, idle = [], [], {}
    for area, impls in sorted(by_area.items()):
        for impl, row in sorted(impls.items()):
            bad = sum(row[o] for o in BAD_OUTCOMES) + row["not-run"]
            if not bad and not row["ran"] and impl not in plugged:
                idle.setdefault(area, []).append(row)  # ran nothing: never "no failure"
                continue
            (shown if bad or impl in plugged else quiet).append((bad, area, impl, row))
    shown.sort(key=lambda t: (-t[0], t[1], t[2]))
    lines = []
    for _, area, impl, row in shown[:ROWS_SHOWN]:
        lines.append(_row(area, impl, row))
        if impl in plugged:  # a user's implementation: why the rest did not run
            for reason, n in list(row["not_run"].items())[:NOT_RUN_SHOWN]:
                lines.append(f"      not run: {n} {reason}")
    if len(shown) > ROWS_SHOWN:
        rest = shown[ROWS_SHOWN:]
        failing = sum(1 for bad, *_ in rest if bad)
        lines.append(f"  ... {len(rest)} more implementations ({failing} with failures or "
                     "tests not run; summary.md, report.html)")
    if quiet:
        margins = [r["worst_margin"] for *_, r in quiet if r["worst_margin"] is not None]
        worst = f"; worst margin {max(margins):.3g}" if margins else ""
        areas = len({a for _, a, _, _ in quiet})
        lines.append(f"  {len(quiet)} {'other ' if shown else ''}implementation"
                     f"{'s' * (len(quiet) > 1)} in {areas} area{'s' * (areas > 1)}: "
                     f"no failure, nothing left unrun{worst}")
    for area, rows in idle.items():
        why: dict[str, int] = {}
        for row in rows:
            for reason, n in row["not_run"].items():
                why[reason] = why.get(reason, 0) + n
        top = max(why.items(), key=lambda kv: kv[1]) if why else ("", 0)
        total = sum(why.values())
        lines.append(f"  {area}: {len(rows)} implementation{'s' * (len(rows) > 1)} ran nothing "
                     f"here ({total} tests, e.g. {top[1]} {top[0]}): not tested, not passed")
    return lines


def write_summary(acc: Any, tr: Any) -> None:
    """The torch-conformance section of the terminal summary (``acc``: the Accounting)."""
    empty, vacuous = acc.areas_without_impls(), acc.vacuous()
    if not acc.collector.entries and not empty and not vacuous:
        return
    tr.section("torch-conformance")
    if empty:
        tr.write_line(f"no implementation registered: {fold_areas(empty)}"
                      + (" (--no-builtins)" if not acc.state.include_builtins else ""))
    for line in vacuous:
        if acc.state.shard is None:
            tr.write_line(f"ERROR: {line}", red=True)
        else:
            tr.write_line(f"note (this shard only; merge judges the run): {line}")
    if not acc.collector.entries:
        return
    counts = acc.collector.counts()
    tr.write_line(", ".join(f"{counts[o]} {o}" for o in OUTCOMES))
    plugged = {i.name for i in acc.state.registry.all() if i.origin != "builtin"}
    for line in implementation_lines(acc.collector.by_area(), plugged):
        tr.write_line(line)
    results = [e.to_json() for e in acc.collector.entries.values()]
    groups = triage.group_failures(sorted(results, key=lambda r: r["nodeid"]))
    if groups:
        where = (f"{acc.state.report_dir / 'report.html'} (search, filters) and summary.md"
                 if acc.state.report_dir is not None else None)
        for line in triage.terminal_lines(groups, where):
            tr.write_line(line, red=line.startswith("  ["))
        if acc.tracebacks_left_out:
            tr.write_line("  (pytest's per-failure tracebacks left out past "
                          f"{GROUP_FROM} failures: --tb=short prints them)")
    for label, (release, gate, n) in entries_to_narrow(acc.collector.entries.values()).items():
        tr.write_line(f"fixed in {release}? matrix {label}: {n} expected "
                      f"failure{'s' if n > 1 else ''} passed past the releases it was "
                      f"measured on (counted as passed); narrow its versions to {gate}",
                      yellow=True)
    if acc.report is not None:
        write_verdict(acc, tr)
    if acc.write_error is not None:
        tr.write_line(f"ERROR: the report was not written: {acc.write_error} (a defect "
                      "of torch-conformance: please report it; exit status 3)", red=True)
    if acc.state.report_dir is not None:
        d = acc.state.report_dir
        tr.write_line(f"report: {d / 'report.json'}, {d / 'report.html'}, "
                      f"{d / 'summary.md'}, {acc.config.option.xmlpath}")


def write_verdict(acc: Any, tr: Any) -> None:
    report = acc.report
    counts = ", ".join(f"{n} {o}" for o, n in report["summary"].items() if n)
    colour = {"PASS": {"green": True}, "FAIL": {"red": True},
              "INCOMPLETE": {"yellow": True}}[report["verdict"]]
    must = report.get("must_pass")
    if must is not None and (must["strict"] or must["not_passed"]):
        why = mustpass.failing(must)
        shard = acc.state.shard is not None
        tr.write_line(f"must-pass ({'--strict' if must['strict'] else 'not --strict'}): "
                      f"{must['passed']} of {must['required']} passed"
                      + (f"; {why}" if why else "")
                      + ("; a shard: merge judges the whole list" if shard else ""),
                      red=bool(why) and not shard)
        for t in must["tests_not_passed"][:NOT_RUN_SHOWN]:
            tr.write_line(f"  {t['outcome']}: {t['nodeid']}: {t['reason'][:160]}")
    tr.write_line(f"torch-conformance verdict: {report['verdict']} "
                  f"({report['collected']} collected: {counts})", bold=True, **colour)
