"""``torch-conformance bundle``: build the wheelhouse, install from it into a fresh venv
with no index (pip's find-links from the environment removed too), run one area there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None):
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600, check=False)


@pytest.mark.harness_only
def test_bundle_installs_offline_and_runs_an_area(tmp_path):
    """The bundle (torch included) resolves every requirement with no index; its suite wheel
    installs offline into a fresh venv and runs an area there. That venv borrows this
    environment's packages through a path entry rather than installing them again (torch
    is GBs; the resolution above shows the bundle holds each of them)."""
    bundle = tmp_path / "wheelhouse"
    made = _run([sys.executable, "-m", "conformance.cli", "bundle", str(bundle), "--torch"],
                tmp_path)
    assert made.returncode == 0, made.stderr[-2000:]
    assert "install offline with: pip install --no-index" in made.stdout
    names = [p.name for p in bundle.iterdir()]
    assert any(n.startswith("torch_conformance-") for n in names)
    assert any(n.startswith("torch-") for n in names)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PIP_NO_INDEX"] = "1"
    # every requirement, torch and what it needs included, from the bundle alone
    plan = tmp_path / "plan.json"
    dry = _run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run",
                "--ignore-installed", "--no-index", "--find-links", str(bundle),
                "--report", str(plan), "torch-conformance"], tmp_path, env)
    assert dry.returncode == 0, dry.stderr[-2000:]
    resolved = {i["metadata"]["name"].lower().replace("_", "-"): i["download_info"]["url"]
                for i in json.loads(plan.read_text())["install"]}
    assert {"torch-conformance", "torch", "numpy", "scipy", "pytest"} <= set(resolved)
    assert all(url.startswith(bundle.as_uri()) for url in resolved.values()), resolved
    target = tmp_path / "venv"
    venv.create(target, with_pip=True)
    py = str(target / "bin" / "python")
    site = next((target / "lib").glob("python*/site-packages"))
    (site / "borrowed.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # the suite's wheel itself (the borrowed path has this checkout's editable install)
    inst = _run([py, "-m", "pip", "install", "--quiet", "--no-index", "--find-links",
                 str(bundle), "--no-deps", "--ignore-installed", "torch-conformance"],
                tmp_path, env)
    assert inst.returncode == 0, inst.stderr[-2000:]
    work = tmp_path / "lab"
    work.mkdir()
    run = _run([py, "-m", "pytest", "--pyargs", "conformance.areas.special", "-p",
                "no:cacheprovider", "-q", "--device=cpu", "--report=out"], work, env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert (work / "out" / "report.html").is_file()
    report = json.loads((work / "out" / "report.json").read_text())
    assert report["areas"]["special.erfcx"]["torch.special.erfcx"]["ran"] > 0
    assert "1 implementation in 1 area: no failure" in run.stdout, run.stdout[-2000:]
    where = _run([py, "-c", "import conformance; print(conformance.__file__)"], work, env)
    assert str(target) in where.stdout  # the bundle's copy, not this checkout


def test_bundle_usage_errors(tmp_path):
    proc = _run([sys.executable, "-m", "conformance.cli", "bundle", str(tmp_path / "b"),
                 "--extras", "nonsense"], tmp_path)
    assert proc.returncode == 4 and "unknown extra nonsense" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
