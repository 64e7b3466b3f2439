"""Report pieces in isolation: outcome classification of pytest phases, non-finite numbers
in JSON, and the compare helpers' measurements."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import jsonschema
import numpy as np
import pytest

from conformance.harness.compare import elementwise_bound, exact
from conformance.report.collect import Collector, build_report, classify
from conformance.report.write import write_report

pytestmark = pytest.mark.harness_only  # no torch behaviour: newest torch only in CI

SCHEMA = json.loads((Path(__file__).parents[1] / "docs" / "report.schema.json").read_text())


def _report(when, outcome, longrepr=None, wasxfail=None, props=()):
    r = SimpleNamespace(when=when, passed=outcome == "passed", failed=outcome == "failed",
                        skipped=outcome == "skipped", longrepr=longrepr, nodeid="t.py::x",
                        duration=0.1, user_properties=list(props), longreprtext="E   boom")
    if wasxfail is not None:
        r.wasxfail = wasxfail
    return r


def test_classify_phases():
    assert classify(_report("setup", "passed")) is None
    assert classify(_report("call", "passed")) == ("passed", "")
    assert classify(_report("call", "failed")) == ("failed", "boom")
    assert classify(_report("setup", "failed")) == ("error", "setup: boom")
    assert classify(_report("teardown", "failed")) == ("error", "teardown: boom")
    assert classify(_report("setup", "skipped", ("f", 1, "Skipped: [unsupported] no fp64"))) \
        == ("unsupported", "no fp64")
    assert classify(_report("setup", "skipped", ("f", 1, "Skipped: [skipped] no GPU"))) \
        == ("skipped", "no GPU")
    assert classify(_report("call", "skipped", wasxfail="known")) == ("expected-fail", "known")
    assert classify(_report("call", "passed", wasxfail="known")) == ("unexpected-pass", "known")


def test_teardown_error_overrides_a_pass():
    meta = ("conformance_meta", json.dumps({"area": "a", "impl": "i"}))
    c = Collector()
    for phase, outcome in (("setup", "passed"), ("call", "passed"), ("teardown", "failed")):
        c.add(_report(phase, outcome, props=[meta]))
    assert c.counts()["error"] == 1 and c.counts()["passed"] == 0


def test_non_finite_numbers_are_strings_and_valid(tmp_path):
    record = {"checks": [{"name": "n", "evaluations": 1, "failures": 1, "exact": False,
                          "measured": math.inf, "bound": 1.0, "margin": math.inf, "case": {},
                          "detail": ""}], "notes": {}, "tolerance_factor": 1.0,
              "reproduce": "pytest x"}
    props = [("conformance_meta", json.dumps({"area": "a", "impl": "i", "device": "cpu",
                                              "dtype": None, "params": {}})),
             ("conformance_record", json.dumps(record))]
    c = Collector()
    c.add(_report("call", "failed", props=props))
    env = {"device": {"requested_kind": "cpu", "matrix_key": "cpu", "torch_device": "cpu",
                      "name": "x", "tags": []}, "torch": "t", "cuda": None, "hip": None,
           "cuda_driver": None, "blas": {}, "python": "3", "platform": "p", "cpu": "c",
           "cpu_count": 1, "packages": {}}
    run = {"command": "pytest", "profile": "ci", "seed": 0, "matrix": "m", "impl_options": [],
           "implementations": []}
    write_report(tmp_path, build_report(c, env, run))
    data = json.loads((tmp_path / "report.json").read_text())
    jsonschema.validate(data, SCHEMA)
    assert data["results"][0]["checks"][0]["measured"] == "inf"
    assert data["results"][0]["worst_margin"] == "inf"
    assert "| a | `i` | 0 | 1 |" in (tmp_path / "summary.md").read_text()


def test_elementwise_bound_measurements():
    ref = np.array([1.0, 2.0, np.inf, np.nan])
    ok = elementwise_bound("m", ref.copy(), ref, np.full(4, 0.1))
    assert ok.ok and ok.measured == 0
    bad = elementwise_bound("m", np.array([1.0, 2.5, np.inf, np.nan]), ref, np.full(4, 0.1))
    assert not bad.ok and bad.measured == 0.5 and "at (1): got 2.5, expected 2.0" in bad.detail
    nan = elementwise_bound("m", np.array([np.nan, 2.0, np.inf, np.nan]), ref, 0.1)
    assert not nan.ok and nan.measured == math.inf
    wrong_inf = elementwise_bound("m", np.array([1.0, 2.0, -np.inf, np.nan]), ref, 0.1)
    assert not wrong_inf.ok
    assert elementwise_bound("m", np.zeros(2), np.zeros(3), 1.0).measured == math.inf
    assert bad.scaled(10).ok and not exact("e", 1, 3).scaled(10).ok


def test_graphs_table_one_row_per_runtime():
    from conformance.report.tables import graphs_table

    def res(nodeid: str, impl: str, dtype: str | None, outcome: str) -> dict:
        return {"area": "graphs", "nodeid": nodeid, "impl": impl, "dtype": dtype,
                "outcome": outcome}

    base = "conformance/areas/graphs/test_graphs.py::"
    lines = graphs_table([
        res(base + "test_replay_equals_eager[rt-float32-mlp]", "rt", "float32", "passed"),
        res(base + "test_replay_equals_eager[rt-bfloat16-mlp]", "rt", "bfloat16", "failed"),
        res(base + "test_random[rt-float32]", "rt", "float32", "unsupported"),
        res("conformance/areas/graphs/test_regressions.py::test_clone_state_in_capture[rt]", "rt",
            None, "expected-fail"),
        {**res("conformance/areas/topk/test_topk.py::test_random[t-float32]", "t", "float32",
               "passed"), "area": "topk"},
    ])
    assert lines[-3:] == ["| runtime | mlp | random | clone_state_in_capture |",
                          "|---|---|---|---|", "| `rt` | pass / FAIL | - | xfail |"]
    assert graphs_table([]) == []


def test_an_exact_output_passes_where_the_bound_is_nan():
    """A NaN reference matched by NaN, and every other element exact: passed, whatever the
    bound says there (a bound formed from the NaN reference is NaN; seen as a false alarm
    on an exact float64 grid_sample)."""
    nan = float("nan")
    m = elementwise_bound("x", np.array([nan, 1.0]), np.array([nan, 1.0]), np.array([nan, 0.1]))
    assert m.ok and m.measured == 0
    m = elementwise_bound("x", np.array([nan, 1.5]), np.array([nan, 1.0]), np.array([nan, 0.1]))
    assert not m.ok
