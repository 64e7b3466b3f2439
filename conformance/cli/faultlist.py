"""The committed fault list (``tests/data/fault_list.json``): every planted fault and correct
twin that a fault module declares in ``SELFTEST``, with the verdict it had when the list was
recorded, the test and dtype that killed it, and the dtypes a twin passed in.

``torch-conformance selftest --record FILE`` writes it; ``--against FILE`` judges a run by it:
a listed kill that survives, a twin that fails or stops running a listed dtype, a kill
credited to a test of another implementation, and a declaration the list does not hold (or
a row no module declares any more) each fail the run (exit 1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conformance.cli.selftest import Entry

FIELDS = ("area", "spec", "path", "select", "expect")


def key(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(str(row[f]) for f in FIELDS)


def rows(entries: list[Entry]) -> list[dict[str, Any]]:
    """One row per entry, sorted: what was declared and what the run gave."""
    out = [{"area": e.area, "spec": e.spec, "path": e.path, "select": e.select,
            "expect": e.expect, "verdict": e.verdict,
            "killed_by": e.killed_by or None, "dtypes": sorted(e.dtypes)} for e in entries]
    return sorted(out, key=key)


def write(path: str | Path, entries: list[Entry], areas: list[str] | None = None) -> None:
    """Write the list of this run. ``areas`` (the run's ``--area`` filter): the rows of the
    list at ``path`` outside those areas are kept, the run's replace the rest."""
    bad = [f"{e.spec}: {e.verdict}" for e in entries if not e.good]
    if bad:  # the list records a suite that kills every fault and passes every twin
        raise ValueError("not recorded, not every entry is as declared: " + "; ".join(bad))
    new = rows(entries)
    if areas:
        def ran(area: str) -> bool:
            return any(area == a or area.startswith(a + ".") for a in areas)

        kept = [r for r in load(path) if not ran(r["area"])] if Path(path).exists() else []
        new = sorted(kept + new, key=key)
    Path(path).write_text(json.dumps({"entries": new}, indent=1) + "\n", encoding="utf-8")


def load(path: str | Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return list(data["entries"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a fault list ({type(exc).__name__}: {exc})") from None


def compare(entries: list[Entry], listed: list[dict[str, Any]], *,
            partial: bool = False) -> list[str]:
    """What the run of ``entries`` breaks of the list (empty: nothing). ``partial``: the run
    judged only some areas, so rows it did not run are not stale."""
    problems = []
    by_key = {key(r): r for r in listed}
    ran = set()
    for e in entries:
        k = key({"area": e.area, "spec": e.spec, "path": e.path, "select": e.select,
                 "expect": e.expect})
        ran.add(k)
        row = by_key.get(k)
        if row is None:
            problems.append(f"{e.spec} ({e.area}, {e.path}): declared but not in the list "
                            "(record it with selftest --record)")
            continue
        if e.miscredited:
            problems.append(f"{e.spec}: a kill credited to a test of another implementation: "
                            f"{e.miscredited[0]}")
        if row["expect"] == "killed" and e.verdict != "killed":
            problems.append(f"{e.spec}: killed by {row['killed_by']} when the list was "
                            f"recorded, now {e.verdict}")
        if row["expect"] == "passes":
            lost = sorted(set(row["dtypes"]) - e.dtypes)
            if e.verdict != "passes":
                problems.append(f"{e.spec}: a correct twin, now {e.verdict}: "
                                f"{e.first_failure}")
            elif lost:
                problems.append(f"{e.spec}: a correct twin no longer runs in {lost}")
    if not partial:
        problems += [f"{r['spec']} ({r['area']}, {r['path']}): listed but no module declares "
                     "it (record the list again)" for k, r in by_key.items() if k not in ran]
    return problems
