"""The collectives areas under torchrun on one host (``--standalone``): rank 0 runs the
tests, every rank runs the cases, the usual report comes out; and the usage error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_outside_torchrun_is_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "conformance.areas.collectives"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4
    assert proc.stderr.startswith("error: run this under torchrun")
    assert "Traceback" not in proc.stderr


def test_torchrun_standalone(tmp_path: Path):
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or \
        shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("[skipped] torchrun is not on PATH")
    report = tmp_path / "report"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [torchrun, "--standalone", "--nproc-per-node", "3", "-m", "conformance.areas.collectives",
           "--device=cpu", "-q", "-k", "(TestAllReduce and sum and float32) or "
           "(TestAllToAllSingle and float64) or tp_mlp", "--report", str(report)]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((report / "report.json").read_text())
    results = data["results"]
    assert results and all("gloo-w3" in r["nodeid"] for r in results)
    outcomes = {r["outcome"] for r in results}
    assert "passed" in outcomes and "failed" not in outcomes, outcomes
    assert any(r["notes"].get("backend") == "gloo" and r["notes"].get("world") == 3
               for r in results)
