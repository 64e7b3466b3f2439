"""CI's stage budget (.ci/run, ci/stage_budget.py): every stage .ci/run times has a budget,
the budgets sum to the 30 minutes CI is held to, and the table names a stage over its
budget, a stage with none, and a run that stopped."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.harness_only  # no torch involved

ROOT = Path(__file__).parents[1]
RUN = ROOT / ".ci" / "run"
TABLE = ROOT / "ci" / "stage_budget.py"


def _budgets() -> dict[tuple[str, str], int]:
    text = RUN.read_text()
    block = text[text.index("declare -A BUDGET=("):]
    block = block[:block.index("\n)\n")]
    return {tuple(k.split("/", 1)): int(v)
            for k, v in re.findall(r"\[([^\]]+)\]=(\d+)", block)}


def _stages() -> set[tuple[str, str]]:
    found = re.findall(r'^\s*stage (\w+) ("[^"]+"|\w+)\s*$', RUN.read_text(), re.M)
    return {(leg, name.strip('"')) for leg, name in found}


def test_every_timed_stage_has_a_budget_and_every_budget_a_stage():
    assert _stages() and _stages() == set(_budgets())


def test_the_budgets_fit_thirty_minutes():
    assert sum(_budgets().values()) <= 30 * 60


def _table(tmp_path: Path, rows: list[str], *extra: str) -> subprocess.CompletedProcess:
    log = tmp_path / "stages.tsv"
    log.write_text("".join(f"{r}\n" for r in rows))
    return subprocess.run([sys.executable, str(TABLE), str(log), *extra],
                          capture_output=True, text=True, check=False, timeout=60)


def test_the_table_names_a_stage_over_its_budget(tmp_path):
    proc = _table(tmp_path, ["newest\tinstall\t100\t120", "newest\tproject tests\t700\t600"],
                  "810")
    assert proc.returncode == 0, proc.stderr
    assert "| newest | project tests | 700 | 600 | 117 % |" in proc.stdout
    assert "OVER BUDGET: newest project tests: 700 s of 600 s (+100 s)" in proc.stdout
    assert "OVER BUDGET: newest install" not in proc.stdout
    assert "| all | total | 810 | 720 |" in proc.stdout


def test_within_budget_unbudgeted_and_stopped(tmp_path):
    ok = _table(tmp_path, ["oldest\tinstall\t10\t90"])
    assert "every stage within its budget" in ok.stdout and "stopped" not in ok.stdout
    stray = _table(tmp_path, ["oldest\tsomething new\t10\t0"], "10", "1")
    assert "NO BUDGET: oldest something new" in stray.stdout
    assert "CI stopped (exit 1) in the stage after the last row" in stray.stdout


def test_bad_usage_is_exit_4():
    proc = subprocess.run([sys.executable, str(TABLE)], capture_output=True, text=True,
                          check=False, timeout=60)
    assert proc.returncode == 4 and "usage:" in proc.stderr and "Traceback" not in proc.stderr
