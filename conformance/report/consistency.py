"""Whether a report adds up (``torch-conformance verify``, and ``diff`` on its inputs).

A report whose files match its manifest can still have been rewritten consistently by hand,
or be one that was never whole. These checks tie its parts together: the counts per outcome
sum to ``collected`` and match the results (no test twice, no unknown outcome); the results
cover the run's collection (``journal/manifest.json``); the per-area table matches the
results; every expected failure names a matrix entry that applied to the run; the must-pass
list is recounted from the results; ``--strict`` in the command means a strict report; and
the verdict and exit status are the ones the results give.
"""

from __future__ import annotations

import json
import math
import shlex
from collections import Counter
from pathlib import Path
from typing import Any

from conformance.harness.outcomes import OUTCOMES, verdict
from conformance.report import mustpass

EXIT_OF = {"PASS": 0, "FAIL": 1, "INCOMPLETE": 2}


def _count(value: Any) -> int | None:
    """A count as written in the report, or None if it is not a whole number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        return None
    return int(value)


def _counts(report: dict[str, Any], results: list[dict[str, Any]]) -> list[str]:
    problems = []
    summary = report.get("summary") if isinstance(report.get("summary"), dict) else {}
    collected = _count(report.get("collected"))
    if collected is None:
        return [f"collected = {report.get('collected')!r} is not a count"]
    written = {o: _count(summary.get(o, 0)) for o in OUTCOMES}
    bad = [o for o, n in written.items() if n is None]
    if bad:
        return [f"summary: {o} = {summary.get(o)!r} is not a count" for o in bad]
    if sum(written.values()) != collected:
        problems.append(f"the counts per outcome add up to {sum(written.values())}, not "
                        f"collected = {collected}")
    if len(results) != collected:
        problems.append(f"{len(results)} results, not collected = {collected}")
    seen = Counter(r.get("outcome") for r in results)
    for outcome in sorted(set(OUTCOMES) | set(seen), key=str):
        if outcome not in OUTCOMES:
            problems.append(f"{seen[outcome]} results have an unknown outcome {outcome!r}")
        elif seen.get(outcome, 0) != written[outcome]:
            problems.append(f"summary says {written[outcome]} {outcome}, the results have "
                            f"{seen.get(outcome, 0)}")
    twice = [n for n, k in Counter(r.get("nodeid") for r in results).items() if k > 1]
    if twice:
        problems.append(f"{len(twice)} tests appear more than once in the results "
                        f"({twice[0]})")
    return problems


def _areas(report: dict[str, Any], results: list[dict[str, Any]]) -> list[str]:
    """The per-area table (area -> implementation -> counts) against the results."""
    table = report.get("areas")
    if not isinstance(table, dict):
        return []
    counted: Counter = Counter((r.get("area") or "-", r.get("impl") or "-", r.get("outcome"))
                               for r in results)
    for area, impls in table.items():
        for impl, row in (impls or {}).items():
            for outcome in OUTCOMES:
                if _count(row.get(outcome, 0)) != counted.get((area, impl, outcome), 0):
                    return [f"areas.{area}.{impl}: {row.get(outcome)} {outcome}, the results "
                            f"have {counted.get((area, impl, outcome), 0)}"]
    listed = {(a, i) for a, impls in table.items() for i in (impls or {})}
    missing = sorted({(a, i) for a, i, _ in counted} - listed)
    return [f"areas: {missing[0][0]} / {missing[0][1]} has results but no row"] if missing else []


def _expected_failures(report: dict[str, Any], results: list[dict[str, Any]]) -> list[str]:
    """Every expected failure names a matrix entry that applied to the run."""
    entries = (report.get("run") or {}).get("matrix_entries")
    if entries is None:
        return []
    applied = {e.get("entry") for e in entries if e.get("applies")}
    for r in results:
        if r.get("outcome") not in ("expected-fail", "unexpected-pass"):
            continue
        named = set(r.get("matrix_entries") or ())
        if not named & applied:
            return [f"{r.get('nodeid')}: {r.get('outcome')} without a matrix entry that "
                    "applied to this run"]
    return []


def _collection(directory: Path | None, results: list[dict[str, Any]]) -> list[str]:
    """The results cover the collection the test processes wrote (if it is there)."""
    if directory is None:
        return []
    try:
        collected = json.loads((directory / "journal" / "manifest.json").read_text())
    except (OSError, ValueError):
        return []
    missing = sorted(set(collected) - {r.get("nodeid") for r in results})
    if missing:
        return [f"{len(missing)} collected tests (journal/manifest.json) have no result "
                f"({missing[0]})"]
    return []


def _strictness(report: dict[str, Any], results: list[dict[str, Any]]) -> list[str]:
    problems = []
    run = report.get("run") or {}
    try:
        words = shlex.split(str(run.get("command") or ""))
    except ValueError:
        words = []
    strict = bool(run.get("strict"))
    if "--strict" in words and not strict and not run.get("merged_from"):
        problems.append("the command has --strict, the report says it was not strict")
    must = report.get("must_pass")
    if not isinstance(must, dict):
        if strict:
            problems.append("a --strict report without its must-pass list")
        return problems
    if bool(must.get("strict")) != strict:
        problems.append(f"must_pass.strict = {must.get('strict')}, run.strict = {strict}")
    outcomes = {r.get("nodeid"): (r.get("outcome"), r.get("reason") or "") for r in results}
    areas = {r.get("area") for r in results}
    again = mustpass.summarize(must.get("tests") or [], outcomes, must.get("areas") or [],
                               areas, strict)
    for key in ("required", "passed", "not_passed", "areas_not_collected"):
        if again[key] != must.get(key):
            problems.append(f"must_pass.{key} = {must.get(key)!r}, the results give "
                            f"{again[key]!r}")
    return problems


def _verdict(report: dict[str, Any], results: list[dict[str, Any]]) -> list[str]:
    seen = Counter(r.get("outcome") for r in results)
    counted = verdict({o: seen.get(o, 0) for o in OUTCOMES},
                      bool((report.get("run") or {}).get("allow_partial")))
    must = report.get("must_pass") if isinstance(report.get("must_pass"), dict) else None
    if must is not None and mustpass.failing(must) and not (report.get("run") or {}).get("shard"):
        counted = "FAIL"
    if report.get("vacuous") and counted == "PASS" and not (report.get("run") or {}).get("shard"):
        counted = "FAIL"
    said = report.get("verdict")
    problems = []
    if said not in EXIT_OF:
        problems.append(f"verdict {said!r} is not PASS, FAIL or INCOMPLETE")
    elif said == "PASS" and counted != "PASS":
        problems.append(f"verdict PASS, but the results give {counted}")
    status = report.get("exit_status")
    if status is not None and said in EXIT_OF and (status == 0) != (said == "PASS"):
        problems.append(f"exit_status {status} with verdict {said}")
    return problems


def check_report(report: dict[str, Any], directory: Path | None = None) -> list[str]:
    """Every way the report does not add up (empty: it does)."""
    results = report.get("results")
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        return ["results: not a list of results"]
    problems = _counts(report, results)
    for check in (_areas, _expected_failures, _strictness, _verdict):
        problems += check(report, results)
    return problems + _collection(directory, results)
