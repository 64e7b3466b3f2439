"""A run that hangs before its first test (an ``--impl`` module that never finishes importing,
a test module that never finishes collecting) ends within ``--startup-timeout`` with one line
naming what hung, never waits for ever, and is never PASS (conformance/run/startup.py).

Blind round (tests/planted/blind_startup_hangs.py, 17 hangs written by a helper who had not
read the watch): every kind ended the run, `-n 0 --startup-timeout 5`, torch 2.15.0: the 14
that leave a Python thread running with exit 2 and the line in 9-10 s, the three that hold
the GIL in C (at import, with signals blocked, in a ``conformance_name`` read) with exit 1 and
faulthandler's stacks in 14 s; the two that start a child process left it behind for up
to 90 s (``sleep 90``, reparented to init): the watch now kills the hung process's
descendants before it exits. Here one of each family runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import SUITE, TESTS

TOPK = str(SUITE / "topk" / "test_topk.py")
IMPL = "--impl=topk=planted.hang_at_import:topk"
BLIND = "--impl=topk=planted.blind_startup_hangs:topk"


def _run(args: list[str], cwd: Path, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), full.get("PYTHONPATH")]))
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS", "HANG_IN_C", "BLIND_STARTUP_HANG"):
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


SAYS = {"socket_accept": "importing planted.blind_startup_hangs:topk",  # a rendezvous
        "attr_dtypes": "reading the declarations of planted.blind_startup_hangs:topk",
        "subprocess_wait": "importing planted.blind_startup_hangs:topk",  # its child killed
        "attr_name": None,  # in C, holding the GIL: the backstop
        "": "PASS"}  # no hang: the helper's module is a correct implementation (the twin)


@pytest.mark.parametrize("kind", sorted(SAYS))
def test_blind_startup_hangs_end_the_run(tmp_path, kind):
    says = SAYS[kind]
    proc, took = _run([TOPK, "-k", "float32 and test_invalid_k", "-n", "0", "--no-builtins",
                       BLIND, "--startup-timeout", "4"],
                      tmp_path, BLIND_STARTUP_HANG=kind, BLIND_STARTUP_HANG_S="60")
    if says == "PASS":
        assert proc.returncode == 0 and "verdict: PASS" in proc.stdout, proc.stdout[-2000:]
    elif says is None:
        assert proc.returncode == 1 and proc.stderr.lstrip().startswith("Timeout ("), \
            proc.stderr[:500]
    else:
        assert proc.returncode == 2, (proc.stdout[-1500:], proc.stderr[-1500:])
        lines = [line for line in proc.stderr.splitlines() if line.startswith("ERROR")]
        assert len(lines) == 1 and says in lines[0], proc.stderr[-2000:]
        assert not _running_in(tmp_path)  # nothing the hung module started outlives the run
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
