"""Failures grouped for triage (conformance/report/triage.py) and a terminal that stays
short: a run with ~100 failures prints its groups in at most ~40 lines, no per-failure
tracebacks, and exits without triton's leak report; a usage error is one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conformance.report import triage
from conformance.run.terminal import fold_areas
from tests.conftest import SUITE

pytestmark = pytest.mark.harness_only  # the harness's output: newest torch only in CI


def _result(area: str, func: str, impl: str, dtype: str, i: int) -> dict:
    return {"nodeid": f"conformance/areas/{area}/test_{area}.py::{func}[{impl}-{dtype}-{i}]",
            "area": area, "impl": impl, "dtype": dtype, "outcome": "failed",
            "reason": f"[{area}] error {i} exceeds bound", "reproduce": f"pytest x{i}"}


def test_groups_by_area_check_and_implementation():
    results = [_result("topk", "test_values", "vendor.topk", d, i)
               for i in range(30) for d in ("float16", "bfloat16")]
    results += [_result("gemm", "test_awkward", "vendor.mm", "float32", i) for i in range(40)]
    results += [{**_result("topk", "test_values", "torch.topk", "float32", 0), "outcome": "passed"},
                {**_result("topk", "test_nan", "vendor.topk", "float64", 1), "outcome": "crashed"}]
    groups = triage.group_failures(results)
    assert [(g.area, g.check, g.impl, g.count) for g in groups] == [
        ("topk", "test_topk.py::test_values", "vendor.topk", 60),
        ("gemm", "test_gemm.py::test_awkward", "vendor.mm", 40),
        ("topk", "test_topk.py::test_nan", "vendor.topk", 1)]
    assert groups[0].dtypes == {"float16": 30, "bfloat16": 30}
    assert groups[0].first is results[0] and groups[2].outcomes == {"crashed": 1}
    assert list(triage.by_area(groups)) == ["topk", "gemm"]
    assert len({g.slug for g in groups}) == 3


def test_terminal_lines_stay_short_at_any_failure_count():
    results = [_result(f"area{a}", f"test_{c}", "impl", "float32", i)
               for a in range(5) for c in range(6) for i in range(7)]  # 210 in 30 groups
    lines = triage.terminal_lines(triage.group_failures(results), "DIR/report.html")
    assert len(lines) <= 40, "\n".join(lines)
    assert "210 failures in 30 groups" in lines[0]
    assert "22 more groups (154 failures): DIR/report.html" in lines[-1]


def test_areas_without_implementations_fold_into_families():
    assert fold_areas(["gemm", "indexing.take", "indexing.gather", "special.erfcx"]) == \
        "gemm, indexing.* (2), special.erfcx"


def test_many_failures_print_a_grouped_summary(suite):
    """A planted TopK fault failing 68 tests: the grouped summary replaces pytest's
    per-failure sections; --tb=short brings them back."""
    args = [str(SUITE / "topk"), "-n", "0", "--no-builtins",
            "--impl=topk=planted.topk_faults:nan_smallest",
            "-k", "special_values or rocm_smem_boundaries"]
    run = suite(*args)
    assert run.returncode == 1, run.output[-3000:]
    failed = run.report["summary"]["failed"]
    assert failed >= 60, run.report["summary"]
    out = run.stdout
    section = out[out.index("= torch-conformance ="):]
    assert len(section.splitlines()) <= 40, section
    assert f"{failed} failures in 2 groups" in section, section
    assert "[topk] test_topk.py::test_special_values  impl=planted.nan_smallest" in section
    assert "reproduce: " in section and "--impl=topk=planted.topk_faults:nan_smallest" in section
    assert "FAILED " not in out and "Traceback" not in out and "_ _ _" not in out
    assert len(out.splitlines()) <= 60, out
    assert "nanobind" not in run.stderr, run.stderr[-2000:]
    summary = (run.report_dir / "summary.md").read_text()
    assert "| area | check | implementation | failures | dtypes |" in summary
    assert "more in this group</summary>" in summary
    verbose = suite(*args, "--tb=line", report=False)
    assert verbose.stdout.count("CheckFailure") + verbose.stdout.count("FAILED ") >= failed


def test_usage_error_is_one_line():
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "--device=bogus", str(SUITE / "topk")], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 4
    lines = [li for li in (proc.stdout + proc.stderr).splitlines() if li.strip()]
    assert lines == ["ERROR: --device: unknown device 'bogus' (expected one of: auto, cpu, "
                     "cuda, mps, xpu)"] or (len(lines) == 1 and "--device" in lines[0]), lines


def test_gpu_identity_line():
    from conformance.report.tables import gpu_identity

    assert gpu_identity({"torch_device": "cpu", "name": "x"}) is None
    line = gpu_identity({"index": 1, "uuid": "GPU-1f2e", "pci_bus_id": "0000:18:00.0",
                         "driver_version": "580.65", "vbios_version": None,
                         "identity_unknown": {"vbios_version": "nvidia-smi: not found"}})
    assert line == ("index 1, UUID GPU-1f2e, PCI 0000:18:00.0, driver 580.65, VBIOS ?, "
                    "unread: vbios_version: nvidia-smi: not found")


def test_the_suites_own_warnings_are_told_apart():
    import numpy

    import conformance.areas.special.erfcx_checks as checks
    from conformance.run.accounting import _suite_file

    assert _suite_file(checks.__file__)
    assert not _suite_file(numpy.__file__) and not _suite_file(__file__)


def test_one_reason_across_groups_is_said_once():
    results = [{**_result(f"area{a}", f"test_{c}", "impl", "float32", i),
                "reason": "setup: RuntimeError: over budget"}
               for a in range(3) for c in range(4) for i in range(5)]
    lines = triage.terminal_lines(triage.group_failures(results), None)
    assert lines[1] == "  60 of them in 12 groups give one reason: setup: RuntimeError: over budget"
    assert triage.shared_reason(triage.group_failures(results[:10]))[0] is None  # 2 groups


def test_more_implementations_line_counts_only_real_failures():
    """Past ROWS_SHOWN rows, the '... N more' line says how many of those have failures
    (plugged-in implementations are shown even when all passed)."""
    from conformance.harness.outcomes import OUTCOMES
    from conformance.run.terminal import ROWS_SHOWN, implementation_lines

    def row(failed: int) -> dict:
        r = {o: 0 for o in OUTCOMES} | {"ran": 3, "passed": 3 - failed, "failed": failed,
                                        "worst_margin": 0.5, "not_run": {}}
        return r

    impls = {f"user.ok{i}": row(0) for i in range(ROWS_SHOWN + 3)}
    lines = implementation_lines({"demo": impls}, plugged=set(impls))
    assert lines[-1] == ("  ... 3 more implementations (0 with failures or tests not run; "
                         "summary.md, report.html)"), lines[-1]
    impls["user.bad"] = row(1)
    lines = implementation_lines({"demo": impls}, plugged=set(impls))
    assert "failed   1" in lines[0] and "(0 with failures" in lines[-1]
