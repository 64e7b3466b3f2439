"""The harness end to end on the demo area: outcome accounting, report contents, xdist
merging, --impl and --device errors, entry-point discovery."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import SUITE

pytestmark = pytest.mark.harness_only  # no torch behaviour: newest torch only in CI

DEMO = Path(__file__).parent / "demo"
MATRIX = f"--device-matrix={DEMO / 'demo_matrix.yaml'}"
SCHEMA = json.loads((Path(__file__).parents[1] / "docs" / "report.schema.json").read_text())


def _demo(suite, *args):
    return suite(str(DEMO / "demo_suite.py"), MATRIX, "--device=cpu", *args)


def _outcomes(report):
    return {r["nodeid"].split("::")[1]: r["outcome"] for r in report["results"]}


def test_outcome_accounting(suite):
    run = _demo(suite, "-n", "0", "--impl=demo=demo.demo_impls:float64_only")
    assert run.returncode == 1, run.output
    report = run.report
    jsonschema.validate(report, SCHEMA)
    got = _outcomes(report)
    assert got == {
        "test_pass[demo.good-float32]": "passed",
        "test_pass[demo.good-float64]": "unsupported",
        "test_pass[demo.float64_only-float32]": "unsupported",
        "test_pass[demo.float64_only-float64]": "unsupported",
        "test_fail[demo.good-float32]": "failed",
        "test_fail[demo.good-float64]": "unsupported",
        "test_fail[demo.float64_only-float32]": "unsupported",
        "test_fail[demo.float64_only-float64]": "unsupported",
        "test_known_bug[demo.good-float32]": "expected-fail",
        "test_known_bug[demo.good-float64]": "unsupported",
        "test_known_bug[demo.float64_only-float32]": "unsupported",
        "test_known_bug[demo.float64_only-float64]": "unsupported",
        "test_not_applicable[demo.good-float32]": "unsupported",
        "test_not_applicable[demo.good-float64]": "unsupported",
        "test_not_applicable[demo.float64_only-float32]": "unsupported",
        "test_not_applicable[demo.float64_only-float64]": "unsupported",
        "test_needs_feature[demo.good-float32]": "unsupported",
        "test_needs_feature[demo.good-float64]": "unsupported",
        "test_needs_feature[demo.float64_only-float32]": "unsupported",
        "test_needs_feature[demo.float64_only-float64]": "unsupported",
        "test_loose[demo.good-float32]": "passed",
        "test_loose[demo.good-float64]": "unsupported",
        "test_loose[demo.float64_only-float32]": "unsupported",
        "test_loose[demo.float64_only-float64]": "unsupported",
        "test_missing_hardware[demo.good]": "skipped",
        "test_missing_hardware[demo.float64_only]": "skipped",
    }
    assert report["summary"] == {"passed": 2, "failed": 1, "error": 0, "crashed": 0,
                                 "timed-out": 0, "expected-fail": 1, "unexpected-pass": 0,
                                 "unsupported": 20, "skipped": 2, "not-run": 0}
    assert report["collected"] == sum(report["summary"].values()) == len(report["results"])
    assert report["verdict"] == "FAIL" and report["exit_status"] == 1
    by_id = {r["nodeid"].split("::")[1]: r for r in report["results"]}
    reasons = {k: v["reason"] for k, v in by_id.items()}
    assert "does not list dtype float64 for device 'cpu'" in reasons["test_pass[demo.good-float64]"]
    assert "declares dtypes ['float64'], not float32" in reasons[
        "test_pass[demo.float64_only-float32]"]
    assert "unsupported[0]: does not apply" in reasons["test_not_applicable[demo.good-float32]"]
    assert "does not declare feature(s) fancy" in reasons["test_needs_feature[demo.good-float32]"]
    assert "https://example.org/1" in reasons["test_known_bug[demo.good-float32]"]
    assert reasons["test_missing_hardware[demo.good]"] == "needs two GPUs"
    loose = by_id["test_loose[demo.good-float32]"]
    assert loose["tolerance_factor"] == 4 and loose["checks"][0]["bound"] == 4.0
    assert loose["worst_margin"] == pytest.approx(0.75)
    failed = by_id["test_fail[demo.good-float32]"]
    assert failed["checks"][0]["case"] == {"size": 3} and failed["checks"][0]["failures"] == 1
    assert "--impl=demo=demo.demo_impls:float64_only" not in failed["reproduce"]
    assert any("unsupported[1]" in w and "matches no collected test" in w
               for w in report["warnings"])
    assert "matches no collected test" in run.stdout  # also a pytest warning
    summary = (run.report_dir / "summary.md").read_text()
    assert "| demo | `demo.good` | 2 | 1 | 0 | 0 | 0 | 1 | 0 | 8 | 1 | 0 | 2 |" in summary
    junit = (run.report_dir / "junit.xml").read_text()
    assert "test_known_bug" in junit and "<failure" in junit


def test_failure_message_is_uniform(suite):
    run = _demo(suite, "-n", "0", "-k", "test_fail")
    assert run.returncode == 1
    assert "[demo] twice the bound: error 2 exceeds bound 1 (ratio 2); planted" in run.stdout
    assert "impl=demo.good device=cpu dtype=float32" in run.stdout
    assert "case: size=3" in run.stdout
    assert (f"reproduce: PYTHONPATH={DEMO.parent.resolve()} pytest "
            f"'{(DEMO / 'demo_suite.py').resolve()}::test_fail[demo.good-float32]' "
            "--device=cpu --profile=ci --seed=0 --device-matrix=/") in run.stdout


def test_xdist_merges_records_from_all_workers(suite):
    serial = _demo(suite, "-n", "0").report
    run = _demo(suite, "-n", "2")
    assert run.returncode == 1
    report = run.report
    assert report["summary"] == serial["summary"]
    assert _outcomes(report) == _outcomes(serial)
    workers = {r["worker"] for r in report["results"]}
    assert workers == {"gw0", "gw1"}, workers
    checked = [r for r in report["results"] if r["checks"]]
    assert len(checked) == len([r for r in serial["results"] if r["checks"]]) == 4


@pytest.mark.parametrize("option,expected", [
    ("--impl=demo", "--impl 'demo': expected AREA=module:attr (areas: demo)"),
    ("--impl=nope=demo.demo_impls:good", "--impl 'nope=demo.demo_impls:good': unknown area "
     "'nope' (expected one of: demo)"),
    ("--impl=demo=no_such_module:f", "--impl 'demo=no_such_module:f': no module named "
     "'no_such_module'"),
    ("--impl=demo=demo.demo_impls:absent", "--impl 'demo=demo.demo_impls:absent': module "
     "'demo.demo_impls' has no attribute 'absent'"),
    ("--impl=demo=demo.demo_impls:not_callable", "--impl 'demo=demo.demo_impls:not_callable': "
     "demo.demo_impls:not_callable is a int, not callable"),
    ("--impl=demo=demo.demo_broken:f", "--impl 'demo=demo.demo_broken:f': importing "
     "'demo.demo_broken' raised RuntimeError: this module is broken on import"),
    ("--impl=demo=demo.demo_impls", "--impl 'demo=demo.demo_impls': 'demo.demo_impls' is not "
     "of the form module:attr"),
    ("--device=tpu", "--device: unknown device 'tpu' (expected one of: auto, cpu, cuda, mps, "
     "xpu)"),
    ("--device=cuda", "--device=cuda: no cuda device is available"),
])
def test_bad_options_exit_4_with_one_line(suite, option, expected):
    if option == "--device=cuda":
        import torch

        if torch.cuda.is_available():
            pytest.skip("a CUDA device is available here")
    run = suite(str(DEMO / "demo_suite.py"), MATRIX, option, "--co", "-q", report=False)
    assert run.returncode == 4, run.output
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ERROR: "), lines
    assert expected in lines[0], lines[0]
    assert "Traceback" not in run.output


def test_entry_point_implementations_are_discovered(suite, tmp_path):
    dist = tmp_path / "site" / "demo_plugin-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-plugin\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[torch_conformance.impls]\ndemo = demo.demo_impls:float64_only\n")
    import os

    os.environ["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "site"),
                                                os.environ.get("PYTHONPATH", "")])
    try:
        run = _demo(suite, "-n", "0", "-k", "test_pass")
    finally:
        os.environ["PYTHONPATH"] = os.environ["PYTHONPATH"].split(os.pathsep, 1)[1]
    impls = {i["name"]: i["origin"] for i in run.report["run"]["implementations"]}
    assert impls == {"demo.good": "builtin", "demo.float64_only": "entry point demo-plugin"}


def test_seed_and_profile_reach_every_worker(suite):
    run = _demo(suite, "-n", "2", "--profile=dev")
    seed = run.report["run"]["seed"]
    assert run.report["run"]["profile"] == "dev"
    assert f"profile dev, seed {seed} (reproduce with --seed={seed})" in run.stdout
    failed = [r for r in run.report["results"] if r["outcome"] == "failed"]
    assert failed and all(f"--profile=dev --seed={seed}" in r["reproduce"] for r in failed)
    again = _demo(suite, "-n", "0", "--profile=thorough", "--seed=1234", "-k", "test_fail")
    assert "--profile=thorough --seed=1234" in again.stdout


def test_runs_from_anywhere_with_pyargs(suite):
    run = suite("--pyargs", "conformance", "--device=cpu", "--co", "-q", report=False)
    assert run.returncode == 0, run.output
    assert "topk/test_topk.py::test_random[torch.topk-float16]" in run.stdout
    assert "gemm/test_gemm.py::test_random_2d[torch.matmul-bfloat16]" in run.stdout


def test_unmatched_matrix_entries_are_reported_under_xdist(suite):
    run = _demo(suite, "-n", "2")
    assert len(run.report["warnings"]) == 1
    assert "unsupported[1]" in run.report["warnings"][0]


def test_areas_missing_from_a_matrix_are_unsupported(suite):
    run = suite(str(SUITE / "topk"), MATRIX,
                "--device=cpu", "-n", "0", "-q", "-k", "test_k_extremes or test_random")
    assert run.returncode == 1 and any(v.startswith("nothing ran") for v in
                                       run.report["vacuous"]), run.output[-2000:]
    run = suite(str(SUITE / "topk"), MATRIX, "--device=cpu", "-n", "0", "-q",
                "-k", "test_k_extremes or test_random", "--allow-empty")
    assert run.returncode == 0, run.output[-2000:]
    assert run.report["summary"]["unsupported"] == 2
    assert all("has no area 'topk'" in r["reason"] for r in run.report["results"])
