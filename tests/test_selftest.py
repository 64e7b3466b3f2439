"""``torch-conformance selftest``: bad modules are one-line usage errors. Its runs of the
planted faults are tests/test_fault_list.py's (a user's module whose "fault" is correct:
survived, exit 1, there too)."""

from __future__ import annotations

import os
import subprocess
import sys


def _selftest(*args: str, cwd, pythonpath: str = "") -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [pythonpath,
                                                                      os.environ.get(
                                                                          "PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "conformance.cli", "selftest", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=900,
                          check=False)


def test_bad_modules_are_usage_errors(tmp_path):
    (tmp_path / "empty_faults.py").write_text("x = 1\n")
    for module, words in (("no_such_module_x", "import failed"),
                          ("empty_faults", "no SELFTEST list")):
        proc = _selftest("--no-planted", "--module", module, cwd=tmp_path,
                         pythonpath=str(tmp_path))
        assert proc.returncode == 4 and words in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
