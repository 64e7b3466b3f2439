"""``torch-conformance merge DIR... -o OUT``: shard reports (``--shard I/N``) or the
per-host reports of torchrun jobs, as one report: JSON, Markdown, HTML and JUnit XML.

Refused (exit 1, one line) unless ``--allow-partial``: shards missing from the merge, and
reports made under different settings (suite version and commit, device matrix by SHA-256,
profile, seed, device, implementations by ``module:attr``, ``--strict``): a merge of those
is not one run. With ``--allow-partial`` they are warnings and the merged report says it is
partial. Always refused: report schemas that differ (exit 1); the same shard twice, shards of
different splits (usage errors, exit 4). A test in more than one input keeps its worst
outcome, with a warning when they disagree; differing torch builds are warnings.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from conformance.report import mustpass
from conformance.report.collect import Collector, Entry, build_report
from conformance.report.diff import ReportError, load_report
from conformance.report.manifest import MANIFEST, verify, write_manifest
from conformance.report.settings import disagreement
from conformance.report.write import write_report

WORST = {"crashed": 9, "timed-out": 8, "error": 6, "failed": 5, "unexpected-pass": 4,
         "not-run": 3.5, "expected-fail": 3, "passed": 2, "unsupported": 1, "skipped": 0}


class MergeError(ValueError):
    """Inputs that must not be merged (a usage error)."""


class MergeRefused(ValueError):
    """Inputs that are not one run: refused (exit 1) unless --allow-partial."""


def _revive(check: dict[str, Any]) -> dict[str, Any]:
    """A check as the run had it: report.json writes inf and NaN as strings."""
    return {k: float(v) if k in ("margin", "measured", "bound") and v in ("inf", "-inf", "nan")
            else v for k, v in check.items()}


def _entry(r: dict[str, Any]) -> Entry:
    meta = {k: r.get(k) for k in ("area", "impl", "device", "dtype", "params",
                                  "matrix_entries", "reproduce")}
    record = {"checks": [_revive(c) for c in r.get("checks") or ()], "notes": r.get("notes") or {},
              "tolerance_factor": r.get("tolerance_factor", 1.0), "reproduce": r.get("reproduce")}
    return Entry(r["nodeid"], r["outcome"], r["reason"], meta, r.get("duration_s") or 0.0,
                 record, r.get("worker"))


def _check_compatible(reports: list[tuple[str, dict[str, Any]]],
                      allow_partial: bool) -> tuple[list[str], list[str]]:
    """(warnings, why the merge is partial): refuses what cannot be merged."""
    (first_name, first), warnings, partial = reports[0], [], []
    for name, rep in reports[1:]:
        if rep.get("schema_version") != first.get("schema_version"):
            raise MergeRefused(f"{name}: report schema {rep.get('schema_version')} vs "
                               f"{first.get('schema_version')} in {first_name}; not merged")
        why = disagreement(first, rep)
        if why:
            line = f"{name}: {why} in {first_name}"
            if not allow_partial:
                raise MergeRefused(f"{line}; not merged (--allow-partial merges it as a "
                                   "partial run)")
            partial.append(line)
        for key in ("torch", "cuda", "hip"):
            if rep["environment"].get(key) != first["environment"].get(key):
                warnings.append(f"merged reports differ in {key}: {name} has "
                                f"{rep['environment'].get(key)}, {first_name} "
                                f"{first['environment'].get(key)}")
    shards = [(name, rep["run"].get("shard")) for name, rep in reports]
    given = [(name, s) for name, s in shards if s]
    if given:
        counts = {s["count"] for _, s in given}
        if len(counts) > 1 or len(given) != len(shards):
            raise MergeError("the inputs are not shards of one split: " + ", ".join(
                f"{name} " + (f"{s['index']}/{s['count']}" if s else "unsharded")
                for name, s in shards))
        seen: dict[int, str] = {}
        for name, s in given:
            if s["index"] in seen:
                raise MergeError(f"shard {s['index']}/{s['count']} twice: {seen[s['index']]} "
                                 f"and {name}")
            seen[s["index"]] = name
        missing = sorted(set(range(1, counts.pop() + 1)) - set(seen))
        if missing:
            line = (f"shards {', '.join(map(str, missing))} of {given[0][1]['count']} are "
                    "missing from this merge")
            if not allow_partial:
                raise MergeRefused(f"{line}; not merged (--allow-partial merges the shards "
                                   "given as a partial run)")
            partial.append(line)
    return warnings, partial


def merge_reports(reports: list[tuple[str, dict[str, Any]]],
                  allow_partial: bool = False) -> dict[str, Any]:
    """One report from several (name, report) pairs."""
    warnings, partial = _check_compatible(reports, allow_partial)
    collector = Collector()
    for name, rep in reports:
        for r in rep["results"]:
            old = collector.entries.get(r["nodeid"])
            if old is not None and old.outcome != r["outcome"]:
                warnings.append(f"{r['nodeid']}: {old.outcome} in one input, {r['outcome']} "
                                f"in {name}; the worse is kept")
            if old is None or WORST[r["outcome"]] > WORST[old.outcome]:
                collector.entries[r["nodeid"]] = _entry(r)
        collector.warnings += [w for w in rep.get("warnings") or ()
                               if w not in collector.warnings]
    first = reports[0][1]
    run = {**first["run"], "shard": None, "command": "torch-conformance merge",
           "merged_from": [{"report": name, "shard": rep["run"].get("shard"),
                            "command": rep["run"].get("command"), "created": rep["created"],
                            "host": rep["environment"].get("platform")}
                           for name, rep in reports]}
    if partial:
        run["partial"] = partial
    merged = build_report(collector, first["environment"], run)
    merged["tool_version"], merged["suite"] = first.get("tool_version"), first.get("suite")
    merged["warnings"] += warnings + [f"partial merge: {line}" for line in partial]
    _merge_must_pass(merged, [rep for _, rep in reports])
    merged["vacuous"] = _vacuous([rep for _, rep in reports])
    merged["areas_without_implementations"] = first.get("areas_without_implementations", [])
    return merged


def _merge_must_pass(merged: dict[str, Any], reports: list[dict[str, Any]]) -> None:
    """The must-pass list over the union of the inputs (each shard's holds the whole run's
    list); under --strict the merge is what judges it."""
    lists = [rep["must_pass"] for rep in reports if rep.get("must_pass")]
    if not lists:
        return
    required = sorted({t for m in lists for t in m.get("tests") or ()})
    outcomes = {r["nodeid"]: (r["outcome"], r["reason"]) for r in merged["results"]}
    areas = {r.get("area") for r in merged["results"]}
    merged["must_pass"] = mustpass.summarize(required, outcomes, lists[0].get("areas") or [],
                                             areas, bool(merged["run"].get("strict")))
    why = mustpass.failing(merged["must_pass"])
    if why:
        merged["verdict"] = "FAIL"
        merged["warnings"].append(f"--strict: {why}")


def _vacuous(reports: list[dict[str, Any]]) -> list[str]:
    """An implementation is vacuous in the merge only if it ran no check in any input."""
    def name(line: str) -> str:
        return line.removeprefix("implementation ").split(" (", 1)[0]

    lists = [{name(v): v for v in rep.get("vacuous") or ()} for rep in reports]
    common = set.intersection(*(set(x) for x in lists)) if lists else set()
    return sorted(lists[-1][n] for n in common)


def merge_junit(paths: list[Path], out: Path) -> Path | None:
    """The inputs' junit.xml test suites under one <testsuites>."""
    suites = ET.Element("testsuites")
    for p in paths:
        if not p.is_file():
            continue
        root = ET.parse(p).getroot()
        suites.extend(root if root.tag == "testsuites" else [root])
    if not len(suites):
        return None
    ET.ElementTree(suites).write(out, encoding="utf-8", xml_declaration=True)
    return out


def _verify_inputs(inputs: list[Path], allow_partial: bool) -> list[str]:
    """Each input verifies (its manifest and counts, ``torch-conformance verify``): a merge
    must not launder an edited report into a fresh manifest. An input without a manifest is
    refused unless --allow-partial (then a warning)."""
    warnings = []
    for p in inputs:
        folder = p if p.is_dir() else p.parent
        if not (folder / MANIFEST).is_file() or (p.is_file() and p.name != "report.json"):
            line = f"{p}: no {MANIFEST} next to it, so it cannot be verified"
            if not allow_partial:
                raise MergeRefused(f"{line}; not merged (--allow-partial merges it)")
            warnings.append(f"partial merge: {line}")
            continue
        _, problems = verify(folder)
        if problems:
            raise MergeRefused(f"{p}: does not verify ({problems[0]}; torch-conformance "
                               f"verify {folder}); not merged")
    return warnings


def merge_dirs(inputs: list[Path], output: Path,
               allow_partial: bool = False) -> tuple[dict[str, Any], list[Path]]:
    try:
        loaded = [(str(p), load_report(p)) for p in inputs]
    except ReportError as exc:
        raise MergeError(str(exc)) from None
    merged = merge_reports(loaded, allow_partial)
    merged["warnings"] += _verify_inputs(inputs, allow_partial)
    merged["exit_status"] = {"PASS": 0, "FAIL": 1}.get(merged["verdict"], 2)
    written = write_report(output, merged)
    junit = merge_junit([(p if p.is_dir() else p.parent) / "junit.xml" for p in inputs],
                        output / "junit.xml")
    written += [junit] if junit else []
    return merged, [*written, write_manifest(output)]
