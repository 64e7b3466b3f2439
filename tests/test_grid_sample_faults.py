"""The issue's grid_sample faults, plugged in through ``--impl grid_sample=...``, are each
flagged where they differ, and so is a backward fault, in every dtype (the faults compute
in float32 for the half types, as the bound certifies); the correct twin passes the same
cases (builtins off)."""

from __future__ import annotations

import itertools

from tests.conftest import SUITE

BOUND = "forward-error bound"
NEAREST = "nearest picks the pixel"
FAULTS = {
    "align_corners_inverted": [("test_random", "bilinear-zeros-noac", BOUND),
                               ("test_random", "bilinear-border-ac", BOUND)],
    "half_pixel_off": [("test_random", "bilinear-zeros-noac", BOUND),
                       ("test_pixel_positions", "bicubic-border-ac", BOUND)],
    "reflect_once": [("test_far_grid", "bilinear-reflection-noac", BOUND),
                     ("test_far_grid", "bilinear-reflection-ac", BOUND)],
    "nearest_half_away": [("test_pixel_positions", "nearest-zeros-ac", NEAREST),
                          ("test_pixel_positions", "nearest-border-ac", NEAREST)],
    # a backward fault: the grid gradient scaled for the other align_corners convention
    "grid_grad_scale": [("test_backward", "bilinear-zeros-ac", "grad_grid within"),
                        ("test_backward", "bicubic-border-ac", "grad_grid within")],
}


DTYPES = ("float16", "bfloat16", "float32", "float64")


def test_planted_grid_sample_faults_are_flagged(suite):
    impls = [f"--impl=grid_sample=planted.grid_sample_faults:{x}" for x in (*FAULTS, "correct")]
    cases = {(test, combo) for listed in FAULTS.values() for test, combo, _ in listed}
    select = " or ".join(f"({test} and {combo})" for test, combo in sorted(cases))
    run = suite(str(SUITE / "grid_sample" / "test_grid_sample.py"), "-n", "0", "-q",
                "-p", "no:randomly", "--no-builtins", "-k", select, *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for fault, listed in FAULTS.items():
        rows = {r["nodeid"].split("::")[-1]: r for r in results.get(fault, [])}
        for (test, combo, check), dtype in itertools.product(listed, DTYPES):
            name = f"{test}[{fault}-{dtype}-{combo}]"
            row = rows.get(name)
            assert row is not None and row["outcome"] == "failed", (name, row)
            assert check in (row.get("reason") or ""), (name, row.get("reason"))
    twins = [r for r in results.get("correct", []) if r["outcome"] != "unsupported"]
    forward = [c for c in cases if c[0] != "test_backward"]  # the twin has no "backward"
    assert len(twins) == len(forward) * len(DTYPES), len(twins)
    assert all(r["outcome"] == "passed" for r in twins), \
        [(r["nodeid"], r["outcome"]) for r in twins if r["outcome"] != "passed"]
