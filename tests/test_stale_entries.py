"""The rule for a known bug a build does not have (docs/guides/conformance-mode.md): a pass
under a strict expected failure is reported, not failed (--stale-entries=report, the
default); the suite's own CI fails it (--stale-entries=fail); diff lists it; a release
newer than every measured one says so in the header and summary.md."""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from tests.conftest import TESTS, SuiteRun, run_suite

pytestmark = pytest.mark.harness_only  # the demo area: no torch behaviour involved
DEMO = TESTS / "demo"
MATRIX = DEMO / "demo_measured_matrix.yaml"
NOTE = ("bug not present in this build: matrix expected_failures[1] expects a failure here "
        "(https://example.org/8)")


def _outcomes(run) -> dict[str, tuple[str, str]]:
    return {r["nodeid"].split("::")[-1].split("[")[0]: (r["outcome"], r["reason"])
            for r in run.report["results"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, SuiteRun]:
    """The demo under the default (report) and under --stale-entries=fail, run once."""
    out = {}
    for mode in ("report", "fail"):
        where = tmp_path_factory.mktemp(mode)
        out[mode] = run_suite([str(DEMO / "demo_measured.py"), "--device=cpu", "-n", "0",
                               f"--device-matrix={MATRIX}", f"--stale-entries={mode}"], where)
    return out


def test_a_build_without_the_bug_passes_and_says_so(runs):
    run = runs["report"]
    got = _outcomes(run)
    assert got["test_fixed_within_measured"] == ("passed", NOTE), run.output[-3000:]
    assert got["test_still_failing_past_measured"][0] == "expected-fail"
    assert run.returncode == 0, run.output[-3000:]
    entry = {e["entry"]: e for e in run.report["run"]["matrix_entries"]}["expected_failures[1]"]
    assert entry["not_present_tests"] == 1
    assert run.report["run"]["stale_entries"] == "report"
    summary = (run.report_dir / "summary.md").read_text()
    assert "## Known bugs not present in this build (1)" in summary
    assert "| expected_failures[1] | demo | 1 of 1 | measured up to 99.0 " \
           "(https://example.org/8) |" in summary
    # the matrix was measured up to 99.0: this torch is not newer than every measured one
    assert "is newer than the releases" not in run.stdout + summary
    assert run.report["run"]["newer_than_measured"] is None


def test_stale_entries_fail_within_the_measured_releases(runs):
    assert _outcomes(runs["fail"])["test_fixed_within_measured"][0] == "failed"
    assert runs["fail"].returncode == 1


def test_a_bad_value_is_a_usage_error(suite):
    run = suite(str(DEMO / "demo_measured.py"), "--device=cpu", "-n", "0",
                "--stale-entries=never", "--test-order=backwards", report=False)
    assert run.returncode == 4, run.output[-2000:]
    assert "Traceback" not in run.output


def test_diff_lists_the_bugs_a_build_does_not_have(runs):
    from conformance.report.diff import diff_reports, render_text

    d = diff_reports(runs["fail"].report, runs["report"].report)
    assert [r["nodeid"].split("::")[-1] for r in d.bugs_absent] == [
        "test_fixed_within_measured[demo.good]"], d.to_json()
    assert "Known bugs not present in NEW (1)" in render_text(d)
    assert ("stale entries", "fail", "report") in d.settings
    assert not d.regressions and not d.fixed


def test_a_release_newer_than_every_measured_one_says_so(suite, tmp_path):
    data = yaml.safe_load(MATRIX.read_text())
    data["measured"] = {"cpu": {"torch": ["0.9.0", "1.0.0"]}}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    run = suite(str(DEMO / "demo_measured.py"), "--device=cpu", "-n", "0",
                f"--device-matrix={path}")
    release = torch.__version__.split("+")[0]
    line = (f"torch {torch.__version__} is newer than the releases this suite version has "
            f"measured (newest 1.0.0): failures may be new regressions of torch {release}")
    assert f"torch-conformance: {line}" in run.stdout
    assert f"- **not measured**: {line}" in (run.report_dir / "summary.md").read_text()
    assert run.report["run"]["newer_than_measured"].startswith(line)
    json.dumps(run.report)
