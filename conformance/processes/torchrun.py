"""The rank cases on a torchrun job's own processes instead of a local pool: rank 0 runs
pytest (the usual session, report and all) and posts each case to every rank through the
job's store; the other ranks serve cases until rank 0 posts "exit".

``torchrun --nnodes N --nproc-per-node G -m conformance.areas.collectives [pytest args]`` (see
``conformance/areas/collectives/__main__.py``). The tests then run at the job's world size only
(backend and world in their ids, as usual).

No collective carries the control traffic, so a stalled rank cannot stall it: case n is
the store key ``case/n``; each rank writes a heartbeat (``hb/<rank>``: the case it is in and
whether it finished it) and its reply (``reply/n/<rank>``); rank 0 runs its own share in a
thread and waits for every reply until the case's timeout. A rank without a reply by then
is named as stalled (its heartbeat says whether it is still in the case or never started
it); the job is then *blocked*: the next case waits (once) until every rank is back (its
collective timed out: ``--timeout`` and HEAL_SLACK), every rank joins a fresh process group
for the cases ("rebuild", the old one abandoned) and the case runs on it; while a rank is
still away the cases are not run ("blocked": never a pass or a failure). A rank that
crashes ends the job (torchrun's rule).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import pickle
import threading
import time
from typing import Any

from conformance.processes._case import case_name, run_case
from conformance.processes.isolate import Outcome, _reply_outcome

ENV = "CONFORMANCE_TORCHRUN"  # set on rank 0's pytest: "BACKEND,WORLD"
PREFIX = "conformance/"
PROBE_TIMEOUT = 5.0  # seconds for the probe collective after a failed case
POLL = 0.02  # seconds between rank 0's looks at the store
LEAVE_TIMEOUT = 10.0  # seconds rank 0 waits for the others to leave at the end
BEAT = 1.0  # seconds between a rank's heartbeats while it runs a case
HEAL_SLACK = 10.0  # seconds past --timeout the first case after a stall waits for the ranks
_STATE: dict[str, Any] = {}


def active() -> tuple[str, int] | None:
    """(backend, world) when this process is rank 0 of a torchrun job running pytest."""
    value = os.environ.get(ENV, "")
    if not value:
        return None
    backend, world = value.split(",")
    return backend, int(world)


def init(backend: str, device: str, timeout_s: float) -> tuple[int, int]:
    """Join the job's process group (env:// from torchrun); the cases run on it until a
    rebuild replaces it."""
    import torch
    import torch.distributed as dist

    from conformance.processes.current_rank import adopt_group

    local = int(os.environ.get("LOCAL_RANK", "0"))
    kind = device.split(":")[0]
    own = kind if kind == "cpu" else f"{kind}:{local}"
    if kind != "cpu":
        getattr(torch, kind).set_device(local)
    kwargs: dict[str, Any] = {}
    if backend in ("nccl", "xccl"):
        kwargs["device_id"] = torch.device(own)
    dist.init_process_group(backend, timeout=datetime.timedelta(seconds=timeout_s), **kwargs)
    adopt_group(backend, own)
    _STATE.update(backend=backend, timeout=timeout_s, n=0, blocked=None, thread=None,
                  store=dist.distributed_c10d._get_default_store(), current=(-1, "idle"),
                  case_thread=threading.get_ident(), rank=dist.get_rank())
    threading.Thread(target=_heartbeats, name="conformance-heartbeat", daemon=True).start()
    return dist.get_rank(), dist.get_world_size()


def _heartbeats() -> None:
    """Every BEAT seconds: this rank's case, phase and where its case thread is."""
    while True:
        time.sleep(BEAT)
        n, phase = _STATE.get("current", (-1, "idle"))
        if phase == "running":
            with contextlib.suppress(Exception):  # the store is gone: the job is ending
                _set(f"hb/{_STATE['rank']}", (n, phase, _STATE["since"], _where()))


def _where() -> str:
    """The innermost frame of the case thread outside this package's plumbing, and
    whether it is inside torch.distributed (waiting in a collective) or not."""
    import sys
    import traceback

    frame = sys._current_frames().get(_STATE.get("case_thread", 0))
    if frame is None:
        return ""
    stack = traceback.extract_stack(frame)
    inside = any("torch/distributed" in f.filename.replace(os.sep, "/") for f in stack[-6:])
    own = [f for f in stack if "/conformance/processes/" not in f.filename.replace(os.sep, "/")
           and "/torch/" not in f.filename.replace(os.sep, "/")]
    top = own[-1] if own else stack[-1]
    place = f"{os.path.basename(top.filename)}:{top.lineno} in {top.name}"
    return f"{place}, waiting in a collective" if inside else \
        f"{place}, outside torch.distributed (not in a collective: the likely cause)"


def _store() -> Any:
    return _STATE["store"]


def _get(key: str) -> Any:
    return pickle.loads(_store().get(PREFIX + key))


def _set(key: str, value: Any) -> None:
    _store().set(PREFIX + key, pickle.dumps(value))


def _has(key: str) -> bool:
    return bool(_store().check([PREFIX + key]))


def _beat(n: int, phase: str) -> None:
    now = time.time()
    if phase == "running":
        _STATE["case_thread"] = threading.get_ident()
        _STATE["since"] = now
    _STATE["current"] = (n, phase)
    _set(f"hb/{_STATE['rank']}", (n, phase, now, ""))


def _handle(n: int, message: Any) -> Any:
    """Run message ``n`` on this rank: a case (its reply) or a rebuild (True)."""
    _beat(n, "running")
    if isinstance(message, dict) and message.get("rebuild"):
        try:
            _rebuild()
            reply: Any = True
        except Exception:
            reply = False
    else:
        start = time.monotonic()
        reply = run_case(message["fn"], message["args"], message["kwargs"], pickled=True)
        reply["seconds"] = time.monotonic() - start
    import torch.distributed as dist

    _set(f"reply/{n}/{dist.get_rank()}", reply)
    _beat(n, "done")
    return reply


def _rebuild() -> None:
    """Every rank: a fresh process group for the cases (the old one may hold a timed-out
    collective); subgroups made on the old one are forgotten."""
    import torch.distributed as dist

    from conformance.processes import current_rank

    group = dist.new_group(backend=_STATE["backend"],
                           timeout=datetime.timedelta(seconds=_STATE["timeout"]))
    current_rank.use_group(group)


def serve() -> None:
    """Ranks other than 0: run every message rank 0 posts, in order, until "exit"."""
    n = 0
    while True:
        try:
            _store().wait([f"{PREFIX}case/{n}"], datetime.timedelta(seconds=60))
        except Exception as exc:  # the store's timeout: rank 0 is busy, wait on
            if "timeout" not in str(exc).lower() and "timed out" not in str(exc).lower():
                raise  # the store is gone: the job has ended
            continue
        message = _get(f"case/{n}")
        if message == "exit":
            _leave(n)
            return
        _handle(n, message)
        n += 1


def finish() -> None:
    """Rank 0: tell the other ranks to stop; wait (briefly) for them to leave."""
    n = _STATE["n"]
    _set(f"case/{n}", "exit")
    _leave(n)


def _leave(n: int) -> None:
    """Every rank: say so, then (rank 0) wait for the others; tear the group down only when
    every rank is back (a rank still in a timed-out collective would hang it)."""
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    _set(f"left/{rank}", time.time())
    if rank == 0:
        deadline = time.monotonic() + LEAVE_TIMEOUT
        while time.monotonic() < deadline and not all(_has(f"left/{r}") for r in range(world)):
            time.sleep(POLL * 5)
        missing = [r for r in range(world) if not _has(f"left/{r}")]
        if missing or _STATE.get("blocked"):
            _STATE["unclean"] = True
            return  # the caller exits without tearing down (os._exit in __main__)
    try:
        dist.destroy_process_group()
    except Exception:  # at the end: nothing left to report it to
        _STATE["unclean"] = True


def unclean() -> bool:
    """Whether the job ended with a rank that never came back (exit without teardown)."""
    return bool(_STATE.get("unclean"))


def _post(message: Any) -> int:
    """Rank 0: post a message to every rank, run its own share in a thread; its number."""
    n = _STATE["n"]
    _STATE["n"] = n + 1
    _set(f"case/{n}", message)

    def own() -> None:
        with contextlib.suppress(Exception):  # no reply: rank 0 is reported as stalled
            _handle(n, message)

    thread = threading.Thread(target=own, name=f"conformance-case-{n}", daemon=True)
    thread.start()
    _STATE["thread"] = thread
    return n


def _wait(n: int, world: int, timeout: float) -> list[Any]:
    """Every rank's reply to message ``n`` (None where none came by the deadline)."""
    deadline = time.monotonic() + timeout
    replies: list[Any] = [None] * world
    while True:
        for r in range(world):
            if replies[r] is None and _has(f"reply/{n}/{r}"):
                replies[r] = _get(f"reply/{n}/{r}")
        if all(x is not None for x in replies) or time.monotonic() > deadline:
            return replies
        time.sleep(POLL)


def _stalled(n: int, rank: int, timeout: float) -> str:
    """Why ``rank`` has no reply to case ``n``, from its heartbeat."""
    if not _has(f"hb/{rank}"):
        return f"rank {rank} never started a case"
    m, phase, when, where = _get(f"hb/{rank}")
    ago = time.time() - when
    at = f" at {where}" if where else ""
    if m == n and phase == "running":
        return (f"rank {rank} stalled: still in this case {ago:.1f} s after it "
                f"started{at} (no reply in {timeout:g} s)")
    if m < n:
        return (f"rank {rank} stalled: never started this case (still in case {m}, "
                f"{phase} {ago:.1f} s ago)")
    return f"rank {rank}: no reply in {timeout:g} s (last heartbeat: case {m}, {phase})"


def _check_group(world: int) -> str:
    """After a case in which a rank raised: a probe collective on the cases' group; where
    it fails, every rank joins a fresh group (they are all back). What was done ("" when
    the group still works)."""
    probe = {"fn": "conformance.processes.current_rank:probe", "args": (PROBE_TIMEOUT,),
             "kwargs": {}}
    replies = _wait(_post(probe), world, PROBE_TIMEOUT + 5.0)
    ok = all(r is not None and r["kind"] == "returned" and pickle.loads(r["value"])["ok"]
             for r in replies)
    if ok:
        return ""
    if any(r is None for r in replies):
        _STATE["blocked"] = "the probe collective after a failed case stalled"
        return "the probe collective after the case stalled: the job is blocked"
    rebuilt = _wait(_post({"rebuild": True}), world, _STATE["timeout"] + 30.0)
    if not all(r is True for r in rebuilt):
        _STATE["blocked"] = "rebuilding the process group after a failed case failed"
        return "the probe failed and rebuilding the group failed: the job is blocked"
    return "the probe collective failed after the case: the group was rebuilt"


def _healed(world: int) -> bool:
    """After a stall: every rank finished its last message (and rank 0's thread too)."""
    thread = _STATE.get("thread")
    if thread is not None and thread.is_alive():
        return False
    last = _STATE["n"] - 1
    return all(_has(f"reply/{last}/{r}") for r in range(world))


def runner(fn: Any, *args: Any, backend: str, device: str, world: int, timeout: float,
           env: dict[str, str] | None = None, **kwargs: Any) -> Any:
    """``conformance.processes.ranks.run_ranks`` on the torchrun job (rank 0's side)."""
    import torch.distributed as dist

    from conformance.processes.current_rank import backend_version
    from conformance.processes.ranks import RanksOutcome

    job_world = dist.get_world_size()
    if world != job_world or env:
        raise ValueError(f"under torchrun the cases run at the job's world size "
                         f"{job_world}, not {world}")
    info: dict[str, Any] = {"backend": backend, "backend_version": backend_version(backend),
                            "start_seconds": 0.0, "torchrun": True}
    start = time.monotonic()
    blocked = _STATE.get("blocked")
    if blocked is not None:
        if not _STATE.get("waited"):  # once: the stalled collectives' own timeout
            _STATE["waited"] = True
            deadline = time.monotonic() + _STATE["timeout"] + HEAL_SLACK
            while not _healed(job_world) and time.monotonic() < deadline:
                time.sleep(POLL * 5)
        if not _healed(job_world):
            info["blocked"] = blocked
            return RanksOutcome((), backend, device, job_world, 0.0, "", info=info)
        n = _post({"rebuild": True})  # every rank back: a fresh group for the cases
        replies = _wait(n, job_world, _STATE["timeout"] + 30.0)
        if not all(r is True for r in replies):
            info["blocked"] = blocked + "; rebuilding the process group failed"
            return RanksOutcome((), backend, device, job_world, 0.0, "", info=info)
        _STATE["blocked"] = None
        _STATE["waited"] = False
        info["rebuilt"] = True
    n = _post({"fn": case_name(fn), "args": args, "kwargs": kwargs})
    replies = _wait(n, job_world, timeout)
    outcomes = []
    stalled = []
    for rank, reply in enumerate(replies):
        if reply is None:
            why = _stalled(n, rank, timeout)
            stalled.append(why)
            outcomes.append(Outcome("stalled", message=why, seconds=timeout))
            continue
        if reply["kind"] == "returned":
            reply["value"] = pickle.loads(reply["value"])
        outcomes.append(_reply_outcome(reply))
    restarted = ""
    if not stalled and any(o.kind != "returned" for o in outcomes):
        restarted = _check_group(job_world)
    if stalled:
        _STATE["blocked"] = (f"an earlier case stalled ({'; '.join(stalled)}); the cases "
                             f"wait until every rank is back (--timeout "
                             f"{_STATE['timeout']:g} s), then run on a rebuilt group")
        restarted = "the job is blocked until every rank is back: " + "; ".join(stalled)
    return RanksOutcome(tuple(outcomes), backend, device, job_world,
                        time.monotonic() - start, restarted, info=info)
