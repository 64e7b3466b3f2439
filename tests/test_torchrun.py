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

# CI's oldest leg runs it too: torch.distributed.elastic's launcher and its process groups change
# between releases
pytestmark = pytest.mark.torch_release

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


def test_torchrun_stalled_rank(tmp_path: Path):
    """A rank that stalls once (tests/planted/collective_stall.py: rank 1 sleeps 14 s
    before its all_reduce) fails that case only, named as the likely cause (outside
    torch.distributed; the others wait in a collective); the next case waits for every
    rank, runs on a rebuilt group and passes, as do the rest; the job ends cleanly."""
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or \
        shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("[skipped] torchrun is not on PATH")
    report = tmp_path / "report"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT),
           "CONFORMANCE_STALL_S": "14"}
    cmd = [torchrun, "--standalone", "--nproc-per-node", "3", "-m", "conformance.areas.collectives",
           "--timeout", "60", "--device=cpu", "-q", "--no-builtins",
           "--impl", "collectives.all_reduce=tests.planted.collective_stall:"
                     "all_reduce_stalls_rank1_once",
           "-k", "TestAllReduce and (test_quiet or test_noncontiguous or "
                 "(test_collective and sum and float32))", "--report", str(report)]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    # torchrun itself prints a traceback for a rank that exits 1 (tests failed): none of
    # ours (the end of the job, the rebuild, the ranks' serving loop)
    # (our package's path: a venv under ~/.cache/torch-conformance/ is not ours)
    assert f"{ROOT / 'conformance'}/" not in proc.stderr, proc.stderr[-3000:]
    results = json.loads((report / "report.json").read_text())["results"]
    by_test = {r["nodeid"].split("::")[-1].split("[")[0]: r for r in results}
    stalled = by_test["test_quiet_ranks"]
    assert stalled["outcome"] == "failed", stalled
    text = json.dumps(stalled)
    assert "rank 1 stalled" in text and "likely cause" in text, text[:2000]
    assert "rank 0 stalled" in text and "waiting in a collective" in text
    others = [r for r in results if r is not stalled]
    assert others and all(r["outcome"] == "passed" for r in others), \
        [(r["nodeid"], r["outcome"]) for r in others]
    assert any(r["notes"].get("group_rebuilt") for r in others)
