"""``--stop-impl-after-failure`` (conformance/run/impl_stop.py): -x for each implementation
alone. A wrong implementation stops at its first failure, its later tests skipped saying why;
another implementation in the same run runs every test; without the option nothing stops."""

from __future__ import annotations

import pytest

from tests.conftest import SUITE

pytestmark = pytest.mark.harness_only  # the run's bookkeeping, not torch's behaviour

ARGS = [str(SUITE / "topk" / "test_topk.py"), "-n", "0", "-q", "-p", "no:randomly",
        "-k", "float32", "--impl=topk=planted.topk_faults:nan_smallest"]


def _outcomes(run, impl: str) -> list[str]:
    return [r["outcome"] for r in run.by_impl()[impl]]


def test_a_failing_implementation_stops_and_the_others_run_on(suite):
    run = suite(*ARGS, "--stop-impl-after-failure")
    assert run.returncode == 1, run.output[-3000:]
    fault = run.by_impl()["planted.nan_smallest"]
    outcomes = [r["outcome"] for r in fault]
    assert outcomes.count("failed") == 1, outcomes
    stopped = [r for r in fault if "--stop-impl-after-failure" in (r["reason"] or "")]
    assert stopped and all(r["outcome"] == "skipped" for r in stopped)
    assert all("planted.nan_smallest failed an earlier test of topk" in r["reason"]
               for r in stopped)
    builtin = _outcomes(run, "torch.topk")
    assert "skipped" not in builtin and "failed" not in builtin and "passed" in builtin
    # without the option the fault fails more than once: the stop is the option's doing
    plain = suite(*ARGS)
    assert _outcomes(plain, "planted.nan_smallest").count("failed") > 1
    assert len(_outcomes(plain, "planted.nan_smallest")) == len(outcomes)
    # a report says it was made so: diff and merge do not take it for a plain run's
    assert run.report["run"]["stop_impl_after_failure"] is True
    assert plain.report["run"]["stop_impl_after_failure"] is False
