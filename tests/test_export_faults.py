"""The issue's export faults, plugged in through ``--impl export=...``, are flagged by the
error-ratio check (and a program that refuses sizes it was exported for by the refusal
check); their correct twin passes the same round trips (one run, builtins off,
float32, an LSTM with initial states and a bidirectional GRU, dynamic batch)."""

from __future__ import annotations

import pytest

from tests.conftest import SUITE

# CI's oldest leg runs it too: torch.export's APIs and what they keep change between releases
pytestmark = pytest.mark.torch_release

RATIO, REFUSED = "error ratio rule", "accepts the sizes it was exported for"
# planted implementation -> (the models it must be flagged on (on the others the fault is
# a no-op), the check that must flag it)
FAULTS = {
    "specialised_batch": (("lstm", "gru_bi"), RATIO),
    "zero_initial_state": (("lstm", "gru_bi"), RATIO),
    "swapped_directions": (("gru_bi",), RATIO),
    "float16_inside": (("lstm", "gru_bi"), RATIO),
    "gru_gates_swapped": (("gru_bi",), RATIO),
    "refuses_other_batches": (("lstm", "gru_bi"), REFUSED),
}


def test_planted_export_faults_are_flagged(suite):
    impls = [f"--impl=export=planted.export_faults:{x}" for x in (*FAULTS, "correct")]
    run = suite(str(SUITE / "export" / "test_export.py"), "-n", "0", "-q",
                "-p", "no:randomly", "--no-builtins", "-k",
                "test_roundtrip and float32 and (lstm-batch or gru_bi-batch)", *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for fault, (models, check) in FAULTS.items():
        rows = results.get(fault, [])
        flagged = {m for m in models for r in rows
                   if f"-{m}-batch]" in r["nodeid"] and r["outcome"] == "failed"
                   and check in (r.get("reason") or "")}
        assert flagged == set(models), (fault, [(r["nodeid"], r["outcome"],
                                                 (r.get("reason") or "")[:200]) for r in rows])
    twins = [r for r in results.get("correct", []) if "-float32-" in r["nodeid"]]
    assert len(twins) == 2 and all(r["outcome"] == "passed" for r in twins), twins
    assert "reproduce: PYTHONPATH=" in run.stdout
