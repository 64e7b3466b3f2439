"""Helpers for the project's own tests: run the suite in a child pytest process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import conformance

pytest_plugins = ["pytester"]

SUITE = Path(conformance.__file__).parent
TESTS = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kernel_compile: compiles every CuTe DSL kernel (no torch involved; CI runs "
                   "these on the newest torch only)")
    config.addinivalue_line(
        "markers", "harness_only: tests the harness or the torch-free oracles, not torch's "
                   "behaviour (CI runs these on the newest torch only)")


@dataclass
class SuiteRun:
    returncode: int
    stdout: str
    stderr: str
    report: dict | None
    report_dir: Path

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def by_impl(self) -> dict[str, list[dict]]:
        """The report's results grouped by implementation name."""
        out: dict[str, list[dict]] = {}
        for r in (self.report or {}).get("results", []):
            out.setdefault(r["impl"], []).append(r)
        return out


def run_suite(args: list[str], tmp_path: Path, *, report: bool = True,
              timeout: float = 600) -> SuiteRun:
    """Run ``pytest`` in a child process (planted modules importable as ``planted.*``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args]
    report_dir = tmp_path / "report"
    if report:
        cmd.append(f"--report={report_dir}")
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)
    data = None
    if report and (report_dir / "report.json").exists():
        data = json.loads((report_dir / "report.json").read_text())
    return SuiteRun(proc.returncode, proc.stdout, proc.stderr, data, report_dir)


@pytest.fixture
def suite(tmp_path: Path):
    def run(*args: str, report: bool = True) -> SuiteRun:
        return run_suite(list(args), tmp_path, report=report)

    return run
