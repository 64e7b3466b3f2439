"""The GPU campaign (conformance/cli/campaign.py, ci/gpu-campaign.sh): its dry run on the CPU
writes the deliverable within the device tool's limits, a stage past its budget is killed
with its process group and recorded, and the benchmark ratios meet or miss their targets as
measured. CI runs the whole dry run (.ci/run); here three stages of it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.cli import campaign
from conformance.report import campaign_summary

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("campaign")
    proc = subprocess.run(["bash", str(ROOT / "ci" / "gpu-campaign.sh"), "--dry-run", str(out),
                           "--only", "toolchain,benchmark,graphs"], capture_output=True,
                          text=True, timeout=400, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


def test_dry_run_writes_the_deliverable_within_the_device_limits(dry_run):
    files = sorted(p for p in dry_run.rglob("*") if p.is_file())
    assert [p.name for p in files] == sorted(
        ["README.md", "benchmark.json", "environment.txt", "junit.xml", "report.html",
         "report.json", "stages.tar.gz", "summary.md"])
    assert all(p.parent == dry_run for p in files)  # at most eight files, no sub-folders
    assert all(p.stat().st_size < 16 * 2**20 for p in files)
    assert sum(p.stat().st_size for p in files) < 64 * 2**20


def test_dry_run_readme_and_merged_report(dry_run):
    readme = (dry_run / "README.md").read_text()
    assert readme.startswith("# GPU campaign: a dry run on the CPU")
    for stage in ("toolchain", "benchmark", "graphs"):
        assert f"| {stage} |" in readme
    assert "## Benchmark" in readme and "| sdpa.math | 128 | 64 |" in readme
    assert "not measured: triton_fa, sdpa.flash" in readme  # the CPU has no GPU backends
    merged = json.loads((dry_run / "report.json").read_text())
    areas = {r["area"] for r in merged["results"]}
    assert {"toolchain", "graphs"} <= areas
    assert [m["command"] for m in merged["run"]["merged_from"]] and len(
        merged["run"]["merged_from"]) == 2


def test_a_stage_past_its_budget_is_killed_with_its_children(tmp_path):
    marker = "31.4159"  # a sleep only this test starts
    script = f"import subprocess, time; subprocess.Popen(['sleep', '{marker}']); time.sleep(60)"
    start = time.monotonic()
    rc, wall = campaign.run_process([sys.executable, "-c", script], 2.0, tmp_path / "log")
    assert rc is None and wall < 10 and time.monotonic() - start < 10
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True,
                          check=False)
    assert left.stdout.strip() == "", "the stage's child outlived the stage"


def test_a_killed_stage_is_reported_and_later_stages_still_run(tmp_path, monkeypatch):
    slow = campaign.Stage("slow", 1, "a stage that overruns", ("topk",))
    fast = campaign.Stage("fast", 60, "the next stage", ("toolchain",))
    monkeypatch.setattr(campaign, "STAGES", (slow, fast))
    real = campaign.run_process

    def run_process(cmd, budget, log):
        if "slow" in str(log):
            return real([sys.executable, "-c", "import time; time.sleep(30)"], budget, log)
        return real(cmd, budget, log)

    monkeypatch.setattr(campaign, "run_process", run_process)
    monkeypatch.setattr(campaign, "run_stage", _budget_as_given(campaign.run_stage))
    results = campaign.run(tmp_path / "out", dry_run=True)
    assert [(r.name, r.status) for r in results] == [("slow", "killed at budget"),
                                                     ("fast", "ok")]
    readme = (tmp_path / "out" / "README.md").read_text()
    assert "## slow: killed at budget" in readme and "| fast | 60 |" in readme


def _budget_as_given(run_stage):
    """The dry run gives every stage 60 s; this test needs the slow stage's 1 s."""
    def wrapped(stage, work, dry_run):
        if stage.name == "slow":
            return run_stage(stage, work, False)
        return run_stage(stage, work, dry_run)
    return wrapped


def _rows(**tflops):
    return {"results": [
        {"impl": impl, "status": "ok", "S": 4096, "D": 128, "causal": causal,
         "fwd_tflops": f, "bwd_tflops": b}
        for impl, (f, b) in tflops.items() for causal in (False, True)]}


def test_ratios_against_their_targets():
    bench = _rows(**{"triton_fa": (400.0, None), "sdpa.flash": (450.0, 300.0),
                     "fa4.sm90": (500.0, 200.0), "fa4.flash_attn_func": (600.0, 400.0),
                     "flex.flash": (500.0, 100.0), "flex.compiled": (250.0, 100.0)})
    got = {(r["name"], r["causal"]): r for r in campaign_summary.ratios(bench)}
    triton = got[("our Triton forward / sdpa.flash", False)]
    assert triton["ratio"] == pytest.approx(400 / 450) and triton["meets"] is True
    fa4 = got[("our FA4 sm90 forward / flash-attn-4", True)]
    assert fa4["ratio"] == pytest.approx(500 / 600) and fa4["meets"] is False
    assert got[("flex FLASH / flex TRITON forward", False)]["meets"] is True  # 2.0
    assert got[("flex FLASH / flex TRITON backward", False)]["meets"] is False  # 1.0
    assert got[("our FA4 sm90 backward / flash-attn-4", False)]["meets"] is None  # no target
    partial = campaign_summary.ratios(_rows(**{"sdpa.flash": (450.0, 300.0)}))
    assert partial[0]["ratio"] is None and partial[0]["missing"] == ["triton_fa"]
