"""A run that hangs before its first test (an ``--impl`` module that never finishes importing,
a test module that never finishes collecting) ends within ``--startup-timeout`` with one line
naming what hung, never waits for ever, and is never PASS (conformance/run/startup.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import SUITE, TESTS

TOPK = str(SUITE / "topk" / "test_topk.py")
IMPL = "--impl=topk=planted.hang_at_import:topk"


def _run(args: list[str], cwd: Path, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), full.get("PYTHONPATH")]))
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS", "HANG_IN_C"):
        full.pop(name, None)
    full.update(env)
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           *args], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=110, check=False)  # the planted hang lasts 120 s
    return proc, time.monotonic() - start


def test_an_impl_that_hangs_at_import_ends_the_run_with_one_line(tmp_path):
    proc, took = _run([TOPK, "-n", "0", "--no-builtins", IMPL, "--startup-timeout", "5"],
                      tmp_path)
    assert proc.returncode == 2, (proc.stdout[-1500:], proc.stderr[-1500:])
    lines = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert ("start-up did not finish within 5 s: importing planted.hang_at_import:topk"
            in lines[0]), lines
    stacks = Path(lines[0].split("every thread's stack: ")[1].split(";")[0])
    assert "hang_at_import.py" in stacks.read_text()  # where it hung, for the user
    stacks.unlink()
    assert took < 60, took


def test_a_hang_in_c_holding_the_gil_is_ended_by_the_backstop(tmp_path):
    """No Python thread runs while C code holds the GIL: faulthandler's C watchdog ends the
    process as long again after the limit, with every stack."""
    proc, took = _run([TOPK, "-n", "0", "--no-builtins", IMPL, "--startup-timeout", "4"],
                      tmp_path, HANG_IN_C="1")
    assert proc.returncode == 1, (proc.stdout[-1500:], proc.stderr[-1500:])
    assert proc.stderr.lstrip().startswith("Timeout (0:00:08)!"), proc.stderr[:500]
    assert "hang_at_import.py" in proc.stderr
    assert took < 60, took


def test_a_collection_that_hangs_under_xdist_stops_the_run_incomplete(tmp_path):
    """The worker's watch ends it and leaves its line; the controller stops the run there
    (no replacement worker hangs again) and the report is INCOMPLETE, verified."""
    tests = tmp_path / "hangs"
    tests.mkdir()
    (tests / "test_never_collected.py").write_text(
        "import time\ntime.sleep(120)\n\n\ndef test_x():\n    pass\n")
    report = tmp_path / "r"
    proc, took = _run([str(tests), "-n", "2", "--no-builtins", "--allow-empty",
                       "--startup-timeout", "10", f"--report={report}"], tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-3000:]
    assert "start-up did not finish within 10 s (xdist worker gw" in out and "collection" in out
    assert out.count("node down") == 1, out[-3000:]  # stopped at the first worker's line
    data = json.loads((report / "report.json").read_text())
    assert data["verdict"] == "INCOMPLETE" and data["exit_status"] == 2, data["summary"]
    assert any("start-up did not finish" in w for w in data["warnings"]), data["warnings"]
    verify = subprocess.run([sys.executable, "-m", "conformance.cli.main", "verify",
                             str(report)], capture_output=True, text=True, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert took < 90, took
    assert not _running_in(tmp_path)  # no worker left collecting


def _running_in(folder: Path) -> list[int]:
    """The processes whose working directory is ``folder`` (the run's workers had it)."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and Path(os.readlink(proc / "cwd")) == folder:
                pids.append(int(proc.name))
        except OSError:
            continue
    return pids
