"""Area-specific tables of summary.md: out-of-bounds indexing, per op and case kind; export
round trips, per model and path."""

from __future__ import annotations

import re
from typing import Any

# notes kept in report.json only (long per-case lists)
BULKY_NOTES = ("outcomes", "isolated", "accepted", "refused", "dynamic_dims",
               "max_abs_vs_eager", "build_seconds", "artefact_kind",
               "stack")  # a crashed or timed-out test's: under Failures  # export: its table
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


def _dims(dims: Any) -> str:
    if not isinstance(dims, dict):
        return "any (eager)" if dims is None else str(dims)
    parts = [f"{name}.{d}[{lo if lo is not None else ''}..{hi if hi is not None else ''}]"
             for name, per in dims.items() for d, (lo, hi) in (per or {}).items()]
    return ", ".join(parts) or "none (static)"


def export_table(results: list[dict[str, Any]]) -> list[str]:
    """One row per export round trip: outcome, worst margin, the dims that stayed dynamic
    (with their ranges), how many sizes ran and which were refused, the build time."""
    rows = [r for r in results if r.get("area") == "export"
            and "::test_roundtrip[" in r["nodeid"]]
    if not rows:
        return []
    lines = ["", "## Export round trips", "",
             "Per model, variant and path: the outcome, the worst margin of the error-ratio "
             "checks, the dims the program reports dynamic (input.dim[min..max]), the sizes "
             "accepted (checked against the oracle) and refused (batch x length), and the "
             "build time.", "",
             "| model | variant | path | dtype | outcome | margin | dynamic dims | accepted "
             "| refused | build s |", "|---|---|---|---|---|---|---|---|---|---|"]

    def key(r: dict[str, Any]) -> tuple:
        p = r.get("params") or {}
        return (p.get("model", ""), p.get("variant", ""), r["impl"] or "", r["dtype"] or "")

    for r in sorted(rows, key=key):
        p, n = r.get("params") or {}, r.get("notes") or {}
        margin = r.get("worst_margin")
        lines.append(
            f"| {p.get('model', '?')} | {p.get('variant', '?')} | `{r['impl']}` | {r['dtype']} "
            f"| {r['outcome']} | {'-' if margin is None else f'{margin:.3g}'} "
            f"| {_dims(n.get('dynamic_dims')) if 'build_seconds' in n else '-'} "
            f"| {len(n.get('accepted') or [])} | {', '.join(n.get('refused') or {}) or '-'} "
            f"| {n.get('build_seconds', '-')} |")
    return lines


_SHORT = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "expected-fail": "xfail",
          "unexpected-pass": "XPASS", "unsupported": "-", "skipped": "skip"}


def _graphs_column(nodeid: str) -> str:
    test, _, params = nodeid.split("::")[-1].partition("[")
    test = test.removeprefix("test_")
    if test == "replay_equals_eager":
        return params.rstrip("]").split("-")[-1]
    return test


def graphs_table(results: list[dict[str, Any]]) -> list[str]:
    """One row per graph runtime, one column per workload of the replay check and per other
    graphs check (regressions included): each case's outcome, per dtype where it has one."""
    rows = [r for r in results if r.get("area") == "graphs"]
    if not rows:
        return []
    cols: dict[str, None] = {}
    dtypes: dict[str, None] = {}
    cells: dict[str, dict[str, dict[str, str]]] = {}
    for r in rows:
        col = _graphs_column(r["nodeid"])
        cols.setdefault(col, None)
        dtype = r["dtype"] or ""
        if dtype:
            dtypes.setdefault(dtype, None)
        cells.setdefault(r["impl"] or "?", {}).setdefault(col, {})[dtype] = \
            _SHORT.get(r["outcome"], r["outcome"])
    order = [*dtypes, ""]

    def show(cell: dict[str, str] | None) -> str:
        if not cell:
            return " "
        return " / ".join(cell[d] for d in order if d in cell)

    replay = {_graphs_column(r["nodeid"]) for r in rows
              if "::test_replay_equals_eager[" in r["nodeid"]}
    names = [c for c in cols if c in replay] + [c for c in cols if c not in replay]
    lines = ["", "## Graph capture and replay", "",
             "Per runtime: replay against eager per workload, then the other checks; where a "
             f"case runs per dtype, the outcomes are {' / '.join(dtypes) or 'per dtype'} "
             "(FAIL: a check failed; -: unsupported by design; skip: missing hardware or "
             "build).", "",
             "| runtime | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for impl, row in sorted(cells.items()):
        lines.append(f"| `{impl}` | " + " | ".join(show(row.get(c)) for c in names) + " |")
    return lines


def area_times(report: dict[str, Any]) -> list[tuple[str, float, int]]:
    """(area, summed test seconds, tests) per area, costliest first."""
    totals: dict[str, list[float]] = {}
    for r in report["results"]:
        t = totals.setdefault(r["area"] or "-", [0.0, 0])
        t[0] += r.get("duration_s") or 0.0
        t[1] += 1
    return sorted(((a, round(s, 1), int(n)) for a, (s, n) in totals.items()),
                  key=lambda x: -x[1])


def times_table(report: dict[str, Any]) -> list[str]:
    """Summed test time per area (all workers), costliest first."""
    rows = area_times(report)
    if not rows:
        return []
    total = sum(s for _, s, _ in rows) or 1.0
    lines = ["", "## Time per area", "",
             "Summed test durations (setup, call, teardown) over all workers; the wall time "
             "is about this over the worker count.", "",
             "| area | seconds | share | tests |", "|---|---|---|---|"]
    lines += [f"| {a} | {s:.1f} | {100 * s / total:.0f}% | {n} |" for a, s, n in rows]
    return lines


def gpu_identity(device: dict[str, Any]) -> str | None:
    """One line naming the GPU a report ran on (index, UUID, PCI address, driver, VBIOS;
    each "?" where the probe could not read it), or None for a device without them."""
    keys = ("uuid", "pci_bus_id", "driver_version", "vbios_version")
    if device.get("index") is None and not any(device.get(k) for k in keys):
        return None
    parts = [f"index {device.get('index', '?')}"]
    parts += [f"{label} {device.get(k) or '?'}" for label, k in
              (("UUID", "uuid"), ("PCI", "pci_bus_id"), ("driver", "driver_version"),
               ("VBIOS", "vbios_version"))]
    unknown = device.get("identity_unknown")
    if unknown:
        parts.append("unread: " + "; ".join(f"{k}: {v}" for k, v in dict(unknown).items())
                     if isinstance(unknown, dict) else f"unread: {unknown}")
    return ", ".join(parts)
