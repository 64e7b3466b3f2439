"""Compare the per-test outcomes of several qualification reports of the same build (run in
other orders and at other worker counts): ``python ci/order_proof.py LABEL=DIR ... [-o MD]``.

Prints (and writes with ``-o``) a table of the runs (order, workers, wall time, counts)
and every test whose outcome differs between them; exit 1 when one does (or a run lacks
tests another has), 4 on bad input. Used by ci/order-proof.sh; tests/test_order_proof.py
checks it on small reports.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def load(spec: str) -> tuple[str, dict]:
    label, _, path = spec.partition("=")
    if not path:
        raise ValueError(f"{spec!r} is not LABEL=DIR")
    report = Path(path) / "report.json"
    if not report.is_file():
        raise ValueError(f"{path}: no report.json")
    data = json.loads(report.read_text())
    wall = Path(path) / "seconds"  # written by ci/order-proof.sh
    data["wall_seconds"] = float(wall.read_text()) if wall.is_file() else None
    return label, data


def compare(runs: list[tuple[str, dict]]) -> tuple[list[str], list[str]]:
    """(table lines, difference lines) for the runs."""
    outcomes = {label: {r["nodeid"]: r["outcome"] for r in rep["results"]}
                for label, rep in runs}
    lines = ["| run | command | wall | verdict | " + " | ".join(
        ("passed", "failed", "expected-fail", "unsupported", "skipped", "other")) + " |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for label, rep in runs:
        counts = Counter(outcomes[label].values())
        main = ("passed", "failed", "expected-fail", "unsupported", "skipped")
        other = sum(n for o, n in counts.items() if o not in main)
        wall = rep.get("wall_seconds")
        lines.append(f"| {label} | `{rep['run']['command']}` | "
                     f"{f'{wall:.0f} s' if isinstance(wall, (int, float)) else '-'} | "
                     f"{rep.get('verdict')} | " + " | ".join(str(counts.get(o, 0)) for o in main)
                     + f" | {other} |")
    ids = sorted(set().union(*(o.keys() for o in outcomes.values())))
    diffs = []
    for nodeid in ids:
        seen = {label: outcomes[label].get(nodeid, "absent") for label, _ in runs}
        if len(set(seen.values())) > 1:
            diffs.append(f"- `{nodeid}`: " + ", ".join(f"{k} {v}" for k, v in seen.items()))
    return lines, diffs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="LABEL=DIR")
    ap.add_argument("-o", "--output", default=None)
    args = ap.parse_args(argv)
    try:
        runs = [load(s) for s in args.runs]
    except (ValueError, OSError, json.JSONDecodeError) as exc:
        print(f"order_proof: {exc}", file=sys.stderr)
        return 4
    table, diffs = compare(runs)
    n = len({r["nodeid"] for _, rep in runs for r in rep["results"]})
    summary = f"{n} tests; {len(diffs)} with an outcome that differs between runs"
    text = "\n".join([*table, "", summary + (":" if diffs else "."), *diffs]) + "\n"
    print(text, end="")
    if args.output:
        Path(args.output).write_text(text)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
