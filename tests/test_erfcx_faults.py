"""The issue's erfcx faults, plugged in through ``--impl special.erfcx=...``, are flagged by
the forward ulp check, a backward fault by the backward bound; the correct twin passes
(float32 and float64, builtins off)."""

from __future__ import annotations

from tests.conftest import SUITE

FAULTS = {"naive": ("large", "random", "branches"), "early_asymptotic": ("branches", "random")}


def test_planted_erfcx_faults_are_flagged(suite):
    impls = [f"--impl=special.erfcx=planted.erfcx_faults:{x}"
             for x in (*FAULTS, "half_grad", "correct")]
    run = suite(str(SUITE / "special" / "test_erfcx.py"), "-n", "0", "-q", "-p", "no:randomly",
                "--no-builtins", "-k", "(test_forward and (float32 or float64) and not half_grad)"
                " or (half_grad and float32 and (test_backward[ or random))", *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for fault, regions in FAULTS.items():
        rows = {r["nodeid"].split("::")[-1]: r for r in results.get(fault, [])}
        for dtype in ("float32", "float64"):
            for region in regions:
                name = f"test_forward[{fault}-{dtype}-{region}]"
                row = rows.get(name)
                assert row is not None and row["outcome"] == "failed", (name, row)
                assert "in ulps" in (row.get("reason") or ""), (name, row.get("reason"))
    # a backward that drops the 2 of 2x erfcx(x): flagged by the backward bound, while its
    # forward (torch's) passes
    rows = {r["nodeid"].split("::")[-1]: r for r in results["half_grad"]}
    bad = rows["test_backward[half_grad-float32]"]
    assert bad["outcome"] == "failed" and "forward-error bound" in bad["reason"], bad
    assert rows["test_forward[half_grad-float32-random]"]["outcome"] == "passed"
    twins = [r for r in results.get("correct", []) if r["outcome"] != "unsupported"]
    assert len(twins) == 14 and all(r["outcome"] == "passed" for r in twins), \
        [(r["nodeid"], r["outcome"]) for r in twins]

