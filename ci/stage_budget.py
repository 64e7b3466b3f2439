"""The CI stage budget's table: ``python3 ci/stage_budget.py LOG [TOTAL_SECONDS] [RC]``.

LOG has one line per finished stage, ``leg<TAB>stage<TAB>seconds<TAB>budget`` (written by
.ci/run's ``stage``, whose head holds the budgets). Prints one table (leg, stage, seconds,
budget, share of its budget) and then names every stage over its budget, and the run's
total against the sum of the budgets; a run that stopped early (RC not 0) says that the
stage after the last row did not finish. Exit 0 always: the table informs, the legs'
own exit codes decide CI. Standard library only (it runs outside every venv).
"""

from __future__ import annotations

import sys
from pathlib import Path


def rows(text: str) -> list[tuple[str, str, int, int]]:
    out = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 4:
            continue
        leg, stage, seconds, budget = parts
        out.append((leg, stage, int(seconds), int(budget)))
    return out


def table(found: list[tuple[str, str, int, int]], total: int | None = None,
          rc: int = 0) -> str:
    lines = ["| leg | stage | seconds | budget | of budget |", "|---|---|---:|---:|---:|"]
    for leg, stage, seconds, budget in found:
        share = f"{100 * seconds / budget:.0f} %" if budget else "no budget"
        lines.append(f"| {leg} | {stage} | {seconds} | {budget} | {share} |")
    over = [(leg, stage, s, b) for leg, stage, s, b in found if b and s > b]
    unbudgeted = [(leg, stage) for leg, stage, _, b in found if not b]
    whole = sum(b for *_, b in found)
    spent = total if total is not None else sum(s for _, _, s, _ in found)
    share = f"{100 * spent / whole:.0f} %" if whole else "-"
    lines.append(f"| all | total | {spent} | {whole or '-'} | {share} |")
    lines.append("")
    for leg, stage, s, b in over:
        lines.append(f"OVER BUDGET: {leg} {stage}: {s} s of {b} s (+{s - b} s)")
    for leg, stage in unbudgeted:
        lines.append(f"NO BUDGET: {leg} {stage} (add it to .ci/run's BUDGET)")
    if not over and not unbudgeted:
        lines.append("every stage within its budget")
    if rc:
        lines.append(f"CI stopped (exit {rc}) in the stage after the last row")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv or len(argv) > 3:
        print("usage: stage_budget.py LOG [TOTAL_SECONDS] [RC]", file=sys.stderr)
        return 4
    path = Path(argv[0])
    text = path.read_text() if path.is_file() else ""
    total = int(argv[1]) if len(argv) > 1 else None
    rc = int(argv[2]) if len(argv) > 2 else 0
    print("\n## CI stage budget (seconds)\n")
    print(table(rows(text), total, rc))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
