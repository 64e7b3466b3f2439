"""Failures grouped for triage: area -> check -> implementation, with dtype counts and the
first example of each group.

One planted bug typically fails the same check of one implementation at every dtype and
shape: a hundred failures are a handful of groups. The terminal summary, summary.md and
report.html all show these groups (most failures first); ``--repro-dir`` writes one
reproducer per group. Works on the report's result dicts, so a merged report groups the
same way.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from conformance.harness.outcomes import BAD_OUTCOMES

_PARAMS = re.compile(r"\[.*\]$")


def check_of(nodeid: str) -> str:
    """The check a test id belongs to: its test function, without parameters
    (``conformance/areas/topk/test_topk.py::test_values[x]`` -> ``test_topk.py::test_values``)."""
    path, _, name = nodeid.partition("::")
    return f"{path.rsplit('/', 1)[-1]}::{_PARAMS.sub('', name)}" if name else path


def group_key(result: dict[str, Any]) -> tuple[str, str, str]:
    """(area, check, implementation) of one result."""
    return (result.get("area") or "-", check_of(result["nodeid"]), result.get("impl") or "-")


def short_reason(reason: str, width: int = 160) -> str:
    text = " ".join((reason or "").split())
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass
class Group:
    """The failures of one check of one implementation in one area."""

    area: str
    check: str
    impl: str
    results: list[dict[str, Any]] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.results)

    @property
    def first(self) -> dict[str, Any]:
        return self.results[0]

    @property
    def outcomes(self) -> Counter[str]:
        return Counter(r["outcome"] for r in self.results)

    @property
    def dtypes(self) -> Counter[str]:
        return Counter(str(r.get("dtype") or "-") for r in self.results)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.area, self.check, self.impl)

    @property
    def slug(self) -> str:
        """A file-name-safe name for the group (its reproducer's stem)."""
        raw = f"{self.area}-{self.check.split('::')[-1]}-{self.impl}"
        return re.sub(r"[^A-Za-z0-9_.-]+", "_", raw).strip("_")[:120]

    def counts_text(self) -> str:
        outcomes = ", ".join(f"{n} {o}" for o, n in self.outcomes.most_common())
        dtypes = ", ".join(f"{d} {n}" for d, n in sorted(self.dtypes.items()))
        return f"{outcomes}; dtypes: {dtypes}"

    def to_json(self) -> dict[str, Any]:
        return {"area": self.area, "check": self.check, "impl": self.impl,
                "count": self.count, "outcomes": dict(self.outcomes),
                "dtypes": dict(self.dtypes), "first": self.first["nodeid"],
                "reason": self.first.get("reason", ""),
                "reproduce": self.first.get("reproduce"),
                "tests": [r["nodeid"] for r in self.results]}


def group_failures(results: Iterable[dict[str, Any]],
                   outcomes: tuple[str, ...] = BAD_OUTCOMES) -> list[Group]:
    """The results with one of ``outcomes`` grouped; most failures first, then by key.
    Within a group the results keep their order (the first is the example)."""
    groups: dict[tuple[str, str, str], Group] = {}
    for r in results:
        if r["outcome"] not in outcomes:
            continue
        key = group_key(r)
        groups.setdefault(key, Group(*key)).results.append(r)
    return sorted(groups.values(), key=lambda g: (-g.count, g.key))


def by_area(groups: list[Group]) -> dict[str, list[Group]]:
    """The groups under their area (areas with most failures first)."""
    out: dict[str, list[Group]] = {}
    for g in groups:
        out.setdefault(g.area, []).append(g)
    return dict(sorted(out.items(), key=lambda kv: (-sum(g.count for g in kv[1]), kv[0])))


def shared_reason(groups: list[Group]) -> tuple[str | None, int]:
    """The one reason most failures give, when they span several groups (a cause outside
    any one check: a budget, a missing package, a broken device), and how many give it."""
    if len(groups) < 3:
        return None, 0
    counts: dict[str, int] = {}
    for g in groups:
        for r in g.results:
            counts[r.get("reason", "")] = counts.get(r.get("reason", ""), 0) + 1
    reason, n = max(counts.items(), key=lambda kv: kv[1])
    total = sum(g.count for g in groups)
    return (reason, n) if reason and n >= 0.9 * total else (None, 0)


SHOWN_GROUPS = 8  # in the terminal; report.html and summary.md list every group


def terminal_lines(groups: list[Group], where: str | None, shown: int = SHOWN_GROUPS) -> list[str]:
    """The terminal's grouped failure summary: per group a head line (counts, dtypes), the
    first example's reason and reproduce line; at most ``shown`` groups, 4 lines each."""
    total = sum(g.count for g in groups)
    lines = [f"{total} failure{'s' if total != 1 else ''} in {len(groups)} "
             f"group{'s' if len(groups) != 1 else ''} (area / check / implementation):"]
    reason, same = shared_reason(groups)
    if reason is not None:
        lines.append(f"  {same} of them in {len(groups)} groups give one reason: "
                     f"{short_reason(reason, 240)}")
    for g in groups[:shown]:
        lines.append(f"  [{g.area}] {g.check}  impl={g.impl}: {g.counts_text()}")
        lines.append(f"      e.g. {g.first['nodeid'].split('::', 1)[-1]}: "
                     f"{short_reason(g.first.get('reason', ''), 140)}")
        if g.first.get("reproduce"):
            lines.append(f"      reproduce: {g.first['reproduce']}")
    if len(groups) > shown:
        rest = groups[shown:]
        lines.append(f"  ... {len(rest)} more groups ({sum(g.count for g in rest)} failures)"
                     + (f": {where}" if where else ": run with --report DIR to see them all"))
    elif where:
        lines.append(f"  every failure, with its reason and stack: {where}")
    return lines


def markdown_lines(groups: list[Group]) -> list[str]:
    """summary.md's grouped failure table (one row per group) and each group's tests."""
    if not groups:
        return []
    lines = ["| area | check | implementation | failures | dtypes | first example | reason |",
             "|---|---|---|---|---|---|---|"]
    for g in groups:
        dtypes = ", ".join(f"{d} {n}" for d, n in sorted(g.dtypes.items()))
        reason = short_reason(g.first.get("reason", ""), 200).replace("|", "\\|")
        lines.append(f"| {g.area} | `{g.check}` | `{g.impl}` | {g.count} | {dtypes} | "
                     f"`{g.first['nodeid'].split('::', 1)[-1]}` | {reason} |")
    return lines
