"""``--repro-dir``: one standalone script per failure group (torch, numpy and the standard
library only) that re-checks the failing call: exit 1 on each area's planted fault, 0 with
its correct twin (``--impl``), 3 where the area's check has no standalone form; the printed
reproduce line runs from any directory; a reused directory loses the previous run's
scripts, a foreign one is refused (exit 4). One child run serves every area."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conformance.report.repro_dir import MARKER, ReproDirError, finalize, prepare
from conformance.report.triage import group_failures
from tests.conftest import SUITE, TESTS, run_suite

# area -> (test file, --impl, -k selection, the correct twin, the script's exit codes with
# the fault and with the twin)
CASES = {
    "gemm": ("gemm/test_gemm.py", "gemm=planted.gemm_faults:ignores_strides",
             "ignores_strides and float32 and test_long_ragged_k", "impls.gemm:torch_matmul",
             (1, 0)),
    "topk": ("topk/test_topk.py", "topk=planted.topk_faults:nan_smallest",
             "nan_smallest and test_special_values and float32 and nan_first_last",
             "impls.topk:torch_topk", (1, 0)),
    "erfcx-forward": ("special/test_erfcx.py", "special.erfcx=planted.erfcx_faults:naive",
                      "naive and test_forward and float32", "planted.erfcx_faults:correct",
                      (1, 0)),
    "erfcx-backward": ("special/test_erfcx.py",
                       "special.erfcx=planted.erfcx_faults:half_grad",
                       "half_grad and test_backward[ and float32",
                       "planted.erfcx_faults:correct", (1, 0)),
    "grid_sample-forward": ("grid_sample/test_grid_sample.py",
                            "grid_sample=planted.grid_sample_faults:align_corners_inverted",
                            "align_corners_inverted and float32 and test_random",
                            "planted.grid_sample_faults:correct", (1, 0)),
    "grid_sample-backward": ("grid_sample/test_grid_sample.py",
                             "grid_sample=planted.grid_sample_faults:grid_grad_scale",
                             "grid_grad_scale and float32 and test_backward",
                             "planted.grid_sample_faults:correct", (1, 0)),
    "attention": ("attention/test_attention.py", "attention=planted.attention_faults:wrong_scale",
                  "wrong_scale and test_forward_lse_catalogue and float32 and nomask",
                  "planted.attention_faults:correct_dense", (1, 0)),
    "indexing": ("indexing/test_indexing.py",
                 "indexing.scatter_=planted.indexing_faults:scatter_one_past",
                 "scatter_one_past and test_valid", "planted.indexing_faults:correct_scatter",
                 (1, 0)),
    # statistical tests against the law: no standalone form, whatever the implementation
    "samplers": ("samplers/test_samplers.py",
                 "sampler.geometric=planted.sampler_faults:geometric_from_zero",
                 "geometric_from_zero and goodness_of_fit and float32",
                 "impls.samplers:geometric", (3, 3)),
}
STDLIB = {"__future__", "argparse", "base64", "importlib", "io", "sys", "zlib", "os"}


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """One child run over every area's planted fault, with --repro-dir."""
    tmp = tmp_path_factory.mktemp("repro")
    files = sorted({str(SUITE / c[0]) for c in CASES.values()})
    run = run_suite([*files, "-n", "0", "-q", "--no-builtins",
                     *(f"--impl={c[1]}" for c in CASES.values()),
                     "-k", " or ".join(f"({c[2]})" for c in CASES.values()),
                     f"--repro-dir={tmp / 'repro'}"], tmp)
    assert run.returncode == 1, run.output[-3000:]
    return run, tmp / "repro"


def _script(repro: Path, area: str) -> Path:
    """The case's script (each planted implementation fails one check here)."""
    (found,) = [p for p in repro.glob("*.py") if p.stem.endswith(CASES[area][1].split(":")[-1])]
    return found


def test_one_script_per_failure_group(planted):
    run, repro = planted
    groups = group_failures(sorted(run.report["results"], key=lambda r: r["nodeid"]))
    scripts = sorted(repro.glob("*.py"))
    assert len(groups) == len(CASES) == len(scripts), [p.name for p in scripts]
    assert {f"{g.slug}.py" for g in groups} == {p.name for p in scripts}
    assert sorted(p.name for p in repro.iterdir()) == sorted([MARKER, *(p.name for p in scripts)])
    for g in groups:
        text = (repro / f"{g.slug}.py").read_text()
        assert f"group:           {g.count} failure" in text, text[:2000]
        assert all(r["repro_script"] == str(repro / f"{g.slug}.py") for r in g.results)
    assert max(p.stat().st_size for p in scripts) < 2 << 20
    manifest = json.loads((repro / MARKER).read_text())
    assert sorted(manifest["files"]) == [p.name for p in scripts]
    assert "--repro-dir: 9 standalone reproducers (one per failure group" in run.stdout


_DRIVER = """
import contextlib, io, json, runpy, sys
out = []
for script, impl in json.loads(sys.argv[1]):
    sys.argv = [script, *(["--impl", impl] if impl else [])]
    text = io.StringIO()
    try:
        with contextlib.redirect_stdout(text):
            runpy.run_path(script, run_name="__main__")
        code = 0
    except SystemExit as exc:
        code = exc.code
    out.append([script, impl, code, text.getvalue()])
print(json.dumps(out))
"""


def test_each_area_rechecks_fault_and_fix(planted, tmp_path):
    """Every script exits 1 with its planted fault and 0 with the correct twin (one fresh
    interpreter runs them all; only tests/ on its path, for the planted twins)."""
    _, repro = planted
    jobs = [(str(_script(repro, area)), impl)
            for area, case in CASES.items() for impl in (None, case[3])]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path), "PYTHONPATH": str(TESTS)}
    proc = subprocess.run([sys.executable, "-c", _DRIVER, json.dumps(jobs)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    codes = {(Path(s).name, impl): (code, text) for s, impl, code, text in json.loads(
        proc.stdout.strip().splitlines()[-1])}
    for area, case in CASES.items():
        name = _script(repro, area).name
        for impl, want in zip((None, case[3]), case[4], strict=True):
            code, text = codes[(name, impl)]
            assert code == want, f"{area} with {impl or 'its fault'}: exit {code}\n{text}"
            if want == 1:
                assert "FAILED: the fault is there" in text and "FAIL " in text, text
            elif want == 0:
                assert "PASSED: the check passes here (fixed)" in text, text
            else:
                assert "CANNOT RE-CHECK" in text, text
    assert "CANNOT RE-CHECK here: " in _script(repro, "samplers").read_text()


def test_script_runs_alone(planted):
    """A fresh interpreter, no PYTHONPATH, isolated mode, cwd the script's folder: the
    script imports torch, numpy and the standard library only, its inputs embedded."""
    _, repro = planted
    script = _script(repro, "gemm")
    text = script.read_text()
    imports = set(re.findall(r"^\s*(?:from|import) ([\w.]+)", text, flags=re.M))
    assert imports <= STDLIB | {"numpy", "torch"}, imports
    assert "def ignores_strides" in text  # the implementation travels with the script
    proc = subprocess.run([sys.executable, "-I", script.name], cwd=script.parent,
                          env={"PATH": os.environ.get("PATH", ""), "HOME": "/tmp"},
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"worst element .+: got .+, expected .+, \|error\| .+ vs bound",
                     proc.stdout), proc.stdout


def test_printed_command_runs_from_anywhere(planted, tmp_path):
    """The reproduce line of a planted implementation (importable only through the run's
    PYTHONPATH) names the folder that makes it importable and the test by absolute path:
    run as printed from a folder outside the project, without PYTHONPATH, it reruns the
    test and fails the same way."""
    run, repro = planted
    (first,) = [g.first for g in group_failures(
        sorted(run.report["results"], key=lambda r: r["nodeid"])) if g.area == "topk"]
    line = first["reproduce"]
    assert line.startswith(f"PYTHONPATH={TESTS.resolve()} pytest '/"), line
    assert f"  {line}\n" in _script(repro, "topk").read_text()  # the script's docstring
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_XDIST_WORKER")}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    proc = subprocess.run(["bash", "-c", f"{line} -p no:cacheprovider"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "1 failed" in proc.stdout and "values equal the oracle's" in proc.stdout


def test_reused_directory_loses_only_its_scripts(tmp_path):
    repro = tmp_path / "repro"
    prepare(repro)
    stage = repro / ".staging" / "main"
    stage.mkdir(parents=True)
    (stage / "k.py").write_text("@@REPRO_GROUP@@\n")
    (stage / "k.json").write_text("{}")
    assert finalize(repro, []) == []  # no failure: no script, the staging gone
    assert sorted(p.name for p in repro.iterdir()) == [MARKER]
    (repro / "old.py").write_text("# a previous run's\n")
    (repro / MARKER).write_text(json.dumps({"files": ["old.py"]}))
    (repro / "notes.txt").write_text("someone's\n")
    assert prepare(repro) == ["old.py"]
    assert sorted(p.name for p in repro.iterdir()) == sorted([MARKER, "notes.txt"])
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data.csv").write_text("1\n")
    with pytest.raises(ReproDirError, match="not empty and not written by torch-conformance"):
        prepare(foreign)
    assert (foreign / "data.csv").exists()


def test_foreign_directory_is_a_usage_error(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "data.csv").write_text("1\n")
    run = run_suite([str(SUITE / "gemm" / "test_gemm.py"), "-n", "0", "-q",
                     "-k", "no_such_test", f"--repro-dir={foreign}"], tmp_path, report=False)
    assert run.returncode == 4, run.output[-2000:]
    assert f"--repro-dir {foreign}: not empty and not written by torch-conformance" \
        in run.output
    assert sorted(p.name for p in foreign.iterdir()) == ["data.csv"]
