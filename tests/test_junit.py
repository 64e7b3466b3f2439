"""JUnit XML (conformance/run/junit.py): the suite named after the device with the run's
properties, every case named with its device and carrying its conformance outcome, and
expected-fail / unsupported / not-run / crashed told apart by the elements' types."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from conformance.run import junit
from tests.conftest import PLANTED_SELECTION

pytestmark = pytest.mark.harness_only

PYTEST_XML = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">
<testsuite name="pytest" errors="0" failures="2" skipped="3" tests="6" time="1.0">
<properties><property name="conformance_verdict" value="FAIL" /></properties>
<testcase classname="conformance.areas.topk.test_topk" name="test_a[float32]" time="0.1" />
<testcase classname="conformance.areas.topk.test_topk" name="test_b" time="0.1">
 <failure message="bound exceeded">trace</failure></testcase>
<testcase classname="conformance.areas.topk.test_topk" name="test_c" time="0.1">
 <skipped type="pytest.xfail" message="matrix expected_failures[1]: known" /></testcase>
<testcase classname="conformance.areas.topk.test_topk" name="test_d" time="0.1">
 <properties><property name="conformance_meta" value="{}" /></properties>
 <skipped type="pytest.skip" message="[unsupported] no fp8 here" /></testcase>
<testcase classname="conformance.areas.topk.test_topk" name="test_e" time="0.0">
 <skipped type="pytest.skip" message="[not-run] interrupted" /></testcase>
<testcase classname="conformance.areas.topk.test_topk" name="test_f" time="0.0">
 <failure message="worker 'gw0' crashed while running test_f" /></testcase>
<testcase classname="tests.helper" name="test_not_ours" time="0.0" />
</testsuite></testsuites>"""

OUTCOMES = {"test_a[float32]": "passed", "test_b": "failed", "test_c": "expected-fail",
            "test_d": "unsupported", "test_e": "not-run", "test_f": "crashed"}
REPORT = {
    "verdict": "FAIL", "exit_status": 1,
    "suite": {"version": "0.1.dev9", "commit": "abc123"},
    "run": {"profile": "ci", "seed": 0, "strict": True},
    "must_pass": {"passed": 3, "required": 4},
    "environment": {"torch": "2.13.0+cu130", "cuda": "13.0", "hip": None,
                    "cuda_driver": "580.65.06"},
    "results": [{"nodeid": f"conformance/areas/topk/test_topk.py::{name}", "outcome": outcome,
                 "device": "cuda:1", "area": "topk", "impl": "vendor.topk", "dtype": "float16"}
                for name, outcome in OUTCOMES.items()],
}
DEVICE = {"torch_device": "cuda:1", "name": "NVIDIA H200", "matrix_key": "cuda", "index": 1,
          "uuid": "GPU-5838", "pci_bus_id": "0000:19:00.0", "driver_version": "580.65.06"}


def _rewritten() -> ET.Element:
    root = ET.fromstring(PYTEST_XML)
    junit.rewrite(root, REPORT, DEVICE)
    return ET.fromstring(ET.tostring(root))  # still well-formed XML


def test_suite_is_named_after_the_device_with_the_runs_properties():
    root = _rewritten()
    suite = root.find("testsuite")
    assert root.get("name") == "torch-conformance"
    assert suite.get("name") == "torch-conformance[cuda:1 NVIDIA H200]"
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props == {
        "conformance_verdict": "FAIL", "device": "cuda:1", "device_name": "NVIDIA H200",
        "matrix_key": "cuda", "gpu_index": "1", "gpu_uuid": "GPU-5838",
        "gpu_pci_bus_id": "0000:19:00.0", "driver": "580.65.06", "torch": "2.13.0+cu130",
        "cuda": "13.0", "suite_version": "0.1.dev9", "suite_commit": "abc123",
        "profile": "ci", "seed": "0", "strict": "true", "must_pass": "3/4",
        "exit_status": "1"}


def test_cases_carry_device_and_outcome_and_typed_elements():
    cases = {c.get("name"): c for c in _rewritten().iter("testcase")}
    for name, outcome in OUTCOMES.items():
        case = cases[f"[cuda:1] {name}"]
        assert case.get("classname") == "[cuda:1] conformance.areas.topk.test_topk"
        assert case.find("properties")[0].attrib == {"name": "outcome", "value": outcome}
    types = {name: [(e.tag, e.get("type")) for e in cases[f"[cuda:1] {name}"]
                    if e.tag != "properties"] for name in OUTCOMES}
    assert types == {"test_a[float32]": [], "test_b": [("failure", "failed")],
                     "test_c": [("skipped", "expected-fail")],
                     "test_d": [("skipped", "unsupported")],
                     "test_e": [("skipped", "not-run")], "test_f": [("failure", "crashed")]}
    props = [(p.get("name"), p.get("value")) for p in cases["[cuda:1] test_d"].find("properties")]
    assert props[0] == ("outcome", "unsupported")  # the harness's internal records are gone
    assert not any(name.startswith("conformance_") for name, _ in props), props
    assert props[1:4] == [("area", "topk"), ("implementation", "vendor.topk"),
                          ("dtype", "float16")]
    other = cases["[cuda:1] test_not_ours"]  # not a conformance test: pytest's outcome
    assert other.find("properties")[0].get("value") == "passed"


def test_case_keys_follow_pytest():
    assert junit.case_key("conformance/areas/a/test_x.py::TestK::test_y[a::b-1]") == \
        ("conformance.areas.a.test_x.TestK", "test_y[a::b-1]")
    assert junit.case_key("t/test_z.py::test_w", "lab") == ("lab.t.test_z", "test_w")


def test_a_run_writes_it(suite):
    """End to end: a small run with a planted failure; the XML parses, every collected test
    is a case whose outcome property is the report's, and the manifest covers the file."""
    run = suite(*PLANTED_SELECTION[:-1], "float32 and forward",
                "--impl=special.erfcx=planted.vendor_builds:build_2")
    report = run.report
    assert report is not None, run.output[-2000:]
    root = ET.parse(run.report_dir / "junit.xml").getroot()
    suite_el = root.find("testsuite")
    assert suite_el.get("name").startswith("torch-conformance[cpu ")
    props = {p.get("name"): p.get("value") for p in suite_el.find("properties")}
    assert props["conformance_verdict"] == report["verdict"] == "FAIL"
    assert props["device"] == "cpu" and props["seed"] == "0"
    outcomes = {c.get("name").removeprefix("[cpu] "): c.find("properties")[0].get("value")
                for c in suite_el.iter("testcase")}
    expected = {r["nodeid"].split("::", 1)[1]: r["outcome"] for r in report["results"]}
    assert outcomes == expected and "failed" in outcomes.values()
    assert {"passed", "failed"} <= set(outcomes.values())
    from conformance.report.manifest import verify

    assert verify(run.report_dir)[1] == []
