"""The checks added with the fresh-process rule, the size past each Dim's max and the new
input shapes (conformance/areas/export/shapes.py) each kill a planted fault
(tests/planted/export_faults.py), and the correct twins pass the same round trips (float32,
CPU, builtins off)."""

from __future__ import annotations

import pytest

from tests.conftest import SUITE

# CI's oldest leg runs it too: torch.export's APIs and what they keep change between releases
pytestmark = pytest.mark.torch_release

RATIO, SHAPE = "error ratio rule", "output shape"
BUILDS = "round trip builds"


def _flagged(results: dict, fault: str, node: str, check: str) -> list:
    rows = results.get(fault, [])
    hit = [r for r in rows if node in r["nodeid"] and r["outcome"] == "failed"
           and check in (r.get("reason") or "")]
    assert hit, (fault, [(r["nodeid"], r["outcome"], (r.get("reason") or "")[:300])
                         for r in rows])
    return hit


def _passed(results: dict, twin: str, count: int) -> None:
    rows = [r for r in results.get(twin, []) if "-float32-" in r["nodeid"]]
    assert len(rows) == count and all(r["outcome"] == "passed" for r in rows), [
        (r["nodeid"], r["outcome"], (r.get("reason") or "")[:300]) for r in rows]


def test_planted_shape_faults_are_flagged(suite):
    """test_shapes.py: an unbatched input answered as a batch of one (the outputs keep a
    batch dim) and a bias=False module rebuilt with default-initialised biases."""
    impls = [f"--impl=export=planted.export_faults:{x}"
             for x in ("unbatched_as_batch1", "bias_false_given_biases", "correct")]
    run = suite(str(SUITE / "export" / "test_shapes.py"), "-n", "0", "-q", "-p",
                "no:randomly", "--no-builtins", "-k",
                "test_shape and float32 and (lstm_unbatched or lstm_nobias)", *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    _flagged(results, "unbatched_as_batch1", "-lstm_unbatched]", SHAPE)
    _flagged(results, "bias_false_given_biases", "-lstm_nobias]", RATIO)
    _passed(results, "correct", 2)


def test_planted_fresh_process_faults_are_flagged(suite):
    """test_export.py, the LSTM with a dynamic batch: a saved program that needs an op
    registered in the building process (its fresh process refuses to load it), and a
    program that answers batch 65 (past Dim('batch', max=64)) with the example's shape."""
    impls = [f"--impl=export=planted.export_faults:{x}"
             for x in ("saved_needs_builder", "answers_past_max", "saved_correct", "correct")]
    run = suite(str(SUITE / "export" / "test_export.py"), "-n", "0", "-q", "-p",
                "no:randomly", "--no-builtins", "-k",
                "test_roundtrip and float32 and lstm-batch", *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    _flagged(results, "saved_needs_builder", "-lstm-batch]", BUILDS)
    _flagged(results, "answers_past_max", "-lstm-batch]", SHAPE)
    _passed(results, "saved_correct", 1)
    _passed(results, "correct", 1)
