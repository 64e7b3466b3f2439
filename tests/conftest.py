"""Helpers for the project's own tests: run the suite in a child pytest process."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

import conformance
from tests.forkserver import run_pytest

pytest_plugins = ["pytester"]

SUITE = Path(conformance.__file__).parent / "areas"  # the area folders
TESTS = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kernel_compile: compiles every CuTe DSL kernel (no torch involved; CI runs "
                   "these on the newest torch only)")
    config.addinivalue_line(
        "markers", "harness_only: tests the harness or the torch-free oracles, not torch's "
                   "behaviour (CI runs these on the newest torch only)")
    config.addinivalue_line(
        "markers", "torch_release: the result depends on torch's release (an API or a "
                   "behaviour that changed between releases, or the release's own triton): "
                   "CI's oldest leg runs these too, every other project test on the newest "
                   "torch only")


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
    cmd = ["-p", "no:cacheprovider", *args]
    report_dir = tmp_path / "report"
    if report:
        cmd.append(f"--report={report_dir}")
    proc = run_pytest(cmd, tmp_path, env, timeout)  # forked from a server where it can be
    data = None
    if report and (report_dir / "report.json").exists():
        data = json.loads((report_dir / "report.json").read_text())
    return SuiteRun(proc.returncode, proc.stdout, proc.stderr, data,
                    report_dir)


@pytest.fixture
def suite(tmp_path: Path):
    def run(*args: str, report: bool = True) -> SuiteRun:
        return run_suite(list(args), tmp_path, report=report)

    return run


PLANTED_SELECTION = [str(SUITE / "special" / "test_erfcx.py"), "-n", "0", "-q",
                     "-k", "(float32 or float16) and not (backward_huge and vendor)"]


def _load(report_dir: Path) -> SuiteRun:
    meta = json.loads((report_dir.parent / "run.json").read_text())
    path = report_dir / "report.json"
    data = json.loads(path.read_text()) if path.exists() else None
    return SuiteRun(meta["returncode"], meta["stdout"], meta["stderr"], data, report_dir)


def shared_run(factory: pytest.TempPathFactory, name: str, args: list[str]) -> SuiteRun:
    """The child run ``name`` (``args``), made once per test session and shared by every test
    that reads it, on every xdist worker (a file lock): one start-up and one collection for
    all the implementations it judges."""
    from filelock import FileLock

    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by the workers of this session
    where = base / f"shared-{name}"
    with FileLock(str(base / f"shared-{name}.lock")):
        if not (where / "run.json").exists():
            where.mkdir(exist_ok=True)
            run = run_suite(args, where)
            (where / "run.json").write_text(json.dumps(
                {"returncode": run.returncode, "stdout": run.stdout, "stderr": run.stderr}))
    return _load(where / "report")


@pytest.fixture(scope="session")
def erfcx_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SuiteRun]:
    """Two small reports of the same selection, made once per test session and shared by
    the xdist workers: torch's erfcx and a vendor's, whose ``clean`` build is right and
    whose ``planted`` build regressed to the naive formula (same test ids); for the report,
    diff and merge tests."""
    runs = {}
    for name, build in (("clean", "build_1"), ("planted", "build_2")):
        extra = [f"--impl=special.erfcx=planted.vendor_builds:{build}"]
        runs[name] = shared_run(tmp_path_factory, f"erfcx-{name}", [*PLANTED_SELECTION, *extra])
        assert runs[name].report is not None, runs[name].output[-2000:]
    return runs
