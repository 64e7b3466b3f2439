"""The blind indexing faults (tests/planted/blind_indexing.py, written without reading the
checks) that passed the suite before issue 44 are flagged now, each by the test its row
names (the areas that did not exist then included), and the blind outside
implementations (numpy, blind_indexing_correct.py) pass."""

from __future__ import annotations

from tests.conftest import SUITE
from tests.planted.blind_indexing_correct import CORRECT

PLANTED = "tests.planted.blind_indexing"
# (area op, fault, the test that flags it in the ci profile) - each passed at 0a46a6e
NEWLY_FLAGGED = [
    ("index_copy_", "index_copy_checks_first_vector", "test_invalid[late_in_large-"),
    ("index_select", "index_select_fast_path_clamps", "test_invalid[late_in_large-"),
    ("embedding", "embedding_fast_path_zero_rows", "test_invalid[late_in_large-"),
    ("scatter_add_", "scatter_add_fast_path_drops", "test_invalid[late_in_large-"),
    ("gather", "gather_expanded_index_checks_first", "test_invalid[expanded-"),
    ("nll_loss", "nll_loss_nan_large_batch", "test_invalid[late_in_large-"),
    ("cross_entropy", "cross_entropy_ignores_oob_large", "test_invalid[late_in_large-"),
    ("one_hot", "one_hot_wraps_large", "test_invalid[late_in_large-"),
    ("index_select", "index_select_empty_dim_zeros", "test_invalid[empty_dim-"),
    ("index_fill_", "index_fill_empty_early_return", "test_invalid[empty_dim-"),
    ("getitem", "getitem_bool_mask_truncates", "test_invalid[mask_"),
    ("setitem", "setitem_checks_first_index_tensor", "test_invalid[n-"),
    ("embedding", "embedding_max_norm_unchecked", "test_invalid[n-"),
    ("index_add_", "index_add_fp16_accumulate_large", "test_large["),
    ("scatter_add_", "scatter_add_fp16_accumulate_large", "test_large["),
    ("take_along_dim", "take_along_dim_checks_first_vector", "test_invalid[late_in_large-"),
    ("searchsorted", "searchsorted_sorter_unchecked", "test_invalid[n-"),
    ("bincount", "bincount_clamps_negative", "test_invalid[-1-"),
    ("masked_select", "masked_select_fits_mask", "test_invalid[mask_"),
    ("masked_scatter_", "masked_scatter_zero_pads_source", "test_invalid[source_short-"),
]
PLANTED2 = "tests.planted.blind_indexing2"
# round 2 (written after the checks above were built): passed the ci profile at 01d790d
NEWLY_FLAGGED_2 = [
    ("index_copy_", "index_copy_int32_path_32bit_offsets", "test_invalid[wrap32-"),
    ("take", "take_int32_path_32bit_offsets", "test_invalid[wrap32-"),
    ("getitem", "getitem_uint8_mask_as_index", "test_invalid[mask_short-"),
    ("setitem", "setitem_uint8_mask_as_index", "test_invalid[mask_short-"),
    ("index_fill_", "index_fill_bool_writes_raw_value", "test_invalid[n-"),
    ("repeat_interleave", "repeat_interleave_checks_first_8_repeats",
     "test_invalid[late_in_large-"),
]


def test_blind_indexing_faults_flagged_and_outside_impls_pass(suite):
    impls = [f"--impl=indexing.{a}={PLANTED}:{x}" for a, x, _ in NEWLY_FLAGGED]
    impls += [f"--impl=indexing.{a}={PLANTED2}:{x}" for a, x, _ in NEWLY_FLAGGED_2]
    impls += [f"--impl=indexing.{a}={PLANTED}_correct:{x}" for a, x in CORRECT]
    run = suite(str(SUITE / "indexing"), "-n", "2", "-q", "-p", "no:randomly",
                "--no-builtins", *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for module, faults in ((PLANTED, NEWLY_FLAGGED), (PLANTED2, NEWLY_FLAGGED_2)):
        _flagged(results, module, faults)
    for _, name in CORRECT:
        rows = results.get(f"{PLANTED}_correct:{name}", [])
        bad = [(r["nodeid"], r.get("reason")) for r in rows
               if r["outcome"] not in ("passed", "unsupported")]
        assert rows and not bad, (name, bad[:3])


def _flagged(results: dict, module: str, faults: list) -> None:
    for _, fault, where in faults:
        rows = results.get(f"{module}:{fault}", [])
        flagged = [r for r in rows if r["outcome"] == "failed" and where in r["nodeid"]]
        assert flagged, (fault, where, [(r["nodeid"], r["outcome"]) for r in rows][:5])
