"""Each deliberately wrong implementation, plugged in through --impl, must make the suite
fail with a readable message naming the implementation, the broken property and a
reproduce line. The built-in implementations pass the same suite (CI's conformance run)."""

from __future__ import annotations

import re

import pytest

from tests.conftest import SUITE, SuiteRun, shared_run

PLANTED = [
    ("topk", "topk_faults:nan_smallest", "values equal the oracle"),
    ("topk", "topk_faults:duplicate_index_on_ties", "indices in range and distinct"),
    ("topk", "topk_faults:wrong_beyond_768", "topk"),
    ("topk", "topk_faults:sign_of_zero_lost", "sign of zero included"),
    ("topk", "topk_faults:ignores_sorted", "in order"),
    ("topk", "topk_faults:total_order_nans", "values equal the oracle"),
    ("gemm", "gemm_faults:fp16_accumulation", "accumulate float32"),
    ("gemm", "gemm_faults:ignores_strides", "forward-error bound"),
    ("gemm", "gemm_faults:drops_last_k", "forward-error bound"),
    ("gemm", "gemm_faults:truncating_output", "forward-error bound"),
    ("gemm", "gemm_faults:first_batch_only", "forward-error bound"),
    ("gemm", "gemm_faults:ragged_split_k", "forward-error bound"),
    ("attention", "attention_faults:wrong_scale", "out within"),
    ("attention", "attention_faults:lse_in_log2", "lse (natural log)"),
    ("attention", "attention_faults:causal_top_left", "out within"),
    ("attention", "attention_faults:mask_after_softmax", "out within"),
    ("attention", "attention_faults:gqa_head_modulo", "out within"),
    ("attention", "attention_faults:tiled_no_rescale", "out within"),
    ("attention", "attention_faults:upcast_output", "output structure"),
    ("attention", "attention_faults:tf32_scores", "within"),
    ("attention", "triton_faults:no_rescale", "within"),
    ("attention", "triton_faults:off_by_one_key", "within"),
    ("attention", "triton_faults:drops_last_partial_block", "within"),
    ("attention", "triton_faults:lse_zero_on_masked_rows", "lse (natural log)"),
]


def _area_run(factory: pytest.TempPathFactory, area: str, triton: bool) -> SuiteRun:
    """One run of ``area`` judging all its planted faults (each stopped at its first failure,
    as -x stopped it alone), shared by their tests on every worker: the fault list's run of
    the area for topk and GEMM (tests/test_fault_list.py); attention's lists each failure
    with its message only in a run of these faults alone (more fail in the list's run, and
    the summary groups them)."""
    if area != "attention":
        from tests.test_fault_list import group_run

        return group_run(factory, area)
    specs = [spec for a, spec, _ in PLANTED if a == area
             and spec.startswith("triton_faults") == triton]
    return shared_run(factory, f"planted-{area}{'-triton' if triton else ''}", [
        str(SUITE / area), "-n", "0", "-q", "--no-builtins", "--stop-impl-after-failure",
        *(f"--impl={area}=planted.{spec}" for spec in specs)])


@pytest.mark.parametrize("area,spec,expected", PLANTED, ids=[p[1] for p in PLANTED])
def test_planted_fault_is_flagged(tmp_path_factory, area, spec, expected):
    triton = spec.startswith("triton_faults")
    if triton:
        pytest.importorskip("triton", reason="[skipped] triton is not installed")
    prefix = "triton_" if triton else ""
    name = "planted." + prefix + spec.split(":")[1]
    run = _area_run(tmp_path_factory, area, triton)
    assert run.returncode == 1 and run.report is not None, run.output[-3000:]
    mine = run.by_impl().get(name, [])
    failed = [r for r in mine if r["outcome"] == "failed"]
    # the first failure, named with the broken property, and its reproduce line (the
    # suite's terminal summary prints both)
    assert len(failed) == 1, [(r["nodeid"], r["outcome"]) for r in mine]
    first = failed[0]
    # the check's message names the area, the broken property and, on the next line, this
    # implementation
    said = re.findall(rf"(\[{re.escape(area)}\][^\n]*)\n[^\n]*impl={re.escape(name)} ",
                      run.stdout)
    assert any(expected in line for line in said), (said, first["reason"][-3000:])
    assert "reproduce: PYTHONPATH=" in run.stdout and f"--impl={area}=planted.{spec}" in \
        first["reproduce"], first["reproduce"]
    # a kill is credited to this implementation's own test: its later tests stopped
    later = [r for r in mine if r["outcome"] not in ("failed", "skipped", "unsupported")]
    assert all(r["outcome"] in ("passed", "expected-fail") for r in later), later
    assert all("failed an earlier test" in r["reason"] for r in mine
               if r["outcome"] == "skipped" and "--stop-impl-after-failure" in r["reason"])


@pytest.mark.parametrize("spec,scope", [
    ("attention_faults:tiled_correct", []),
    ("attention_faults:correct_dense", ["-k", "catalogue or regressions"]),
], ids=["tiled_correct", "correct_dense"])
def test_planted_controls_pass(suite, spec, scope):
    """The planted faults' correct twins pass: their failures come from their bugs."""
    run = suite(str(SUITE / "attention"), "-n", "0", "-q", "--no-builtins",
                f"--impl=attention=planted.{spec}", *scope)
    assert run.returncode == 0, run.stdout[-3000:]
    assert run.report["summary"]["passed"] > 50


def _by_test(run) -> dict[str, dict[str, list[str]]]:
    """outcome -> test function -> the parameter ids of its results."""
    out: dict[str, dict[str, list[str]]] = {}
    for r in run.report["results"]:
        func, _, params = r["nodeid"].split("::")[-1].partition("[")
        out.setdefault(r["outcome"], {}).setdefault(func, []).append(params.rstrip("]"))
    return out


DENSE_SCOPE = ["-k", "catalogue or regressions"]


def test_dense_only_control_is_exercised(suite):
    """An implementation that declares no mask and no score_mod (it raises if given one)
    still meets the catalogue's awkward shapes, forward, lse and backward, the GQA/MQA
    mapping and the maskless regressions, and passes them."""
    spec = "attention_faults:dense_only_correct"
    run = suite(str(SUITE / "attention"), "-n", "0", "-q", "--no-builtins",
                f"--impl=attention=planted.{spec}", *DENSE_SCOPE)
    assert run.returncode == 0, run.stdout[-3000:]
    passed = _by_test(run)["passed"]
    dtypes = 3  # float16, bfloat16, float32
    for func in ("test_forward_catalogue", "test_forward_lse_catalogue",
                 "test_backward_catalogue"):
        assert len(passed.get(func, [])) == dtypes, (func, passed)
        assert all(p.endswith("-nomask+nomod") for p in passed[func])
    gqa = passed.get("test_gqa_head_mapping", [])
    assert len(gqa) == 2 * dtypes and all("-nomask-" in p for p in gqa), gqa
    for func in ("test_lse_is_natural_log", "test_growing_scores"):
        assert len(passed.get(func, [])) == 4 * dtypes, (func, passed)


def test_dense_only_gqa_fault_is_flagged(suite):
    """A dense-only implementation reading key/value head h % Hkv (not h // (Hq / Hkv)) is
    flagged by the maskless GQA regression and catalogue entry, by those alone: every
    masked or modded form is unsupported for it (and MQA cannot tell the two apart)."""
    spec = "attention_faults:dense_only_gqa_head_modulo"
    run = suite(str(SUITE / "attention"), "-n", "0", "-q", "--no-builtins",
                f"--impl=attention=planted.{spec}", *DENSE_SCOPE)
    assert run.returncode == 1, run.output[-3000:]
    assert "[attention]" in run.stdout and "out within" in run.stdout, run.stdout[-3000:]
    assert "impl=planted.dense_only_gqa_head_modulo" in run.stdout
    failed = _by_test(run)["failed"]
    dtypes = ["float16", "bfloat16", "float32"]
    assert sorted(failed.get("test_gqa_head_mapping", [])) == sorted(
        f"planted.dense_only_gqa_head_modulo-{d}-nomask-gqa4" for d in dtypes), failed
    for func in ("test_forward_catalogue", "test_forward_lse_catalogue",
                 "test_backward_catalogue"):
        assert sorted(failed.get(func, [])) == sorted(
            f"planted.dense_only_gqa_head_modulo-{d}-nomask+nomod" for d in dtypes), failed
    # the head-dim shapes regression runs GQA 2:1 at D = 96, 192 and 192 / 128
    assert sorted(failed.get("test_head_dim_shapes", [])) == sorted(
        f"planted.dense_only_gqa_head_modulo-{d}-{shape}" for d in dtypes
        for shape in ("d96", "d192", "d192v128")), failed
    assert set(failed) == {"test_gqa_head_mapping", "test_forward_catalogue",
                           "test_forward_lse_catalogue", "test_backward_catalogue",
                           "test_head_dim_shapes"}, failed
