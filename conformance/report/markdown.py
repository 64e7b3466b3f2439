"""summary.md: the report as Markdown (outcomes, areas, margins, reasons, matrix entries)."""

from __future__ import annotations

from typing import Any

from conformance.harness.outcomes import OUTCOMES
from conformance.report import mustpass, suite, triage
from conformance.report.tables import (
    BULKY_NOTES,
    export_table,
    gpu_identity,
    graphs_table,
    indexing_table,
    times_table,
)


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


GROUP_TESTS_LISTED = 50  # test ids listed per failure group (report.json has them all)


def _detail(r: dict[str, Any], head: str) -> list[str]:
    """A result's bullet: ``head``, its reproduce line (not for an expected failure), its
    standalone reproducer and the head of its stack."""
    lines = [head]
    if r["outcome"] != "expected-fail" and r.get("reproduce"):
        lines.append(f"  - reproduce: `{r['reproduce']}`")
    if r.get("repro_script"):
        lines.append(f"  - standalone reproducer: `{r['repro_script']}`")
    stack = (r.get("notes") or {}).get("stack")
    if stack:
        lines += ["", "  ```", *(f"  {s}" for s in stack.splitlines()[:20]), "  ```"]
    return lines


def _entry_table(title: str, intro: str, columns: tuple[str, ...],
                 rows: list[tuple[Any, ...]]) -> list[str]:
    """A section listing matrix entries (entry, area, then ``columns``); none if no rows."""
    if not rows:
        return []
    out = ["", f"## {title} ({len(rows)})", "", intro, "",
           "| entry | area | " + " | ".join(columns) + " |", "|---|---|" + "---|" * len(columns)]
    return out + [f"| {m['entry']} | {m['area']} | " + " | ".join(cells) + " |"
                  for m, *cells in rows]


def _failure_groups(rows: list[dict[str, Any]]) -> list[str]:
    """Failures grouped by area, check and implementation: a table, then per group its first
    example (reason, reproduce line, stack) and its tests (collapsed)."""
    groups = triage.group_failures(rows)
    lines = triage.markdown_lines(groups)
    for i, g in enumerate(groups, 1):
        first = g.first
        lines += ["", f"### {i}. [{g.area}] `{g.check}`, `{g.impl}`: {g.counts_text()}", ""]
        lines += _detail(first, f"- first: `{first['nodeid']}` ({first['outcome']}): "
                                f"{first['reason']}")
        if g.count > 1:
            listed = g.results[1:GROUP_TESTS_LISTED + 1]
            lines += ["", f"<details><summary>{g.count - 1} more in this group</summary>", ""]
            lines += [f"- `{r['nodeid']}` ({r['outcome']}): "
                      f"{triage.short_reason(r['reason'], 200)}" for r in listed]
            if g.count - 1 > len(listed):
                lines.append(f"- ... and {g.count - 1 - len(listed)} more (report.json)")
            lines += ["", "</details>"]
    return lines


def render_markdown(report: dict[str, Any]) -> str:
    env, run = report["environment"], report["run"]
    dev = env["device"]
    lines = [
        "# torch-conformance report",
        "",
        f"- verdict: **{report.get('verdict', '?')}** ({report.get('collected', '?')} "
        f"collected; exit status {report.get('exit_status')})"
        + ("; written from the journal of a run that died"
           if (report.get("journal") or {}).get("rebuilt") else ""),
        f"- device: **{dev['torch_device']}** ({dev['name']}; matrix key `{dev['matrix_key']}`)"
        + (f"; GPU {gpu}" if (gpu := gpu_identity(dev)) else ""),
        f"- torch {env['torch']}, CUDA {env['cuda']}, HIP {env['hip']}, "
        f"Python {env['python']}, BLAS {env['blas'].get('BLAS_INFO', '?')}",
        *([f"- **not measured**: {run['newer_than_measured']}"]
          if run.get("newer_than_measured") else []),
        f"- profile `{run['profile']}`, seed {run['seed']}, matrix `{run['matrix']}`",
        f"- suite {suite.describe(report.get('suite'))}; must-pass list: "
        f"{mustpass.describe(report.get('must_pass')) or 'none for this device'}",
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
        "| area | implementation | passed | failed | error | crashed | timed out | xfail "
        "| xpass | unsupported | skipped | not run | worst margin |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for area, impls in sorted(report["areas"].items()):
        for impl, row in sorted(impls.items()):
            lines.append(
                f"| {area} | `{impl}` | {row['passed']} | {row['failed']} | {row['error']} | "
                f"{row.get('crashed', 0)} | {row.get('timed-out', 0)} | "
                f"{row['expected-fail']} | {row['unexpected-pass']} | {row['unsupported']} | "
                f"{row['skipped']} | {row.get('not-run', 0)} | {_margin(row['worst_margin'])} |"
            )
    sections = [
        ("Failures", ("crashed", "timed-out", "failed", "error", "unexpected-pass")),
        ("Expected failures", ("expected-fail",)),
        ("Not run (the run is incomplete)", ("not-run",)),
        ("Unsupported (by design)", ("unsupported",)),
        ("Skipped (missing hardware or package)", ("skipped",)),
    ]
    for title, outcomes in sections:
        rows = [r for r in report["results"] if r["outcome"] in outcomes]
        if not rows:
            continue
        lines += ["", f"## {title} ({len(rows)})", ""]
        if outcomes[0] in ("unsupported", "skipped", "not-run"):
            lines += _grouped_by_reason(rows)
            continue
        if title == "Failures":
            lines += _failure_groups(rows)
            continue
        for r in rows[:200]:
            lines += _detail(r, f"- `{r['nodeid']}`: {r['reason']}")
        if len(rows) > 200:
            lines.append(f"- ... and {len(rows) - 200} more (see report.json)")
    entries = report["run"].get("matrix_entries") or []
    if entries:
        narrow = [m for m in entries if m.get("fixed_in")]
        lines += _entry_table(
            "Matrix entries to narrow", "Expected failures whose tests passed on a release "
            "newer than every release they were measured failing on: counted as passed (the "
            "checks ran and held), listed here so the entry is narrowed.",
            ("tests passed", "fixed in?", "narrow its versions to"),
            [(m, f"{m['fixed_tests']} of {m['tests']}", m["fixed_in"], f"`{m['narrow_to']}`")
             for m in narrow])
        absent = [m for m in entries if m.get("not_present_tests")]
        lines += _entry_table(
            "Known bugs not present in this build", "Expected failures (known bugs of the "
            "releases they were measured on) whose tests passed here: counted as passed (the "
            "checks ran and held); `--stale-entries=fail` fails them instead.",
            ("tests passed", "the bug"),
            [(m, f"{m['not_present_tests']} of {m['tests']}",
              f"{m['reason'][:160].replace('|', '/')} ({m['link']})") for m in absent])
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
