"""Area-specific tables of summary.md: out-of-bounds indexing, per op and case kind."""

from __future__ import annotations

import re
from typing import Any

# notes kept in report.json only (long per-case lists)
BULKY_NOTES = ("outcomes", "isolated")
KIND_ORDER = ("n", "-n-1", "-1", "huge", "int32_max", "int64_min")  # then the ops' own
_MARK = {"passed": "", "failed": " FAILED", "error": " ERROR", "expected-fail": " xfail",
         "unexpected-pass": " XPASS", "unsupported": " n/a", "skipped": " skipped"}


def _kind(nodeid: str) -> str | None:
    m = re.search(r"::test_invalid\[([^\]]*?)-[^-\]]*(?:-[a-z0-9]+)?\]$", nodeid)
    return m.group(1) if m else None


def indexing_table(results: list[dict[str, Any]]) -> list[str]:
    """One row per indexing op and implementation: the valid cases' outcome, and per
    invalid kind where the errors surfaced (call / sync / never) with the test outcome."""
    rows: dict[tuple[str, str], dict[str, set[str]]] = {}
    kinds: list[str] = []
    for r in results:
        if not (r.get("area") or "").startswith("indexing.") or "test_regressions" in r["nodeid"]:
            continue
        row = rows.setdefault((r["area"], r["impl"] or "-"), {})
        if "::test_valid[" in r["nodeid"]:
            row.setdefault("valid", set()).add(r["outcome"])
            continue
        kind = (r.get("params") or {}).get("kind") or _kind(r["nodeid"])
        if kind is None:
            continue
        if kind not in kinds:
            kinds.append(kind)
        where = {o.get("surfaced", "?") for o in (r.get("notes") or {}).get("outcomes", [])}
        cell = row.setdefault(kind, set())
        cell.update(where or {"-"})
        cell.add("@" + r["outcome"])
    if not rows:
        return []
    kinds.sort(key=lambda k: (KIND_ORDER.index(k) if k in KIND_ORDER else len(KIND_ORDER), k))

    def show(cell: set[str] | None) -> str:
        if not cell:
            return ""
        places = "/".join(sorted(c for c in cell if not c.startswith("@")))
        marks = "".join(sorted({_MARK.get(c[1:], " " + c[1:]) for c in cell
                                if c.startswith("@")}))
        return (places + marks).strip()

    lines = ["", "## Out-of-bounds indexing: where the errors surfaced", "",
             "Per invalid-index kind: call (raised by the call), sync (by the next "
             "synchronisation), never (silent out-of-bounds), with the test's outcome when "
             "it did not pass.", "",
             "| area | implementation | valid | " + " | ".join(f"`{k}`" for k in kinds) + " |",
             "|---|---|---|" + "---|" * len(kinds)]
    for (area, impl), row in sorted(rows.items()):
        valid = ", ".join(sorted(row.get("valid", set()))) or "-"
        lines.append(f"| {area} | `{impl}` | {valid} | "
                     + " | ".join(show(row.get(k)) for k in kinds) + " |")
    return lines
