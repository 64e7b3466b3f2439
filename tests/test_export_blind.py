"""The blind export round trips (tests/planted/blind_export_roundtrips.py, written without
reading the checks; ``TODAY`` there records what the suite missed at 0f79775) are killed by
the tests ``KILLED_BY`` names, with the check that says so, and the correct ones (a
torch.export twin, a TorchScript trace, hand-written recurrences) pass those tests (one child
run, builtins off, float32). CI runs the faults that survived the suite before (``NEW``:
what the new checks kill, ~1 min); ``KILLED_BY`` is the whole table, for
``CONFORMANCE_BLIND_ALL=1`` (4 min on 2 cores)."""

from __future__ import annotations

import os

import pytest

from tests.conftest import SUITE
from tests.test_graph_faults import _keyword

# what it tests is the suite's checks, not torch's behaviour: the newest torch only in CI
pytestmark = pytest.mark.harness_only

RT, CALLS = "test_roundtrip", "test_calls"
RATIO, MUTATED = "(error ratio rule)", "leaves the module it was given as it was"
# fault -> (the test that kills it, what its failure names); * survived the suite before
KILLED_BY = {
    "gates_reordered_in_place": (f"{RT}[gates_reordered_in_place-float32-gru-static]",
                                 MUTATED),  # *
    "half_roundtrip_in_place": (f"{RT}[half_roundtrip_in_place-float32-gru-static]",
                                MUTATED),  # *
    "clamps_to_max": (f"{RT}[clamps_to_max-float32-convnet-batch]", RATIO),  # *
    "cache_by_structure": (f"{CALLS}[cache_by_structure-float32]",
                           "a second module with other weights"),  # *
    "cache_by_data_ptr": (f"{CALLS}[cache_by_data_ptr-float32]",
                          "new values in the same input tensors"),  # *
    "noncontiguous_as_contiguous": (f"{CALLS}[noncontiguous_as_contiguous-float32]",
                                    "non-contiguous inputs"),  # *
    "aliased_outputs": (f"{CALLS}[aliased_outputs-float32]",
                        "the first call's outputs unchanged"),  # *
    "artefact_reinitialised": (f"{CALLS}[artefact_reinitialised-float32]",
                               "its artefact, loaded by a fresh process"),  # *
    "gru_bias_merged": (f"{RT}[gru_bias_merged-float32-gru-static]", RATIO),
    "gru_reset_before_matmul": (f"{RT}[gru_reset_before_matmul-float32-gru-static]", RATIO),
    "bidir_reverse_unflipped": (f"{RT}[bidir_reverse_unflipped-float32-rnn_relu_bi-static]",
                                RATIO),
    "states_direction_major": (f"{RT}[states_direction_major-float32-lstm_proj_bi-static]",
                               RATIO),
    "tf32_matmuls": (f"{RT}[tf32_matmuls-float32-rnn_tanh-static]", RATIO),
    "chunked_state_reset": (f"{RT}[chunked_state_reset-float32-rnn_tanh-seq]", RATIO),
    "batch_split_first_states": (f"{RT}[batch_split_first_states-float32-rnn_tanh-batch]",
                                 RATIO),
    "float64_single_example": (f"{RT}[float64_single_example-float32-rnn_tanh-batch]",
                               "output dtype"),
    "stateful_across_calls": (f"{RT}[stateful_across_calls-float32-rnn_relu_bi-static]",
                              RATIO),
    "layernorm_eps_changed": (f"{RT}[layernorm_eps_changed-float32-encoder-static]", RATIO),
}
NEW = ("gates_reordered_in_place", "half_roundtrip_in_place", "clamps_to_max",
       "cache_by_structure", "cache_by_data_ptr", "noncontiguous_as_contiguous",
       "aliased_outputs", "artefact_reinitialised")
CORRECT = ("correct", "outside_jit_trace", "outside_handwritten")
TWIN_TESTS = (f"{CALLS}[X-float32]", f"{RT}[X-float32-gru-static]",
              f"{RT}[X-float32-convnet-batch]")


def test_blind_export_faults_are_killed(suite):
    faults = {f: KILLED_BY[f] for f in (KILLED_BY if os.environ.get("CONFORMANCE_BLIND_ALL")
                                       else NEW)}
    impls = [f"--impl=export=planted.blind_export_roundtrips:{x}" for x in (*faults, *CORRECT)]
    named = [t for t, _ in faults.values()]
    named += [t.replace("X", c) for c in CORRECT for t in TWIN_TESTS]
    run = suite(str(SUITE / "export" / "test_export.py"), str(SUITE / "export" /
                "test_calls.py"), "-n", "0", "-q", "-p", "no:randomly", "--no-builtins",
                "-k", _keyword(" or ".join(named)), *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for fault, (name, check) in faults.items():
        rows = {r["nodeid"].split("::")[-1]: r for r in results.get(fault, [])}
        row = rows.get(name)
        assert row is not None and row["outcome"] == "failed", (fault, name, row)
        assert check in (row.get("reason") or ""), (fault, name, row.get("reason"))
    for twin in CORRECT:
        rows = {r["nodeid"].split("::")[-1]: r for r in results.get(twin, [])}
        for t in TWIN_TESTS:
            row = rows.get(t.replace("X", twin))
            assert row is not None and row["outcome"] == "passed", (twin, t, row)
