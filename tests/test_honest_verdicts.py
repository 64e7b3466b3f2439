"""One honest outcome per collected test: a crashed worker, a hang, Ctrl-C and a time
budget never come out PASS (docs/reference/outcomes.md). Each scenario runs the topk area in a
child pytest with a planted implementation (tests/planted/run_breakers.py) and asserts the
verdict, the counts and the exit status."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import SUITE, TESTS

TOPK = str(SUITE / "topk" / "test_topk.py")
SELECT = ["-k", "float32 or int64"]  # ~70 tests: enough calls to break at the 30th
# no test path given (what the usage checks are about) and one area collected, not 10,000
# tests: the ini file's testpaths overridden, which leaves pytest's rootdir rule as it was
ONE_AREA = ["-o", "testpaths=conformance/areas/topk"]
BAD = ("failed", "error", "crashed", "timed-out", "unexpected-pass")


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))
    env["CONFORMANCE_PLANTED_DIR"] = str(tmp_path)
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _pytest(tmp_path: Path, impl: str, *args: str,
            timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", TOPK, *SELECT,
           "--no-builtins", f"--impl=topk=planted.run_breakers:{impl}",
           f"--report={tmp_path / 'r'}", *args]
    return subprocess.run(cmd, cwd=tmp_path, env=_env(tmp_path), capture_output=True,
                          text=True, timeout=timeout, check=False)


def _report(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "r" / "report.json").read_text())


def _one_outcome_each(report: dict) -> None:
    """Every collected test is in the results exactly once, and the counts add up."""
    ids = [r["nodeid"] for r in report["results"]]
    assert len(ids) == len(set(ids)) == report["collected"]
    assert sum(report["summary"].values()) == report["collected"]


def _shows_everywhere(tmp_path: Path, verdict: str) -> None:
    out = tmp_path / "r"
    assert f"verdict: **{verdict}**" in (out / "summary.md").read_text()
    assert f">{verdict}<" in (out / "report.html").read_text()
    junit = out / "junit.xml"
    if junit.exists():
        props = {p.get("name"): p.get("value")
                 for p in ET.parse(junit).getroot().iter("property")}
        assert props.get("conformance_verdict") == verdict


def test_a_clean_run_is_pass(tmp_path):
    run = _pytest(tmp_path, "slow", "-n", "0", "-k", "test_invalid_k_raises")
    assert run.returncode == 0, run.stdout[-3000:]
    report = _report(tmp_path)
    _one_outcome_each(report)
    assert report["verdict"] == "PASS" and report["exit_status"] == 0
    assert "torch-conformance verdict: PASS" in run.stdout
    _shows_everywhere(tmp_path, "PASS")


def test_segfault_under_xdist_is_crashed_and_the_run_goes_on(tmp_path):
    run = _pytest(tmp_path, "segfault", "-n", "2")
    assert run.returncode == 1, run.stdout[-3000:]
    report = _report(tmp_path)
    _one_outcome_each(report)
    assert report["summary"]["crashed"] == 1
    assert report["summary"]["not-run"] == 0  # a replacement worker ran the rest
    assert report["summary"]["passed"] == report["collected"] - 1
    crashed = next(r for r in report["results"] if r["outcome"] == "crashed")
    assert "Segmentation fault" in crashed["reason"], crashed["reason"]
    assert "segfault" in crashed["notes"]["stack"]  # the planted function is on the stack
    assert report["verdict"] == "FAIL" and report["exit_status"] == 1
    _shows_everywhere(tmp_path, "FAIL")


def test_a_test_that_poisons_the_device_is_named_and_its_worker_replaced(tmp_path):
    """With the between-test health probe on (forced on the CPU here), the test after
    which the device no longer computes is crashed, named as the one that left the device
    unusable, and a fresh worker runs the rest: every other test passes."""
    env_run = _env(tmp_path) | {"CONFORMANCE_DEVICE_PROBE": "1"}
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", TOPK, *SELECT,
           "--no-builtins", "--impl=topk=planted.run_breakers:poison",
           f"--report={tmp_path / 'r'}", "-n", "2"]
    run = subprocess.run(cmd, cwd=tmp_path, env=env_run, capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 1, run.stdout[-3000:]
    report = _report(tmp_path)
    _one_outcome_each(report)
    crashed = [r for r in report["results"] if r["outcome"] == "crashed"]
    assert len(crashed) == 1, [(r["nodeid"], r["outcome"]) for r in crashed]
    assert "left the device unusable" in crashed[0]["reason"], crashed[0]["reason"]
    assert "illegal memory access" in crashed[0]["reason"], crashed[0]["reason"]
    others = [r for r in report["results"] if r is not crashed[0]]
    assert others and not [r for r in others if r["outcome"] in BAD], \
        [(r["nodeid"], r["outcome"]) for r in others if r["outcome"] in BAD]
    assert report["summary"].get("not-run", 0) == 0


def test_segfault_in_process_leaves_a_journal_that_becomes_the_report(tmp_path):
    run = _pytest(tmp_path, "segfault", "-n", "0")
    assert run.returncode in (-signal.SIGSEGV, 128 + signal.SIGSEGV), run.returncode
    assert not (tmp_path / "r" / "report.json").exists()
    rebuilt = subprocess.run([sys.executable, "-m", "conformance.cli", "report",
                              str(tmp_path / "r")], env=_env(tmp_path), capture_output=True,
                             text=True, check=False)
    assert rebuilt.returncode == 2, rebuilt.stdout + rebuilt.stderr
    assert "INCOMPLETE" in rebuilt.stdout
    report = _report(tmp_path)
    _one_outcome_each(report)
    s = report["summary"]
    assert s["crashed"] == 1 and s["not-run"] > 0 and s["passed"] > 0
    assert report["verdict"] == "INCOMPLETE"
    crashed = next(r for r in report["results"] if r["outcome"] == "crashed")
    assert "Segmentation fault" in crashed["reason"]
    _shows_everywhere(tmp_path, "INCOMPLETE")


def test_os_exit_zero_mid_test_in_process_is_no_success(tmp_path):
    """Issue 64: with ``-n 0`` a library that calls ``os._exit(0)`` mid-test ended the run
    with status 0 and no verdict. The process now ends with status 71, the crash file names
    the test, and the report written from the journal says it crashed."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", TOPK, *SELECT,
           "--no-builtins", "--impl=topk=planted.blind_run_breakers:exit_zero_silently",
           "-n", "0", f"--report={tmp_path / 'r'}"]
    run = subprocess.run(cmd, cwd=tmp_path, env=_env(tmp_path), capture_output=True,
                         text=True, timeout=300, check=False)
    assert run.returncode == 71, (run.returncode, run.stderr[-2000:])
    assert "os._exit(0) called mid-test" in run.stderr, run.stderr[-2000:]
    rebuilt = subprocess.run([sys.executable, "-m", "conformance.cli", "report",
                              str(tmp_path / "r")], env=_env(tmp_path), capture_output=True,
                             text=True, check=False)
    assert rebuilt.returncode == 2 and "INCOMPLETE" in rebuilt.stdout, rebuilt.stdout
    report = _report(tmp_path)
    _one_outcome_each(report)
    (crashed,) = [r for r in report["results"] if r["outcome"] == "crashed"]
    assert "called os._exit(0)" in crashed["reason"], crashed["reason"]


def test_the_next_run_into_the_directory_writes_the_dead_runs_report_first(tmp_path):
    _pytest(tmp_path, "segfault", "-n", "0")
    run = _pytest(tmp_path, "slow", "-n", "0", "-k", "test_invalid_k_raises")
    assert run.returncode == 0, run.stdout[-3000:]
    assert "the previous run into" in run.stdout
    dead = json.loads((tmp_path / "r" / "incomplete-run" / "report.json").read_text())
    assert dead["verdict"] == "INCOMPLETE" and dead["summary"]["crashed"] == 1
    assert _report(tmp_path)["verdict"] == "PASS"


def test_a_hang_is_timed_out_with_its_stack_and_the_run_goes_on(tmp_path):
    start = time.monotonic()
    run = _pytest(tmp_path, "hang", "-n", "2", "--test-timeout", "5")
    assert time.monotonic() - start < 120
    assert run.returncode == 1, run.stdout[-3000:]
    report = _report(tmp_path)
    _one_outcome_each(report)
    assert report["summary"]["timed-out"] == 1 and report["summary"]["not-run"] == 0
    hung = next(r for r in report["results"] if r["outcome"] == "timed-out")
    assert "5" in hung["reason"] and "in hang" in hung["notes"]["stack"]
    assert report["verdict"] == "FAIL"


def test_ctrl_c_writes_the_report_with_the_rest_not_run(tmp_path):
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", TOPK, *SELECT,
           "--no-builtins", "--impl=topk=planted.run_breakers:hang", "-n", "0",
           f"--report={tmp_path / 'r'}"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    marker = tmp_path / "hang.done"
    deadline = time.monotonic() + 120
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert marker.exists(), "the planted hang was never reached"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2, out[-3000:]
    report = _report(tmp_path)
    _one_outcome_each(report)
    assert report["summary"]["not-run"] > 0 and report["summary"]["passed"] > 0
    assert report["verdict"] == "INCOMPLETE" and report["exit_status"] == 2
    assert "torch-conformance verdict: INCOMPLETE" in out


@pytest.mark.parametrize("allow", [False, True], ids=["budget", "allow-partial"])
def test_a_time_budget_leaves_tests_not_run(tmp_path, allow):
    run = _pytest(tmp_path, "slow", "-n", "0", "--time-budget", "3",
                  *(["--allow-partial"] if allow else []))
    report = _report(tmp_path)
    _one_outcome_each(report)
    s = report["summary"]
    assert s["not-run"] > 0 and s["skipped"] == 0
    assert not any(s[o] for o in BAD)
    if allow:
        assert run.returncode == 0 and report["verdict"] == "PASS"
    else:
        assert run.returncode == 2 and report["verdict"] == "INCOMPLETE"
        _shows_everywhere(tmp_path, "INCOMPLETE")


def test_an_existing_report_directory_outside_the_project_is_not_a_test_path(tmp_path):
    """pytest reads ``--report DIR`` (an existing DIR) as a test path before it knows the
    option: the run would collect from DIR with no ini file. A one-line usage error says
    to write ``--report=DIR``, which works."""
    (tmp_path / "r").mkdir()
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *ONE_AREA, "--co", "-q",
           "-k", "test_invalid_k_raises"]
    bad = subprocess.run([*cmd, "--report", str(tmp_path / "r")], cwd=SUITE.parents[1],
                         env=_env(tmp_path), capture_output=True, text=True, check=False)
    assert bad.returncode == 4
    lines = [line for line in bad.stderr.splitlines() if line.startswith("ERROR")]
    assert lines == [lines[0]] and f"write --report={tmp_path / 'r'}" in lines[0], bad.stderr
    good = subprocess.run([*cmd, f"--report={tmp_path / 'r'}"], cwd=SUITE.parents[1],
                          env=_env(tmp_path), capture_output=True, text=True, check=False)
    assert good.returncode == 0 and "tests/" not in good.stdout, good.stdout[-2000:]
    assert "test_topk.py::test_invalid_k_raises" in good.stdout, good.stdout[-2000:]


def test_a_new_report_directory_under_xdist_is_no_usage_error(tmp_path):
    """``-n 2 --report NEW``: the controller makes NEW before the workers start, so the
    workers see an existing path; the check is the controller's (it was a traceback), and
    the workers get ``--report=NEW`` (as a separate word NEW became their rootdir, outside
    the project: they collected with no ini file, the project's own tests too)."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *ONE_AREA, "-q", "-n", "2",
           "-k", "test_invalid_k_raises or test_the_order_proof_names_every_difference",
           "--allow-empty", "--report", str(tmp_path / "new")]
    run = subprocess.run(cmd, cwd=SUITE.parents[1], env=_env(tmp_path), capture_output=True,
                         text=True, check=False)
    assert "Traceback" not in run.stderr + run.stdout, (run.stdout + run.stderr)[-3000:]
    assert "UsageError" not in run.stderr, run.stderr[-2000:]
    assert (tmp_path / "new" / "report.json").exists(), run.stdout[-2000:]
    report = json.loads((tmp_path / "new" / "report.json").read_text())
    ran = re.search(r"(\d+) passed", run.stdout.splitlines()[-1])
    assert ran and int(ran.group(1)) == report["summary"]["passed"] > 0, run.stdout[-2000:]


# blind run-breakers (tests/planted/blind_run_breakers.py, written by a helper who had not
# read the suite): each breaks one test of the run once; under xdist the run goes on
BLIND = {"abort_in_runtime": "crashed", "exit_zero_silently": "crashed",
         "sigkill_self": "crashed", "hang_in_c_holding_gil": "timed-out",
         "raise_system_exit_zero": "failed", "c_stack_overflow": "crashed",
         "raise_keyboard_interrupt": None, "chdir_to_deleted_dir": "passed"}


@pytest.mark.parametrize("name", sorted(BLIND))
def test_blind_run_breakers(tmp_path, name):
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", TOPK, *SELECT,
           "--no-builtins", f"--impl=topk=planted.blind_run_breakers:{name}", "-n", "2",
           "--test-timeout", "5", f"--report={tmp_path / 'r'}"]
    run = subprocess.run(cmd, cwd=tmp_path, env=_env(tmp_path), capture_output=True,
                         text=True, timeout=300, check=False)
    report = _report(tmp_path)
    _one_outcome_each(report)
    expected = BLIND[name]
    if expected == "passed":  # correct results: the library's mischief breaks nothing
        assert run.returncode == 0 and report["verdict"] == "PASS", run.stdout[-2000:]
        return
    assert run.returncode != 0 and report["verdict"] != "PASS", run.stdout[-2000:]
    if expected is None:  # KeyboardInterrupt from a library stops the session: INCOMPLETE
        assert report["verdict"] == "INCOMPLETE" and report["summary"]["not-run"] > 0
        return
    assert report["summary"][expected] == 1, report["summary"]
    assert report["summary"]["passed"] == report["collected"] - 1
