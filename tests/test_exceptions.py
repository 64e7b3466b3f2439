"""An exception raised by the implementation under test is a failed check with the uniform
block (area, implementation, device, dtype, case, reproduce) and the traceback's tail; an
exception of the suite itself says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SUITE

pytestmark = pytest.mark.harness_only  # no torch behaviour: newest torch only in CI

DEMO = Path(__file__).parent / "demo"


def test_implementation_and_suite_exceptions_are_told_apart(suite):
    run = suite(str(DEMO / "demo_errors.py"), "--device=cpu", "-n", "0", "--no-builtins",
                f"--device-matrix={DEMO / 'demo_matrix.yaml'}",
                "--impl=demo=demo.demo_impls:raising")
    assert run.returncode == 1, run.output
    reasons = {r["nodeid"].split("::")[1].split("[")[0]: r["reason"]
               for r in run.report["results"] if r["outcome"] == "failed"}
    assert reasons == {
        "test_forward_raises": "implementation raised TypeError: planted: unsupported "
                               "operand layout",
        "test_backward_raises": "implementation raised ValueError: planted: backward not "
                                "implemented for strided grads",
        "test_suite_bug": "error in the suite itself (a bug in a check, an oracle or a case "
                          "builder, not in the implementation): raised KeyError: 'missing'",
    }
    out = run.stdout
    assert "[demo] implementation raised TypeError: planted: unsupported operand layout\n" \
           "  impl=demo.raising device=cpu dtype=float32\n" \
           "  case: shape=[3], mode=forward\n" \
           "  reproduce: PYTHONPATH=" in out, out[-4000:]
    assert "--impl=demo=demo.demo_impls:raising" in out
    assert "demo_impls.py" in out  # the traceback's tail is kept below the block


def test_planted_topk_exception_is_reported_with_its_case(suite):
    run = suite(str(SUITE / "topk" / "test_topk.py"), "--device=cpu", "-n", "0",
                "--no-builtins", "--impl=topk=planted.topk_faults:crashes_on_nan",
                "-k", "test_special_values and float32 and nan_first_last")
    assert run.returncode == 1, run.output[-3000:]
    (failed,) = [r for r in run.report["results"] if r["outcome"] == "failed"]
    assert failed["reason"] == ("implementation raised RuntimeError: planted: selection "
                                "kernel aborted on a NaN input")
    assert "[topk] implementation raised RuntimeError" in run.stdout
    assert "  case: input=shape=(2, 4)" in run.stdout, run.stdout[-3000:]
    assert (f" pytest '{(SUITE / 'topk' / 'test_topk.py').resolve()}::test_special_values["
            in run.stdout)
