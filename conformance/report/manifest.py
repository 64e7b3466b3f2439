"""A report directory's manifest, and ``torch-conformance verify DIR``.

``SHA256SUMS`` lists the SHA-256 of every file of the report directory in ``sha256sum``'s
format (``sha256sum -c SHA256SUMS`` checks it without this tool). ``verify`` checks it (every
listed file present and unchanged, no file added) and that the report is consistent
(``consistency.py``). The manifest makes a report tamper-evident, not
authentic: whoever can rewrite the report can rewrite the manifest, so a lab that hands a
report on signs ``SHA256SUMS`` (gpg, sigstore) as it signs any release artefact.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from conformance.report.consistency import check_report

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


def verify(directory: Path) -> tuple[dict[str, Any] | None, list[str]]:
    """(the report, every problem found); the report is None if report.json is unreadable."""
    problems = check_manifest(directory)
    try:
        report = json.loads((directory / "report.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return None, [*problems, f"report.json: unreadable ({type(exc).__name__})"]
    return report, problems + check_report(report, directory)
