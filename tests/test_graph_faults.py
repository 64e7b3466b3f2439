"""The issue's graph-runtime faults, plugged in through ``--impl graphs=...``, are each
flagged by the check that names them, and the CPU reference runtime (their correct twin)
passes every graphs case it declares, the regression cases included (one run, builtins off,
float32)."""

from __future__ import annotations

import pytest

from tests.conftest import SUITE

# CI's oldest leg runs it too: the graph runtimes' capture and replay APIs change between releases
pytestmark = pytest.mark.torch_release

# planted runtime -> (the tests that must fail, the check that must say so)
FAULTS = {
    "stale_inputs": (("test_replay_equals_eager[stale_inputs-float32-mlp]",
                      "test_replay_equals_eager[stale_inputs-float32-train_step]"),
                     "replay == eager"),
    "frozen_rng": (("test_random[frozen_rng-float32]",), "after the same manual_seed"),
    "fresh_outputs": (("test_replay_equals_eager[fresh_outputs-float32-mlp]",),
                      "graph.outputs are the captured tensors"),
    "pool_clobbers": (("test_shared_pool[pool_clobbers-float32]",),
                      "the first graph's outputs after the second replayed"),
    "skips_optimizer_step": (("test_replay_equals_eager[skips_optimizer_step-float32-"
                              "train_step]",), "replay == eager (state)"),
    # a runtime with its own kernels (same_kernels False) is held to the oracle rule
    "low_precision": (("test_replay_equals_eager[low_precision-float32-mlp]",
                       "test_replay_equals_eager[low_precision-float32-attention]"),
                      "replay: output 0 (error ratio rule)"),
    "leaks_per_replay": (("test_memory_flat[leaks_per_replay-float32]",),
                         "memory allocated flat over 100 replays"),
    "no_host_sync_check": (("test_illegal_capture[no_host_sync_check-float32]",),
                           "capture with .item() inside raises"),
    "stale_graphed": (("test_graphed_training[stale_graphed-float32]",), "step 1: loss"),
    # the proof of replay: replay == eager by construction, or no graph at all
    "replays_by_calling": (("test_replay_equals_eager[replays_by_calling-float32-mlp]",),
                           "replay 1 re-ran the Python function: no captured graph"),
    # reduce_overhead_on_cpu (a real torch.compile, seconds) proves the same check in the
    # selftest (graph_runtime.SELFTEST); CI runs the tape that reports a skip
    "skips_cudagraphs": (("test_replay_equals_eager[skips_cudagraphs-float32-mlp]",),
                         "no cudagraph skips"),
    # also flagged by test_memory_flat (the selftest's choice); this one costs no 100 replays
    "skips_unchanged_replays": (("test_two_graphs_interleaved_rng[skips_unchanged_replays-own]",),
                                "the graph's replay counter equals the replays asked for"),
    # the upstream pitfalls (test_pitfalls.py)
    "rng_ignores_eager_draws": (("test_graphed_eager_graphed_rng[rng_ignores_eager_draws]",),
                                "graphed -> eager -> graphed == eager x 6"),
    "frozen_generator": (("test_registered_generator[frozen_generator]",),
                         "of a generator seeded the same"),
    "frozen_uncommon_samplers": (("test_distribution[frozen_uncommon_samplers-cauchy_]",),
                                 "after the same manual_seed"),
    "reset_keeps_tape": (("test_reset_recapture[reset_keeps_tape]",),
                         "after reset and recapture == the new function"),
    "reset_leaks": (("test_memory_over_captures[reset_leaks]",),
                    "memory allocated flat over 4 capture/reset cycles"),
    "item_only_sync_check": (("test_sync_in_capture[item_only_sync_check-nonzero]",),
                             "inside raises"),
    "accepts_any_error_mode": (("test_unknown_capture_error_mode[accepts_any_error_mode]",),
                               "capture_error_mode='sloppy' is refused"),
}


def _keyword(names: str) -> str:
    """pytest -k matches words: a test id's brackets and dashes as pytest reads them."""
    return " or ".join(f"({n.split('[')[0]} and {' and '.join(n.split('[')[1][:-1].split('-'))})"
                       for n in names.split(" or "))


def test_planted_graph_faults_are_flagged(suite):
    impls = [f"--impl=graphs=planted.graph_runtime:{x}" for x in (*FAULTS, "reference")]
    named = " or ".join(t for ts, _ in FAULTS.values() for t in ts)
    run = suite(str(SUITE / "graphs" / "test_graphs.py"), str(SUITE / "graphs" /
                "test_regressions.py"), str(SUITE / "graphs" / "test_pitfalls.py"), "-n", "0",
                "-q", "-p", "no:randomly", "--no-builtins", "-k",
                f"(reference and not bfloat16) or {_keyword(named)}", *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for fault, (tests, check) in FAULTS.items():
        rows = {r["nodeid"].split("::")[-1]: r for r in results.get(fault, [])}
        for name in tests:
            row = rows.get(name)
            assert row is not None and row["outcome"] == "failed", (fault, name, row)
            assert check in (row.get("reason") or ""), (fault, name, row.get("reason"))
    # the correct twin: 10 float32 cases (the illegal capture included), the 6 regression
    # cases (the all_reduce one over two gloo ranks), so that on a device those fail only
    # for the device's bug, and the 23 pitfall cases (.cpu() unsupported on the CPU)
    twins = results.get("reference", [])
    ran = [r for r in twins if r["outcome"] not in ("skipped", "unsupported")]
    assert len(ran) == 39 and all(r["outcome"] == "passed" for r in ran), \
        [(r["nodeid"], r["outcome"]) for r in twins]
    assert "reproduce: PYTHONPATH=" in run.stdout


def test_bench_on_the_reference_runtime(tmp_path):
    """The launch-overhead benchmark runs end to end (CPU reference, 2 iterations) and
    writes a row per workload; a bad --impl is a usage error (exit 4)."""
    import json

    from conformance.areas.graphs import bench

    out = tmp_path / "bench.json"
    assert bench.main(["--device", "cpu", "--impl", "tests.planted.graph_runtime:reference",
                       "--iters", "2", "--out", str(out)]) == 0
    rows = {r["workload"]: r for r in json.loads(out.read_text())["rows"]}
    assert rows["mlp"]["replay_s"] > 0 and "skipped" in rows["side_stream"]
    assert bench.main(["--device", "cpu", "--impl", "no_such_module:x"]) == 4
