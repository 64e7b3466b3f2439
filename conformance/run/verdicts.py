"""A test's verdict beyond pytest's: an expected failure for the wrong reason, an exception
explained (the implementation's or the suite's), a pass past a matrix entry's measured
releases ("fixed in X?") or in a build without the bug ("bug not present in this build");
and the user properties the report is built from."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from conformance.harness.expectations import observe, wrong_reason
from conformance.harness.registry import Impl
from conformance.harness.versions import narrowed
from conformance.report.collect import META_KEY, REASON_KEY, RECORD_KEY
from conformance.run.failures import classify_exception, context_block, tail
from conformance.run.keys import ITEM_EXPECT, ITEM_META, ITEM_PASS_NOTES, ITEM_RECORD


def _wrong_reason(item: pytest.Item, call: pytest.CallInfo,
                  report: pytest.TestReport) -> str | None:
    """For an xfail that failed in another way than its matrix entry states: the verdict
    (the report becomes a failure); else None."""
    expected = item.stash.get(ITEM_EXPECT, None)
    if not expected or report.when != "call" or call.excinfo is None:
        return None
    if not (report.skipped and hasattr(report, "wasxfail")):
        return None
    verdict = wrong_reason(expected, observe(call.excinfo.value))
    if verdict is not None:
        report.outcome = "failed"
        del report.wasxfail
    return verdict


def explain_failure(item: pytest.Item, call: pytest.CallInfo,
                     report: pytest.TestReport) -> None:
    """A wrong-reason expected failure is a failure headed by its verdict; an exception
    (not a failed check) gets the uniform block: raised by the implementation, or an error
    of the suite itself. The one-line reason goes to the report."""
    wrong = _wrong_reason(item, call, report)
    if report.when != "call" or not report.failed or call.excinfo is None:
        return
    impl = item.callspec.params.get("impl") if hasattr(item, "callspec") else None
    verdict = classify_exception(call.excinfo.value, impl if isinstance(impl, Impl) else None,
                                 wrong)
    original = report.longreprtext
    if verdict is not None:
        rec = item.stash.get(ITEM_RECORD, None)
        block = context_block(verdict, rec, item.stash[ITEM_META])
        if rec is not None and rec.failure is None:  # an exception: replay the call
            rec.write_repro(block, None)
            if rec.repro_script:
                block += f"\n  standalone reproducer: {rec.repro_script}"
        report.longrepr = f"{block}\n\n{tail(original)}"
    elif wrong is not None:  # a failed check, but not the one the entry expects
        verdict, report.longrepr = wrong, f"{wrong}\n\n{original}"
    if verdict is not None:
        report.user_properties.append((REASON_KEY, verdict))


def fixed_in_note(rule: Any, dist: str, installed: str, newest: str) -> str:
    """The verdict of a pass under an expected failure measured on older releases only."""
    release = installed.split("+")[0]
    gate = narrowed(rule.versions, dist, release, newest)
    return (f"fixed in {dist} {release}? matrix {rule.label}: measured failing on {dist} up to "
            f"{newest}; narrow its versions to {dist}{gate}")


def not_present_note(rule: Any) -> str:
    """The verdict of a pass under a strict expected failure within its measured releases,
    where stale entries are reported (--stale-entries=report): the build does not have the
    bug the entry records."""
    return (f"bug not present in this build: matrix {rule.label} expects a failure here "
            f"({rule.link})")


def fixed_in(item: pytest.Item, report: pytest.TestReport) -> None:
    """A strict expected failure that passes on a release newer than those its entry was
    measured on or in a build without the bug (--stale-entries=report), or a test under
    non-strict entries only (a failure is allowed, not expected) that passes: a pass (the
    check ran and held), the entry named in its reason."""
    notes = item.stash.get(ITEM_PASS_NOTES, None)
    if not notes or report.when != "call" or not report.passed:
        return
    if not hasattr(report, "wasxfail"):
        return
    del report.wasxfail
    report.user_properties.append((REASON_KEY, "; ".join(notes)))


def annotate(item: pytest.Item, call: pytest.CallInfo, report: pytest.TestReport) -> None:
    """A test's report as the controller needs it: its verdict (explained, or "fixed in
    X?"), its metadata, its worker and its record, as user properties."""
    meta = item.stash.get(ITEM_META, None)
    if meta is None:
        return
    explain_failure(item, call, report)
    fixed_in(item, report)
    report.user_properties.append((META_KEY, json.dumps(meta, default=str)))
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        report.user_properties.append(("conformance_worker", worker))
    rec = item.stash.get(ITEM_RECORD, None)
    if rec is not None and report.when == "call":
        report.user_properties.append((RECORD_KEY, json.dumps(rec.to_json(), default=str)))
