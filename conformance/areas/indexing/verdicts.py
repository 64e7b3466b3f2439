"""Verdicts of the invalid-index cases: run one (in-process or isolated) and require the
properties of an out-of-bounds error (test_indexing.py, test_regressions.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from conformance.harness.compare import exact
from conformance.harness.error_messages import INDEX_MESSAGES, matching

ALLOWED = ("builtins.IndexError", "builtins.RuntimeError")  # AcceleratorError is a RuntimeError


POISONED_DTYPES = ("float32", "int64")  # one floating, one integer (one_hot's only dtype)


def skip_if_costly(dtype: Any, after_error: str) -> None:
    """Where an error poisons the context (CUDA, ROCm, XPU), every invalid case needs a
    fresh child (a CUDA start-up, seconds): run them in float32 (int64 for one_hot) only."""
    name = str(dtype).removeprefix("torch.")
    if after_error == "poisoned" and name not in POISONED_DTYPES:
        pytest.skip(f"[unsupported] by the suite's time budget: on a device whose context an "
                    f"error poisons, invalid-index cases run in {' / '.join(POISONED_DTYPES)} "
                    f"only (each needs a fresh isolated child)")


def run_case(request: pytest.FixtureRequest, isolate: bool, fn: Callable[..., dict],
             args: tuple, fresh: bool = False) -> dict[str, Any]:
    """The invalid case's result dict, in a child when the device isolates error cases
    (a crashed child gives {"crashed": explanation}; its outcome is in the notes);
    ``fresh``: in a child of its own (a new environment key: no state from earlier cases)."""
    if not isolate:
        return fn(*args)
    isolated = request.getfixturevalue("isolated")
    env = {"CONFORMANCE_FRESH_CHILD": request.node.nodeid} if fresh else None
    outcome = isolated(fn, *args, timeout=120, env=env)
    if outcome.kind == "returned":
        res = dict(outcome.value)
        res["retired"], res["retire_reason"] = outcome.retired, outcome.retire_reason
        res["foreground"] = isolated.command(outcome)
        return res
    return {"applies": True, "crashed": isolated.explain(outcome)}


def summary(res: dict[str, Any]) -> dict[str, Any]:
    if "crashed" in res:
        return {"surfaced": "crashed", "detail": res["crashed"].splitlines()[0]}
    return {"surfaced": res["surfaced"], "exc_type": res.get("exc_type"),
            "message": (res.get("message") or "").split("\n")[0][:200],
            "after": res["after"], "guards_changed": len(res["guards"])}


def require_invalid(record, res: dict[str, Any], kind: str, after_error: str) -> None:
    """The properties of an out-of-bounds error (see test_indexing's docstring); a failure
    of an isolated case also says how to rerun it in the foreground."""
    __tracebackhide__ = True
    hint = f"; rerun in the foreground: {res['foreground']}" if res.get("foreground") else ""

    def check(name: str, bad: int, detail: str) -> None:
        __tracebackhide__ = True
        record.require(exact(name, bad, max(bad, 1), detail + hint if bad else ""))

    if "crashed" in res:
        check("the case ran to its end (no crash, no hang)", 1, res["crashed"])
    surfaced = res["surfaced"]
    check("error raised no later than the next sync point", int(surfaced == "never"),
          "silent out-of-bounds: no error at the call nor at the synchronisation"
          + (f"; and then: {res['guards'][0]}" if res["guards"] else ""))
    mro = res.get("exc_mro", [])
    check("raises IndexError or RuntimeError (AcceleratorError)",
          int(not any(c in mro for c in ALLOWED)),
          f"raised {res.get('exc_type')}: {res.get('message', '')[:200]}")
    message = res.get("message", "")
    check("the message names the problem (index / out of bounds / assert)",
          int(matching(message, INDEX_MESSAGES[kind]) is None),
          f"message {message[:300]!r} matches no pattern of conformance/harness/error_messages.py "
          f"for {kind}")
    check("no write outside the destination", len(res["guards"]), "; ".join(res["guards"]))
    if after_error == "keeps_working":
        check("guards readable after the error (the device keeps working)",
              int(not res.get("guards_checked", False)), res.get("guards_error", ""))
        check("the device keeps working: the next op is correct",
              int(res["after"] != "correct"),
              f"after the error the valid case {res['after']}: {res['after_detail']}")
    else:
        check("the device is reported poisoned or still correct, never wrong",
              int(res["after"] == "wrong"),
              f"after the error the valid case is wrong: {res['after_detail']}")
