"""The fork server behind the child suite runs gives what a new process gives: the run's
working directory, environment, ``sys.path`` and exit status; a timeout kills the run's
process group; a run whose environment differs in anything an import may have read starts a
new process instead."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests import forkserver

pytestmark = [pytest.mark.harness_only,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]

PROBE = """
import os, sys, time
def test_where(tmp_path):
    import helper_mod
    print("PPID", os.getppid(), "CWD", os.getcwd(), "MOD", helper_mod.__file__)
    print("TESTS-IMPORTED", "tests.forkserver" in sys.modules)
    assert os.environ["PYTHONPATH"].endswith("lib")
def test_sleep():
    if os.environ.get("PROBE_SLEEP"):
        time.sleep(120)
"""


def _setup(tmp_path):
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "helper_mod.py").write_text("X = 1\n")
    (tmp_path / "test_probe.py").write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_XDIST_WORKER",
                                                            "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(tmp_path / "lib")
    return env


def test_forked_run_is_a_fresh_pytest(tmp_path):
    env = _setup(tmp_path)
    server = forkserver.ForkServer(env)
    try:
        assert server.serves(env)
        proc = server.run(["-p", "no:cacheprovider", "-s", "-q", "test_probe.py"], tmp_path,
                          env, timeout=120)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert f"PPID {server.proc.pid} CWD {tmp_path} MOD {tmp_path / 'lib'}" in proc.stdout
        assert "TESTS-IMPORTED False" in proc.stdout and "Warning" not in proc.stderr
        failing = server.run(["-p", "no:cacheprovider", "-q", "test_probe.py", "-k", "nope"],
                             tmp_path, env, timeout=120)
        assert failing.returncode == 5, failing.stdout  # nothing collected, as pytest says
        # a timeout kills the run (and its group) and says so, as subprocess.run does
        slow = {**env, "PROBE_SLEEP": "1"}
        assert not server.serves(slow)  # an environment an import may have read
        with pytest.raises(subprocess.TimeoutExpired):
            server.run(["-p", "no:cacheprovider", "-q", "test_probe.py", "-k", "sleep"],
                       tmp_path, slow, timeout=3)
        again = server.run(["-p", "no:cacheprovider", "-q", "test_probe.py", "-k", "where"],
                           tmp_path, env, timeout=120)
        assert again.returncode == 0, again.stdout
    finally:
        server.close()
    assert server.proc.poll() is not None


def test_other_environments_start_a_process(tmp_path, monkeypatch):
    env = _setup(tmp_path)
    server = forkserver.ForkServer(env)
    monkeypatch.setattr(forkserver, "_SERVER", server)
    other = {**env, "CONFORMANCE_SOMETHING_ELSE": "1"}
    proc = forkserver.run_pytest(["-p", "no:cacheprovider", "-s", "-q", "test_probe.py",
                                  "-k", "where"], tmp_path, other, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    server.close()
    assert f"PPID {os.getpid()} " in proc.stdout
    assert "Warning" not in proc.stderr, proc.stderr
