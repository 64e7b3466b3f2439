"""Expected failures must fail for the stated reason; version-gated entries apply only on
the versions they name; the report says which entries applied."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from packaging.version import Version

from conformance.harness.matrix import DEFAULT_MATRIX
from tests.conftest import SUITE

pytestmark = pytest.mark.harness_only  # no torch behaviour: newest torch only in CI

DEMO = Path(__file__).parent / "demo"
WRONG = "expected-fail for the wrong reason"


def _by_name(report):
    return {r["nodeid"].split("::")[1].split("[")[0]: r for r in report["results"]}


def test_expectations_and_version_gates_on_the_demo_area(suite):
    run = suite(str(DEMO / "demo_expect.py"), "--device=cpu", "-n", "0",
                f"--device-matrix={DEMO / 'demo_expect_matrix.yaml'}")
    assert run.returncode == 1, run.output
    got = _by_name(run.report)
    outcomes = {name: r["outcome"] for name, r in got.items()}
    assert outcomes == {
        "test_value_as_expected": "expected-fail",
        "test_crash_where_value_expected": "failed",
        "test_other_check_fails": "failed",
        "test_crash_as_expected": "expected-fail",
        "test_crash_other_message": "failed",
        "test_plain_assert_is_no_check": "failed",
        "test_gated_applies": "expected-fail",
        "test_gated_not_here": "failed",
        "test_gated_missing_package": "failed",
        "test_gated_tolerance": "passed",
        "test_gated_unsupported": "unsupported",
    }
    reason = {name: r["reason"] for name, r in got.items()}
    assert reason["test_crash_where_value_expected"] == (  # the demo test itself raises
        f"{WRONG}: matrix expected_failures[0] expects a failing check 'twice*', "
        "but it raised TypeError: planted crash in the implementation; error in the suite "
        "itself (a bug in a check, an oracle or a case builder, not in the implementation)")
    assert reason["test_other_check_fails"].endswith("but it check 'another check' failed")
    assert "raised RuntimeError: something else" in reason["test_crash_other_message"]
    assert "with a message matching '^device lost'" in reason["test_crash_other_message"]
    assert "raised AssertionError" in reason["test_plain_assert_is_no_check"]
    assert WRONG not in reason["test_gated_not_here"]  # the entry did not apply at all
    assert f"{WRONG}: matrix expected_failures[0]" in run.stdout  # in the terminal too
    entries = {e["entry"]: e for e in run.report["run"]["matrix_entries"]}
    assert entries["expected_failures[2]"]["applies"] is True
    assert entries["expected_failures[2]"]["versions"] == "numpy>=1, torch>=1.0"
    assert entries["expected_failures[3]"]["applies"] is False
    assert entries["expected_failures[3]"]["why_not"] == (
        f"torch {torch.__version__} is outside <1.0")
    assert "not installed" in entries["expected_failures[4]"]["why_not"]
    assert entries["expected_failures[0]"]["tests"] == 4
    assert entries["tolerances[0]"]["tests"] == 1 and entries["unsupported[0]"]["tests"] == 1
    assert got["test_gated_applies"]["matrix_entries"] == ["expected_failures[2]"]
    summary = (run.report_dir / "summary.md").read_text()
    assert "## Matrix entries" in summary
    assert f"| expected_failures[3] | demo | torch<1.0 | - | no: torch {torch.__version__} " \
           "is outside <1.0 | 0 |" in summary


def test_planted_crash_where_the_matrix_expects_a_wrong_value(suite, tmp_path):
    """A TopK that crashes on NaN input, where the matrix expects a wrong value: a failure
    ('for the wrong reason'); its twin that returns wrong values stays an expected failure."""
    data = yaml.safe_load(DEFAULT_MATRIX.read_text())
    data["expected_failures"] = [
        {"area": "topk", "match": [f"*::test_special_values[planted.{name}-*"
                                   for name in ("nan_smallest", "crashes_on_nan")],
         "expect": {"check": "values equal the oracle's*"},
         # a vendor's entry names its implementations (by module:attr): an entry that names
         # none applies to the shipped ones only
         "impls": ["planted.topk_faults:*"],
         "reason": "a vendor's known NaN ordering bug", "link": "https://example.org/nan"}]
    matrix = tmp_path / "vendor.yaml"
    matrix.write_text(yaml.safe_dump(data))
    run = suite(str(SUITE / "topk" / "test_topk.py"), "--device=cpu", "-n", "0",
                f"--device-matrix={matrix}", "--no-builtins",
                "--impl=topk=planted.topk_faults:nan_smallest",
                "--impl=topk=planted.topk_faults:crashes_on_nan",
                "-k", "test_special_values and float32 and (nan_first_last or nan_and_inf)")
    assert run.returncode == 1, run.output[-3000:]
    results = run.report["results"]
    crash = [r for r in results if "crashes_on_nan" in r["nodeid"]]
    twin = [r for r in results if "nan_smallest" in r["nodeid"]]
    assert crash and all(r["outcome"] == "failed" for r in crash), crash
    expected = (f"{WRONG}: matrix expected_failures[0] expects a failing check \"values "
                "equal the oracle's*\", but it raised RuntimeError: planted: selection kernel "
                "aborted on a NaN input (inside the implementation)")
    assert all(r["reason"] == expected for r in crash), crash[0]["reason"]
    assert twin and all(r["outcome"] == "expected-fail" for r in twin), twin


def test_a_pass_past_the_measured_releases_is_a_likely_fix(suite):
    """An expected failure measured on older releases only: a pass on this newer torch is
    passed, with the entry to narrow ("fixed in X?"), in the terminal and the report; the
    run is green. Within the measured releases a pass stays a failure (strict XPASS) under
    --stale-entries=fail (the suite's own CI; tests/test_stale_entries.py: the default), and
    a failure past them stays an expected failure."""
    run = suite(str(DEMO / "demo_measured.py"), "--device=cpu", "-n", "0",
                f"--device-matrix={DEMO / 'demo_measured_matrix.yaml'}", "--stale-entries=fail")
    got = _by_name(run.report)
    assert {n: r["outcome"] for n, r in got.items()} == {
        "test_fixed_past_measured": "passed",
        "test_fixed_within_measured": "failed",
        "test_still_failing_past_measured": "expected-fail",
    }, run.output[-3000:]
    assert run.returncode == 1  # the strict XPASS within the measured releases
    release = torch.__version__.split("+")[0]
    v = Version(release)
    gate = f">=0.9,<99,<{v.major}.{v.minor}"
    assert got["test_fixed_past_measured"]["reason"] == (
        f"fixed in torch {release}? matrix expected_failures[0]: measured failing on torch up "
        f"to 1.0.0; narrow its versions to torch{gate}")
    assert f"fixed in torch {release}? matrix expected_failures[0]: 1 expected failure " \
           "passed past the releases it was measured on" in run.stdout
    entries = {e["entry"]: e for e in run.report["run"]["matrix_entries"]}
    first, second = entries["expected_failures[0]"], entries["expected_failures[1]"]
    assert first["measured"] == {"torch": ["0.9.0", "1.0.0"]}
    assert first["beyond_measured"] == f"torch {torch.__version__} is newer than 1.0.0"
    assert (first["fixed_in"], first["narrow_to"], first["fixed_tests"]) == (
        f"torch {release}", f"torch{gate}", 1)
    assert second["measured"] == {"torch": ["0.9.0", "1.0.0", "99.0"]}
    assert second["beyond_measured"] is None and "fixed_in" not in second
    assert any("fixed in torch" in w for w in run.report["warnings"])
    summary = (run.report_dir / "summary.md").read_text()
    assert "## Matrix entries to narrow (1)" in summary
    assert f"| expected_failures[0] | demo | 1 of 2 | torch {release} | `torch{gate}` |" \
        in summary


def test_measured_releases_are_validated(tmp_path):
    from conformance.harness.errors import ConfigError
    from conformance.harness.matrix import load_matrix

    data = yaml.safe_load((DEMO / "demo_measured_matrix.yaml").read_text())
    data["measured"] = {"cpu": {"torch": ["2.x"]}}
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"measured\.cpu\.torch\[0\]"):
        load_matrix(path)


def test_a_pass_under_a_non_strict_entry_is_a_pass(suite, tmp_path):
    """A non-strict entry allows a failure (it is not always seen: a data-dependent defect);
    a pass under it is passed, the entry named in its reason; the run is green."""
    data = yaml.safe_load(DEFAULT_MATRIX.read_text())
    data["expected_failures"] = [
        {"area": "topk", "match": ["*::test_special_values[*-nan_first_last-float32]"],
         "strict": False, "expect": {"check": "*"}, "reason": "sometimes fails",
         "link": "https://example.org/flaky"}]
    matrix = tmp_path / "flaky.yaml"
    matrix.write_text(yaml.safe_dump(data))
    run = suite(str(SUITE / "topk" / "test_topk.py"), "--device=cpu", "-n", "0",
                f"--device-matrix={matrix}",
                "-k", "test_special_values and float32 and nan_first_last")
    assert run.report is not None, run.output[-3000:]
    results = [r for r in run.report["results"] if "nan_first_last" in r["nodeid"]]
    assert results and all(r["outcome"] == "passed" for r in results), run.output[-3000:]
    assert all("expected_failures[0] (not strict) allows a failure" in r["reason"]
               for r in results), results[0]["reason"]
    assert run.returncode == 0, run.output[-3000:]
