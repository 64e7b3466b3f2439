"""Running a collective case on a rank pool and checking every rank against the oracle.

Check names (one per kind, evaluated on every rank and output; the report keeps the worst):
"every rank returned", "the ranks stay in step", "output structure", "output dtype",
"forward", "output requires grad", "backward runs", "gradient", and for min / max / product
(no gradient in torch 2.11)
"non-linear reduction: backward raises a clear error or is correct" (a clear error passes;
gradients, where returned, must be the oracle's).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from conformance.areas.collectives.catalogue import Case, bound
from conformance.harness.compare import elementwise_bound, exact
from conformance.harness.outcomes import missing as skip_missing
from conformance.harness.outcomes import unsupported
from conformance.processes.backends import missing
from conformance.processes.current_rank import COLD_ENV
from conformance.processes.ranks import RanksOutcome, close_pool, run_ranks
from oracles.collectives import U64

EAGER = "conformance.areas.collectives.cases:eager"
CASE_TIMEOUT = 10.0  # seconds: a hung collective fails its test after this (cases take ms)
NON_LINEAR = ("min", "max", "product")
CLEAR = "non-linear reduction: backward raises a clear error or is correct"
LIST = "the input list is left as given"  # coalesced ops: no tensor of it replaced
# every rank issued as many collectives on the group as the others: a call that makes one
# rank run a collective the others skip (e.g. after an error on some ranks only) leaves
# the group's next collective pairing different calls, a hang (torch 2.15, issue 64)
IN_STEP = "the ranks stay in step"


def run(request: pytest.FixtureRequest, fn: str, *args: Any, timeout: float = CASE_TIMEOUT,
        lockstep: bool = False, env: dict[str, str] | None = None,
        cold: bool = False) -> RanksOutcome:
    """Run a case function on the pool of the test's (backend, world) and ``env`` (a pool
    per environment); notes the pool. ``lockstep``: see ``RankPool.run``. ``cold``: on a
    pool of its own whose ranks made no collective before (no warm-up,
    ``current_rank.warm_up``), stopped after the case: the case is its processes' first
    collective."""
    callspec = request.node.callspec.params
    device = request.getfixturevalue("device")
    if cold:
        env = {**(env or {}), COLD_ENV: "1"}
    try:
        outcome = run_ranks(fn, *args, backend=callspec["backend"], device=str(device),
                            world=callspec["world"], timeout=timeout, lockstep=lockstep,
                            env=env or None)
    finally:
        if cold:
            close_pool(callspec["backend"], str(device), callspec["world"], env)
    rec = request.getfixturevalue("record")
    if outcome.info.get("blocked"):  # a torchrun job waiting for a stalled rank
        from conformance.harness.outcomes import not_run

        not_run(f"blocked: {outcome.info['blocked']}")
    if outcome.info.get("rebuilt"):
        rec.note(group_rebuilt=True)
    warmed = outcome.info.get("warm_up")
    if warmed not in (None, "done"):  # skipped (a cold pool) or why the warm-up failed
        rec.note(warm_up=warmed)
    rec.note(backend=outcome.backend, backend_version=outcome.info.get("backend_version", ""),
             world=outcome.world, pool_start_seconds=outcome.info.get("start_seconds"))
    if outcome.restarted:
        rec.note(pool_restarted=outcome.restarted)
    return outcome


def applies(impl: Any, backend: str, world: int, device: Any, reduce_op: str = "none") -> None:
    """Skip what this host cannot run; unsupported where the implementation does not
    declare the reduction."""
    why = missing(backend, world, device.type)
    if why:
        skip_missing(why)
    if reduce_op != "none" and not impl.caps.claims(f"op.{reduce_op}"):
        unsupported(f"implementation {impl.name} does not declare op.{reduce_op}")


def require_returned(record: Any, outcome: RanksOutcome) -> list[dict[str, Any]]:
    """Every rank's result, or a failed check with every rank's state."""
    __tracebackhide__ = True
    bad = sum(o.kind != "returned" for o in outcome.outcomes)
    record.require(exact("every rank returned", bad, outcome.world,
                         "\n" + outcome.describe() if bad else ""))
    record.require(exact(IN_STEP, int(bool(outcome.out_of_step)), 1,
                         "\n" + outcome.describe() if outcome.out_of_step else ""))
    return outcome.values


def _clear_error(err: dict[str, str] | None, reduce_op: str) -> bool:
    if err is None:
        return False
    text = err["message"].lower()
    return reduce_op in text or "support" in text or "not implemented" in text


def check_case(record: Any, case: Case, results: list[dict[str, Any]],
               backward: bool = True, names: list[str] | None = None) -> None:
    """Forward of every rank within the bound of the oracle; then, for a linear collective,
    every rank's gradient of Σ_r ⟨g_r, y_r⟩ (random g_r) within the adjoint's bound; a
    non-linear reduction may raise a clear error at backward time instead. ``names``: how
    the messages name each result's rank (default "rank r")."""
    __tracebackhide__ = True
    names = names or [f"rank {r}" for r in range(len(results))]
    expected = case.forward(case.inputs)
    fwd_bound = bound(case, case.inputs, "forward")
    for r, res in enumerate(results):
        ys = [np.asarray(y, dtype=np.float64) for y in res["y"]]
        shapes = [tuple(y.shape) for y in ys]
        want = [tuple(e.shape) for e in expected[r]]
        record.require(exact("output structure", int(shapes != want), 1,
                             f"{names[r]}: outputs {shapes}, expected {want}"))
        wrong = [d for d in res["y_dtype"] if d != case.dtype]
        record.require(exact("output dtype", len(wrong), len(ys),
                             f"{names[r]}: {res['y_dtype']} for {case.dtype} inputs"))
        for i, (y, e, b) in enumerate(zip(ys, expected[r], fwd_bound[r], strict=True)):
            m = elementwise_bound("forward", y, e, b + U64 * np.abs(e))
            record.require(_at(m, names[r], i, len(ys)))
    if backward:
        _check_backward(record, case, results, names)
    for r, res in enumerate(results):  # last: a replaced input is a side effect
        changed = res.get("list_changed", [])
        record.require(exact(LIST, len(changed), len(res["y"]),
                             f"{names[r]}: the implementation replaced the tensors at "
                             f"{changed} of the list it was given"))


def _check_backward(record: Any, case: Case, results: list[dict[str, Any]],
                    names: list[str]) -> None:
    __tracebackhide__ = True
    if case.reduce_op in NON_LINEAR:  # torch 2.11 defines no gradient for these
        errors = [res["backward_error"] for res in results]
        if all(_clear_error(e, case.reduce_op) for e in errors):
            record.require(exact(CLEAR, 0, len(results)))
            return
        if any(e is not None for e in errors):
            detail = "; ".join(
                f"{names[r]}: " + (f"{e['type']}: {e['message']}" if e else
                                 "returned a gradient the oracle does not define")
                for r, e in enumerate(errors) if not _clear_error(e, case.reduce_op))
            record.require(exact(CLEAR, len(results), len(results), detail))
        # gradients returned: they must be the oracle's (checked below)
    for r, res in enumerate(results):
        no_grad = [i for i, flag in enumerate(res["requires_grad"]) if not flag]
        record.require(exact("output requires grad", len(no_grad), len(res["requires_grad"]),
                             f"{names[r]}: outputs {no_grad} are detached from autograd"))
    errors = [(r, res["backward_error"]) for r, res in enumerate(results)
              if res["backward_error"]]
    record.require(exact("backward runs", len(errors), len(results), "; ".join(
        f"{names[r]}: {e['type']}: {e['message']}" for r, e in errors)))
    adjoint = case.adjoint(case.inputs, case.cotangents)
    adj_bound = bound(case, case.cotangents, "adjoint")
    for r, res in enumerate(results):
        grads = res["grad"]
        for i, (e, b) in enumerate(zip(adjoint[r], adj_bound[r], strict=True)):
            g = np.asarray(grads[i], np.float64) if grads[i] is not None else np.zeros_like(e)
            m = elementwise_bound("gradient", g, e, b + U64 * np.abs(e))
            record.require(_at(m, names[r], i, len(adjoint[r])))


def _at(m: Any, name: str, index: int, count: int) -> Any:
    where = name + (f", tensor {index}" if count > 1 else "")
    return type(m)(m.name, m.measured, m.bound, f"{where}: {m.detail}", m.exact)
