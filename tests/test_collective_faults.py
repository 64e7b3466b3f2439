"""The issue's collective faults, plugged in through ``--impl collectives.<op>=...``, are
flagged by the checks named here; their correct twins pass the same tests (one run,
builtins off, world size 3, float32)."""

from __future__ import annotations

from tests.conftest import SUITE

# (area, planted implementation, its correct twin, the check that must flag it)
FAULTS = [
    ("all_reduce", "unreduced_backward", "correct_all_reduce", "gradient"),
    ("all_reduce", "avg_backward_without_1_over_w", "correct_all_reduce", "gradient"),
    ("all_gather_tensor", "gather_backward_own_slice", "correct_all_gather", "gradient"),
    ("reduce_scatter_tensor", "reduce_scatter_reversed", "correct_reduce_scatter", "forward"),
    ("all_to_all_single", "all_to_all_backward_same_splits", "correct_all_to_all", ""),
    ("all_to_all_single", "all_to_all_even_splits_only", "correct_all_to_all", ""),
]


def test_planted_collective_faults_are_flagged(suite):
    impls = sorted({f"--impl=collectives.{a}=planted.collective_faults:{x}"
                    for a, fault, twin, _ in FAULTS for x in (fault, twin)})
    run = suite(str(SUITE / "collectives" / "test_collectives.py"), "-n", "0", "-q",
                "-p", "no:randomly", "--no-builtins", "-k",
                "test_collective and w3 and float32 and (sum or avg or none)", *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for _area, fault, twin, check in FAULTS:
        rows = results.get(f"planted.{fault}", [])
        failed = [r for r in rows if r["outcome"] == "failed"]
        assert failed, f"planted.{fault} was not flagged"
        assert all(check in (r.get("reason") or "") for r in failed), \
            (fault, [r.get("reason", "")[:300] for r in failed][:3])
        twins = results.get(f"planted.{twin}", [])
        bad = [r["nodeid"] for r in twins if r["outcome"] not in ("passed", "unsupported")]
        assert twins and not bad, (twin, bad)
    assert "reproduce: PYTHONPATH=" in run.stdout
