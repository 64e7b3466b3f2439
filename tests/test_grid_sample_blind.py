"""A compact kill table of the blind grid_sample faults (tests/planted/blind_grid_sample_faults.py,
written without reading the checks; all 27 passed some dtype before issue 41's bounds, see
docs/areas/grid-sample.md): each fault here is flagged in every dtype it changes, the two
correct outside implementations pass the same tests (builtins off)."""

from __future__ import annotations

from tests.conftest import SUITE

HALF, ALL = ("float16", "bfloat16"), ("float16", "bfloat16", "float32", "float64")
KILLS = {  # fault -> the dtypes it changes (each must fail some selected test in each)
    "half_unnormalize": HALF,        # coordinates in the half type
    "half_accumulate": HALF,         # taps summed in the half type
    "half_truncating_store": HALF,   # float32 -> half rounds toward zero
    "bicubic_a_half": ALL,           # A = -0.5
    "tile_tail_dropped": ALL,        # the last partial tile of 65,536 points never launched
    "flat_offset_float32": ALL,      # y * W + x in float32: wrong past 2^24 pixels
}
CORRECT = ("numpy_cast", "float32_compute")
SELECT = ("((test_huge_plane or test_large_grid) and (flat_offset_float32 or tile_tail_dropped "
          "or numpy_cast or float32_compute)) or (test_random and bicubic-zeros-noac)")


def test_blind_grid_sample_faults_are_killed_and_outside_ones_pass(suite):
    impls = [f"--impl=grid_sample=planted.blind_grid_sample_faults:{x}"
             for x in (*KILLS, *CORRECT)]
    run = suite(str(SUITE / "grid_sample"), "-n", "0", "-q", "-p", "no:randomly",
                "--no-builtins", "-k", SELECT, *impls)
    results = run.by_impl()

    def failed_dtypes(attr: str) -> set[str]:
        found = [v for k, v in results.items() if k.split(".")[-1] == attr]
        assert len(found) == 1, (attr, sorted(results))
        return {r["nodeid"].split("[")[1].split("-")[1] for r in found[0]
                if r["outcome"] in ("failed", "crashed", "error")}

    for fault, dtypes in KILLS.items():
        assert set(dtypes) <= failed_dtypes(fault), (fault, sorted(failed_dtypes(fault)))
    for attr in CORRECT:
        assert not failed_dtypes(attr), (attr, sorted(failed_dtypes(attr)))
