"""Verdicts of the invalid-index cases: run one (in an isolated child, or in-process with
``--isolation inprocess``) and require the properties of an out-of-bounds error
(test_indexing.py, test_regressions.py).

Hangs have a budget: a case gets ``CASE_TIMEOUT`` seconds (a batch of k cases that plus
2 k; ``FRESH_TIMEOUT`` in a fresh child that compiles), and once an area's cases have hung
for ``HANG_BUDGET`` seconds in this process its later isolated cases are not run (an honest
not-run, never a pass)."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conformance.areas.indexing.memory import read_arena, remove_arena
from conformance.harness.compare import exact
from conformance.harness.error_messages import (
    INDEX_MESSAGES,
    KERNEL_ASSERT_LINE,
    MMU_FAULT,
    matching,
    rocm_abort_line,
)
from conformance.processes.isolate import case_name, foreground_command

ALLOWED = ("builtins.IndexError", "builtins.RuntimeError")  # AcceleratorError is a RuntimeError
POISONED_DTYPES = ("float32", "int64")  # one floating, one integer (one_hot's only dtype)
CASE_TIMEOUT = 30.0  # seconds: a case takes well under one on the CPU, a few on a GPU
FRESH_TIMEOUT = 120.0  # a fresh child that compiles (test_regressions' compiled cases)
HANG_BUDGET = 90.0  # seconds of hung cases per area and process before the rest is not run
_hung: dict[str, float] = {}  # area -> seconds its cases hung in this process


def skip_if_costly(dtype: Any, after_error: str) -> None:
    """Where an error poisons the context (CUDA, ROCm, XPU), every invalid case needs a
    fresh child (a CUDA start-up, seconds): run them in float32 (int64 for one_hot) only."""
    name = str(dtype).removeprefix("torch.")
    if after_error == "poisoned" and name not in POISONED_DTYPES:
        pytest.skip(f"[unsupported] by the suite's time budget: on a device whose context an "
                    f"error poisons, invalid-index cases run in {' / '.join(POISONED_DTYPES)} "
                    f"only (each needs a fresh isolated child)")


def _arena_dir() -> str:
    shm = "/dev/shm"
    return tempfile.mkdtemp(prefix="conformance-arena-",
                            dir=shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None)


def _area(request: pytest.FixtureRequest) -> str:
    area = request.node.get_closest_marker("area")
    return str(area.args[0]) if area and area.args else request.node.nodeid


def _spent(area: str) -> dict[str, Any] | None:
    """The not-run result of a case past its area's hang budget (None: within it)."""
    if _hung.get(area, 0.0) < HANG_BUDGET:
        return None
    return {"applies": True, "not_run": f"area {area}'s hang budget ({HANG_BUDGET:g} s of "
            f"hung cases in this process) is spent; see the earlier hangs"}


def _crashed(outcome: Any, isolated: Any, area: str) -> dict[str, Any]:
    """The result of a case whose child died or hung (a hang counts against the budget)."""
    if outcome.kind == "timeout":
        _hung[area] = _hung.get(area, 0.0) + outcome.seconds
    return {"applies": True, "crashed": isolated.explain(outcome), "death": outcome.kind,
            "signal": outcome.signal, "surfaced": "crashed", "guards": []}


def _finish(res: dict[str, Any], arena: Path | str, outcome: Any, isolated: Any,
            command: str | None) -> dict[str, Any]:
    """The guards as the parent reads them from the case's arena (where the buffers were
    in device memory, the child's own reading), the child's stderr, the foreground
    command."""
    guards, unreadable = read_arena(arena)
    if unreadable and res.get("guards_checked"):  # device memory: the child's reading
        res["guards"] = [*guards, *res["guards"]]
    elif "guards" in res:  # the arena's reading, the parent's own
        res.update(guards=guards, guards_checked=not unreadable,
                   guards_from="arena (read by the parent)",
                   **({"guards_error": unreadable} if unreadable else {}))
    # CPU and CUDA / HIP keep their guards in host pages: readable whatever happened
    res["guards_required"] = isolated.device.split(":")[0] in ("cpu", "cuda")
    res.update(retired=outcome.retired, retire_reason=outcome.retire_reason,
               foreground=command, stderr=outcome.stderr_tail[-3000:])
    return res


def run_case(request: pytest.FixtureRequest, isolate: bool, fn: Callable[..., dict],
             args: tuple, fresh: bool = False) -> dict[str, Any]:
    """The invalid case's result dict, in a child when the device isolates error cases.
    The case's buffers live in an arena this process owns: the guards are read here,
    whatever became of the child (``guards_from``). A crashed or hung child gives
    ``{"crashed": explanation, "death": kind}``; a case past the area's hang budget
    ``{"not_run": why}``."""
    if not isolate:
        return fn(*args)
    area = _area(request)
    if (spent := _spent(area)) is not None:
        return spent
    isolated = request.getfixturevalue("isolated")
    env = {"CONFORMANCE_FRESH_CHILD": request.node.nodeid} if fresh else None
    arena = _arena_dir()
    try:
        outcome = isolated(fn, *args, arena=arena, hide=("arena",),
                           timeout=FRESH_TIMEOUT if fresh else CASE_TIMEOUT, env=env)
        res = dict(outcome.value) if outcome.kind == "returned" else \
            _crashed(outcome, isolated, area)
        command = foreground_command(fn, args, {}, isolated.device,
                                     {**isolated.env, **(env or {})})
        return _finish(res, arena, outcome, isolated, command)
    finally:
        remove_arena(arena)


def run_cases(request: pytest.FixtureRequest, isolate: bool, after_error: str,
              fn: Callable[..., dict], cases: list[tuple]) -> list[dict[str, Any]]:
    """``run_case`` for each of ``cases`` in order, ending at the first crash or hang (the
    cases after it are not in the list). Where an error leaves the device working, the
    cases go to the child as one batch (``checks.invalid_batch``: one round trip, each
    case's result and guards in its own arena folder, read here even after a crash)."""
    out: list[dict[str, Any]] = []
    if not isolate or after_error != "keeps_working":
        for args in cases:
            out.append(run_case(request, isolate, fn, args))
            if "crashed" in out[-1] or "not_run" in out[-1]:
                break
        return out
    area = _area(request)
    if (spent := _spent(area)) is not None:
        return [spent]
    from conformance.areas.indexing.checks import invalid_batch

    isolated = request.getfixturevalue("isolated")
    arena = _arena_dir()
    try:
        outcome = isolated(invalid_batch, case_name(fn), cases, arena=arena,
                           timeout=CASE_TIMEOUT + 2.0 * len(cases), hide=("arena",))
        for i, args in enumerate(cases):
            folder = Path(arena, str(i))
            result = folder / "result.json"
            if result.is_file():
                res = json.loads(result.read_text())
            elif folder.is_dir() and outcome.kind != "returned":  # the case it died in
                res = _crashed(outcome, isolated, area)
            else:
                break
            command = foreground_command(fn, args, {}, isolated.device, isolated.env)
            out.append(_finish(res, folder, outcome, isolated, command))
            if "crashed" in res:
                break
        if outcome.kind == "raised":  # the batch itself failed: a bug of the suite
            raise RuntimeError(f"the invalid-case batch raised: {outcome.describe()}\n"
                               f"{outcome.traceback}")
    finally:
        remove_arena(arena, recursive=True)
    return out


def summary(res: dict[str, Any]) -> dict[str, Any]:
    if "crashed" in res:
        return {"surfaced": "crashed", "detail": res["crashed"].splitlines()[0],
                "guards_changed": len(res.get("guards", []))}
    return {"surfaced": res["surfaced"], "exc_type": res.get("exc_type"),
            "message": (res.get("message") or "").split("\n")[0][:200],
            "after": res["after"], "guards_changed": len(res["guards"]),
            **({"returned": res["returned"]} if res.get("returned") else {})}


def _rocm_abort(res: dict[str, Any], device_key: str) -> str:
    """The stderr line of a ROCm process a kernel assert aborted ("" if it was not one):
    the device's way of reporting the assert, not a crash of the case."""
    return rocm_abort_line(device_key == "rocm" and res.get("death") in ("signal", "exited"),
                           res.get("stderr", ""))


def require_invalid(record, res: dict[str, Any], kind: str, after_error: str) -> None:
    """The properties of an out-of-bounds error (see test_indexing's docstring); a failure
    of an isolated case also says how to rerun it in the foreground. ``kind``: the
    device's matrix key."""
    __tracebackhide__ = True
    hint = f"; rerun in the foreground: {res['foreground']}" if res.get("foreground") else ""

    def check(name: str, bad: int, detail: str) -> None:
        __tracebackhide__ = True
        record.require(exact(name, bad, max(bad, 1), detail + hint if bad else ""))

    abort = _rocm_abort(res, kind)
    if abort:  # reported by ending the process: the message is its stderr line
        res = {**res, "surfaced": "abort", "exc_mro": list(ALLOWED), "message": abort,
               "after": "poisoned", "after_detail": ""}
    elif "crashed" in res:  # the writes first: they say more than the crash
        died = res["crashed"].splitlines()[0]
        check("no write outside the destination", len(res["guards"]),
              f"before the case ended ({died}): " + "; ".join(res["guards"]))
        check("the case ran to its end (no crash, no hang)", 1, res["crashed"])
        return
    surfaced = res["surfaced"]
    came_back = f"; it returned {res['returned']}" if res.get("returned") else ""
    check("error raised no later than the next sync point", int(surfaced == "never"),
          "silent out-of-bounds: no error at the call nor at the synchronisation"
          + came_back + (f"; and then: {res['guards'][0]}" if res["guards"] else ""))
    mro = res.get("exc_mro", [])
    check("raises IndexError or RuntimeError (AcceleratorError)",
          int(not any(c in mro for c in ALLOWED)),
          f"raised {res.get('exc_type')}: {res.get('message', '')[:200]}")
    message = res.get("message", "")
    mmu = matching(message, MMU_FAULT) or matching(res.get("stderr", ""), MMU_FAULT)
    check("the index was checked (no MMU fault: not an unchecked access)", int(bool(mmu)),
          f"unchecked access: the kernel read or wrote outside the tensor and the memory "
          f"system stopped it ({mmu}); message {message[:200]!r}")
    check("the message names the problem (index / out of bounds / assert)",
          int(matching(message, INDEX_MESSAGES[kind]) is None),
          f"message {message[:300]!r} matches no pattern of conformance/harness/error_messages.py "
          f"for {kind}")
    if kind in ("cuda", "rocm") and re.search(r"device-side assert", message, re.I) \
            and "stderr" in res:
        check("the kernel's assert line is on stderr",
              int(re.search(KERNEL_ASSERT_LINE, res["stderr"]) is None),
              "a device-side assert was reported but no 'Assertion ... failed' line reached "
              "the child's stderr")
    check("no write outside the destination", len(res["guards"]), "; ".join(res["guards"]))
    if not res.get("guards_checked", False) and res.get("guards_required"):
        check("guards readable after the error", 1, res.get("guards_error", ""))
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
