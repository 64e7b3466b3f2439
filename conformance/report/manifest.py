"""A report directory's manifest, and ``torch-conformance verify DIR``.

``SHA256SUMS`` lists the SHA-256 of every file of the report directory in ``sha256sum``'s
format (``sha256sum -c SHA256SUMS`` checks it without this tool). ``verify`` checks it —
every listed file present and unchanged, no file added — and that the report is internally
consistent: the counts per outcome add up to ``collected`` and match the results, and the
verdict is the one those counts give. The manifest makes a report tamper-evident, not
authentic: whoever can rewrite the report can rewrite the manifest, so a lab that hands a
report on signs ``SHA256SUMS`` (gpg, sigstore) as it signs any release artefact.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import Any

from conformance.harness.outcomes import OUTCOMES, verdict

MANIFEST = "SHA256SUMS"
CHUNK = 1 << 20


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*")
                  if p.is_file() and not p.is_symlink() and p.name != MANIFEST)


def write_manifest(directory: Path) -> Path:
    """``DIR/SHA256SUMS`` of every file under DIR (its own line excluded)."""
    lines = [f"{_sha256(p)}  {p.relative_to(directory).as_posix()}" for p in _files(directory)]
    path = directory / MANIFEST
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def check_manifest(directory: Path) -> list[str]:
    """What does not match the manifest (empty: all files as listed)."""
    path = directory / MANIFEST
    if not path.is_file():
        return [f"{MANIFEST}: missing (a report written before manifests, or removed)"]
    listed: dict[str, str] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        digest, sep, name = line.partition("  ")
        if not sep or len(digest) != 64:
            return [f"{MANIFEST}: line {n} is not '<sha256>  <file>'"]
        listed[name] = digest
    problems = []
    present = {p.relative_to(directory).as_posix(): p for p in _files(directory)}
    for name, digest in listed.items():
        if name not in present:
            problems.append(f"{name}: listed in {MANIFEST}, missing")
        elif _sha256(present[name]) != digest:
            problems.append(f"{name}: changed (its SHA-256 differs from {MANIFEST}'s)")
    problems += [f"{name}: not in {MANIFEST} (added after the run)"
                 for name in sorted(set(present) - set(listed))]
    return problems


def check_counts(report: dict[str, Any]) -> list[str]:
    """Whether the report's counts add up (to ``collected``, and to its results)."""
    problems = []
    summary = report.get("summary") or {}
    results = report.get("results") or []
    collected = report.get("collected")
    total = sum(int(summary.get(o, 0)) for o in OUTCOMES)
    if total != collected:
        problems.append(f"the counts per outcome add up to {total}, not collected = {collected}")
    if len(results) != collected:
        problems.append(f"{len(results)} results, not collected = {collected}")
    seen = Counter(r.get("outcome") for r in results)
    for outcome in sorted(set(OUTCOMES) | set(seen), key=str):
        if outcome not in OUTCOMES:
            problems.append(f"{seen[outcome]} results have an unknown outcome {outcome!r}")
        elif seen.get(outcome, 0) != int(summary.get(outcome, 0)):
            problems.append(f"summary says {summary.get(outcome, 0)} {outcome}, the results "
                            f"have {seen.get(outcome, 0)}")
    if len({r.get("nodeid") for r in results}) != len(results):
        problems.append("a test appears more than once in the results")
    counted = verdict({o: seen.get(o, 0) for o in OUTCOMES},
                      bool((report.get("run") or {}).get("allow_partial")))
    said = report.get("verdict")
    must = report.get("must_pass") or {}
    if said == "PASS" and must.get("strict") and (must.get("not_passed")
                                                  or must.get("areas_not_collected")):
        problems.append("verdict PASS under --strict, but must-pass tests did not pass")
    if said == "PASS" and counted != "PASS":
        problems.append(f"verdict PASS, but the results give {counted}")
    elif said not in ("PASS", "FAIL", "INCOMPLETE"):
        problems.append(f"verdict {said!r} is not PASS, FAIL or INCOMPLETE")
    return problems


def verify(directory: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """(the report, every problem found); the report is None if report.json is unreadable."""
    problems = check_manifest(directory)
    try:
        report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, [*problems, f"report.json: unreadable ({type(exc).__name__})"]
    return report, problems + check_counts(report)
