"""The ``--repro-dir`` directory over a run: emptied of the previous run's scripts at the
start, one script per failure group at the end.

Only what this tool wrote is removed: the directory carries ``MARKER`` (a manifest of the
files a run wrote). A non-empty directory without it is refused (``ReproDirError``): it may
hold someone's files. During the run each test process stages candidates
(conformance/report/repro.py); ``finalize`` keeps, per failure group of the report
(conformance/report/triage.py), the best: the group's first example unless another one's
call can be re-checked and that one's cannot; its docstring gets the group's counts.
"""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path
from typing import Any

from conformance.report.repro import GROUP_LINE, STAGING, key_name
from conformance.report.triage import Group, group_failures

MARKER = ".torch-conformance-repro.json"


class ReproDirError(Exception):
    """The directory cannot be used (one line, for a usage error)."""


def _manifest(directory: Path) -> dict[str, Any]:
    try:
        return json.loads((directory / MARKER).read_text())
    except (OSError, ValueError):
        return {}


def prepare(directory: Path) -> list[str]:
    """Make ``directory`` ready for a run: create it, or remove the previous run's scripts
    (the files its manifest lists) and staging; returns the names removed."""
    if directory.exists() and not directory.is_dir():
        raise ReproDirError(f"--repro-dir {directory}: exists and is not a directory")
    if directory.exists() and any(directory.iterdir()) and not (directory / MARKER).exists():
        raise ReproDirError(
            f"--repro-dir {directory}: not empty and not written by torch-conformance (no "
            f"{MARKER}); name a new or empty directory (the reproducers of a run replace "
            "the previous run's)")
    removed = []
    for name in _manifest(directory).get("files", []):
        path = directory / name
        if path.parent == directory and path.is_file():
            path.unlink()
            removed.append(name)
    shutil.rmtree(directory / STAGING, ignore_errors=True)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).write_text(json.dumps({"files": [], "groups": []}, indent=1) + "\n")
    return removed


def _candidates(directory: Path) -> dict[str, list[dict[str, Any]]]:
    """key name -> the staged candidates (with their script's path), from every process."""
    out: dict[str, list[dict[str, Any]]] = {}
    for meta in sorted((directory / STAGING).glob("*/*.json")):
        try:
            info = json.loads(meta.read_text())
        except (OSError, ValueError):
            continue
        info["script"] = meta.with_suffix(".py")
        if info["script"].exists():
            out.setdefault(meta.stem, []).append(info)
    return out


def _group_text(g: Group, chosen: dict[str, Any]) -> str:
    first = g.first["nodeid"]
    lines = [f"group:           {g.count} failure{'s' if g.count != 1 else ''} of this check "
             f"and implementation ({g.counts_text()}), one script"]
    if chosen["nodeid"] == first:
        lines.append("example:         the group's first failure (this script's test)")
    else:
        why = "its call can be re-checked" if chosen["rank"] == 0 else "the first left none"
        lines.append(f"example:         the group's first failure is {first}; this script's "
                     f"test is another of the group ({why})")
    return "\n".join(lines)


def finalize(directory: Path, results: list[dict[str, Any]]) -> list[Path]:
    """One script per failure group (``Group.slug``.py) from the staged candidates; the
    staging removed and the manifest written. Returns the scripts."""
    staged = _candidates(directory)
    groups = group_failures(sorted(results, key=lambda r: r["nodeid"]))
    written: list[Path] = []
    entries = []
    names: set[str] = set()
    for g in groups:
        options = staged.get(key_name(g.key))
        if not options:
            continue
        chosen = min(options, key=lambda c: (c["rank"], c["nodeid"] != g.first["nodeid"],
                                             c["nodeid"]))
        stem = g.slug
        if stem in names:  # two groups with one slug: the later one gets its key's CRC
            stem = f"{stem}-{zlib.crc32(key_name(g.key).encode()):08x}"
        names.add(stem)
        text = chosen["script"].read_text().replace(GROUP_LINE, _group_text(g, chosen), 1)
        path = directory / f"{stem}.py"
        path.write_text(text)
        path.chmod(0o755)
        written.append(path)
        entries.append({"file": path.name, "area": g.area, "check": g.check, "impl": g.impl,
                        "failures": g.count, "test": chosen["nodeid"],
                        "rechecks": chosen["kind"] == "recheck"})
    shutil.rmtree(directory / STAGING, ignore_errors=True)
    (directory / MARKER).write_text(json.dumps(
        {"files": [p.name for p in written], "groups": entries}, indent=1) + "\n")
    return written
