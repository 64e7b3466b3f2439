"""Verdicts of the invalid-index cases: run one (in-process or isolated) and require the
properties of an out-of-bounds error (test_indexing.py, test_regressions.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from conformance.compare import exact
from conformance.error_messages import INDEX_MESSAGES, matching

ALLOWED = ("builtins.IndexError", "builtins.RuntimeError")  # AcceleratorError is a RuntimeError


def run_case(request: pytest.FixtureRequest, isolate: bool, fn: Callable[..., dict],
             args: tuple) -> dict[str, Any]:
    """The invalid case's result dict, in a child when the device isolates error cases
    (a crashed child gives {"crashed": explanation}; its outcome is in the notes)."""
    if not isolate:
        return fn(*args)
    isolated = request.getfixturevalue("isolated")
    outcome = isolated(fn, *args, timeout=60)
    if outcome.kind == "returned":
        res = dict(outcome.value)
        res["retired"], res["retire_reason"] = outcome.retired, outcome.retire_reason
        return res
    return {"applies": True, "crashed": isolated.explain(outcome)}


def summary(res: dict[str, Any]) -> dict[str, Any]:
    if "crashed" in res:
        return {"surfaced": "crashed", "detail": res["crashed"].splitlines()[0]}
    return {"surfaced": res["surfaced"], "exc_type": res.get("exc_type"),
            "message": (res.get("message") or "").split("\n")[0][:200],
            "after": res["after"], "guards_changed": len(res["guards"])}


def require_invalid(record, res: dict[str, Any], kind: str, after_error: str) -> None:
    __tracebackhide__ = True
    if "crashed" in res:
        record.require(exact("the case ran to its end (no crash, no hang)", 1, 1,
                             res["crashed"]))
    surfaced = res["surfaced"]
    record.require(exact(
        "error raised no later than the next sync point", int(surfaced == "never"), 1,
        "silent out-of-bounds: no error at the call nor at the synchronisation"
        + (f"; and then: {res['guards'][0]}" if res["guards"] else "")))
    mro = res.get("exc_mro", [])
    record.require(exact("raises IndexError or RuntimeError (AcceleratorError)",
                         int(not any(c in mro for c in ALLOWED)), 1,
                         f"raised {res.get('exc_type')}: {res.get('message', '')[:200]}"))
    message = res.get("message", "")
    record.require(exact("the message names the problem (index / out of bounds / assert)",
                         int(matching(message, INDEX_MESSAGES[kind]) is None), 1,
                         f"message {message[:300]!r} matches no pattern of "
                         f"conformance/error_messages.py for {kind}"))
    record.require(exact("no write outside the destination", len(res["guards"]),
                         max(len(res["guards"]), 1), "; ".join(res["guards"])))
    if after_error == "keeps_working":
        record.require(exact("guards readable after the error (the device keeps working)",
                             int(not res.get("guards_checked", False)), 1,
                             res.get("guards_error", "")))
        record.require(exact("the device keeps working: the next op is correct",
                             int(res["after"] != "correct"), 1,
                             f"after the error the valid case {res['after']}: "
                             f"{res['after_detail']}"))
    else:
        record.require(exact("the device is reported poisoned or still correct, never wrong",
                             int(res["after"] == "wrong"), 1,
                             f"after the error the valid case is wrong: {res['after_detail']}"))
