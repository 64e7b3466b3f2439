"""``torch-conformance selftest``: the planted faults of two areas are all killed and their
twins pass; a user's module whose "fault" is really correct shows as survived (exit 1);
bad modules are one-line usage errors."""

from __future__ import annotations

import json
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


def test_planted_faults_killed(tmp_path):
    out = tmp_path / "st.json"
    proc = _selftest("--area", "special.erfcx", "--area", "grid_sample", "--json", str(out),
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert "detection power: 8 of 8 planted faults killed" in proc.stdout, proc.stdout
    data = json.loads(out.read_text())
    assert data["areas"]["grid_sample"] == {"faults": 5, "killed": 5, "twins": 1,
                                            "twins_pass": 1, "survived": [],
                                            "twins_failing": []}
    assert all(e["outcomes"] for e in data["entries"])


def test_a_surviving_fault_fails(tmp_path):
    (tmp_path / "my_faults.py").write_text(
        "import torch\n"
        "def not_a_fault(x):\n    return torch.special.erfcx(x)\n"
        "not_a_fault.conformance_name = 'mine'\n"
        "not_a_fault.conformance_dtypes = ['float32']\n"
        "SELFTEST = [{'area': 'special.erfcx', 'impl': 'not_a_fault', 'expect': 'killed',\n"
        "             'path': 'special/test_erfcx.py', 'select': 'mine and test_forward'}]\n")
    proc = _selftest("--no-planted", "--module", "my_faults", cwd=tmp_path,
                     pythonpath=str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert "my_faults:not_a_fault" in proc.stdout and "0 of 1 planted" in proc.stdout


def test_bad_modules_are_usage_errors(tmp_path):
    (tmp_path / "empty_faults.py").write_text("x = 1\n")
    for module, words in (("no_such_module_x", "import failed"),
                          ("empty_faults", "no SELFTEST list")):
        proc = _selftest("--no-planted", "--module", module, cwd=tmp_path,
                         pythonpath=str(tmp_path))
        assert proc.returncode == 4 and words in proc.stderr, proc.stderr
        assert "Traceback" not in proc.stderr
