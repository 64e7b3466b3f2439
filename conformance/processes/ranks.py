"""A pool of W rank processes per (backend, device, world size, environment): a case (a
module-level function and picklable arguments) runs on every rank at once, and the caller
gets every rank's ``Outcome`` (``conformance.processes.isolate``'s: returned, raised,
signal, exited, timeout).

The ranks are ``conformance.processes.isolate`` children that joined a process group at start-up
(``--dist``): rendezvous through a ``FileStore`` in a fresh temporary directory, so no port
is fixed and any number of pools (xdist workers) run side by side. A pool starts once per
process and is reused by every case. A rank that hangs, dies or times out fails the case
with every rank's state; the pool is then killed (every process group) and a replacement
starts in the background. After a case in which some rank raised, a probe collective
checks the group; a pool whose probe fails is replaced too. After every case the ranks
report their collective counts on the group; when they differ (a rank ran a collective the
others did not) the ranks leave their groups and join a new one, or the pool is replaced.

Under torchrun the same cases run on the job's own ranks instead
(``conformance.processes.torchrun``).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from multiprocessing.connection import wait
from typing import Any

from conformance.processes._case import case_name
from conformance.processes.isolate import Outcome, _Child, _death, _reply_outcome

START_TIMEOUT = 90.0
PROBE_TIMEOUT = 10.0
DEATH_GRACE = 2.0  # seconds the other ranks get to finish after one rank died or raised
GROUP_TIMEOUT = 300.0  # the backend's own collective timeout (ours is per case, shorter)
TAIL_LINES = 6
_WAIT_SLICE = 0.05  # seconds between checks of the deadline and of exited ranks
PROBE = "conformance.processes.current_rank:probe"
REJOIN = "conformance.processes.current_rank:rejoin"


@dataclass(frozen=True)
class RanksOutcome:
    """What one case did on each rank of a pool."""

    outcomes: tuple[Outcome, ...]
    backend: str
    device: str
    world: int
    seconds: float = 0.0
    restarted: str = ""  # why the pool was replaced after this case ("" if it was not)
    out_of_step: str = ""  # how the ranks left the case out of step ("" if they did not)
    info: dict[str, Any] = field(default_factory=dict)  # the ranks' hello (backend version)

    @property
    def ok(self) -> bool:
        return all(o.kind == "returned" for o in self.outcomes)

    @property
    def values(self) -> list[Any]:
        """Every rank's return value (call only when ``ok``)."""
        return [o.value for o in self.outcomes]

    def describe(self) -> str:
        """Every rank's state, one line each, then the last lines of each failed rank's
        output (stderr)."""
        head = (f"{self.backend} on {self.device}, world size {self.world}, "
                f"{self.seconds:.2g} s")
        if self.restarted:
            head += f"; pool restarted: {self.restarted}"
        if self.out_of_step and not self.restarted:
            head += f"; {self.out_of_step}; the ranks then joined a new group"
        lines = [head]
        for rank, o in enumerate(self.outcomes):
            lines.append(f"  rank {rank} (pid {o.pid}): {o.describe()}")
        for rank, o in enumerate(self.outcomes):
            tail = o.stderr_tail.rstrip("\n").splitlines()[-TAIL_LINES:]
            if o.kind != "returned" and tail:
                lines.append(f"  rank {rank} stderr (last {len(tail)} lines):")
                lines.extend(f"    {line}" for line in tail)
        return "\n".join(lines)


ONE_DEVICE_PER_RANK = ("nccl", "xccl")  # backends whose ranks cannot share a device


def _rank_device(device: str, rank: int, backend: str = "gloo") -> str:
    """Rank r's device: the CPU; the run's own device for every rank of a backend that lets
    ranks share one (gloo); else (nccl, xccl: one device per rank) the run's device's
    index + r, modulo the devices this host has."""
    kind, _, index = device.partition(":")
    if kind in ("cpu", "meta"):
        return kind
    base = int(index) if index.isdigit() else 0
    if backend not in ONE_DEVICE_PER_RANK:
        return f"{kind}:{base}"
    import torch

    count = getattr(torch, kind).device_count()
    return f"{kind}:{(base + rank) % max(count, 1)}"


class RankPool:
    """W warm ranks that joined one process group."""

    def __init__(self, backend: str, device: str, world: int, env: dict[str, str]) -> None:
        self.backend, self.device, self.world = backend, device, world
        self.env = {"OMP_NUM_THREADS": "1", **env}
        self.dir = tempfile.mkdtemp(prefix="conformance-ranks-")
        store = os.path.join(self.dir, "store")
        self.children = [
            _Child(_rank_device(device, r, backend), self.env,
                   (f"--dist={backend},{r},{world},{store},{GROUP_TIMEOUT:g}",))
            for r in range(world)]
        self.ready = False
        self.sequences: list[int | None] = []  # each rank's collective count after a case
        self.rejoins = 0  # new groups joined after cases that left the ranks out of step
        self.info: dict[str, Any] = {}
        self.started = time.monotonic()
        self.start_seconds = 0.0

    def wait_ready(self, timeout: float = START_TIMEOUT) -> RanksOutcome | None:
        """Wait for every rank's hello; None when all joined, else what went wrong."""
        if self.ready:
            return None
        deadline = time.monotonic() + timeout
        hellos: list[dict[str, Any] | None] = [None] * self.world
        for r, child in enumerate(self.children):
            if not child.ready:
                hellos[r] = child.receive(max(0.0, deadline - time.monotonic()))
                child.ready = bool(hellos[r] and hellos[r].get("ready"))
        if all(c.ready for c in self.children):
            self.ready = True
            self.start_seconds = time.monotonic() - self.started
            first = hellos[0] or {}
            self.info = {k: first.get(k) for k in ("backend", "backend_version", "torch",
                                                   "warm_up")}
            self.info["start_seconds"] = self.start_seconds
            return None
        outcomes = []
        for child in self.children:
            if child.ready:
                outcomes.append(Outcome("returned", value="joined", pid=child.pid))
            elif child.dead:
                outcomes.append(Outcome(**_death(child.kill()), where="starting the child",
                                        stderr_tail=child.tail(0), pid=child.pid))
            else:
                outcomes.append(Outcome("timeout", where="starting the child",
                                        seconds=timeout, stderr_tail=child.tail(0),
                                        pid=child.pid))
        return RanksOutcome(tuple(outcomes), self.backend, self.device, self.world,
                            time.monotonic() - self.started, "the ranks did not all join")

    def run(self, payload: bytes, timeout: float,
            lockstep: bool = False) -> tuple[list[Outcome], bool]:
        """Send the case to every rank and wait (one deadline for all); the outcomes and
        whether every rank replied. ``lockstep``: the ranks run the same collectives to the
        end, so once one has replied the others get DEATH_GRACE, not the whole timeout."""
        offsets = [c.size() for c in self.children]
        start = time.monotonic()
        for child in self.children:
            try:
                child.outbox.send_bytes(payload)
            except OSError:
                child.dead = True
        deadline = start + timeout
        replies: list[dict[str, Any] | None] = [None] * self.world
        pending = set(range(self.world))
        died: dict[int, float] = {}
        cut = f"no reply in {timeout:g} s"  # why the ranks still pending are given up
        while pending:
            for r in sorted(pending):
                child = self.children[r]
                reply = child.receive(0.0) if not child.dead else None
                if reply is not None:
                    replies[r] = {**reply, "seconds": time.monotonic() - start}
                    pending.discard(r)
                    raised = reply.get("kind") != "returned"
                    if raised or lockstep:  # it has left the collectives the others may
                        deadline, cut = _grace(deadline, cut, r,  # wait in for it
                                               "raising" if raised else
                                               "replying (a lockstep case)")
                elif child.dead:
                    died[r] = time.monotonic() - start
                    pending.discard(r)
                    # the others wait for the dead rank: give them a grace period only
                    deadline, cut = _grace(deadline, cut, r, "dying")
            if not pending or time.monotonic() > deadline:
                break
            # sleep until a rank replies or its pipe closes (it died), at most one slice:
            # polling instead took a core's share from the ranks on a 2-core machine
            live = [self.children[r].inbox for r in pending if not self.children[r].dead]
            slice_s = max(0.0, min(_WAIT_SLICE, deadline - time.monotonic()))
            if live:
                wait(live, timeout=slice_s)
            else:
                time.sleep(slice_s)
        self.sequences = [None if reply is None else reply.get("sequence")
                          for reply in replies]
        outcomes = []
        for r, child in enumerate(self.children):
            reply = replies[r]
            tail = child.tail(offsets[r])
            if reply is None:
                if child.dead:
                    outcomes.append(Outcome(**_death(child.kill()), stderr_tail=tail,
                                            seconds=died.get(r, 0.0), pid=child.pid))
                else:
                    outcomes.append(Outcome("timeout", seconds=time.monotonic() - start,
                                            stderr_tail=tail,
                                            pid=child.pid,
                                            retire_reason=cut))
                continue
            if reply["kind"] == "returned":
                try:
                    reply["value"] = pickle.loads(reply["value"])
                except BaseException as exc:  # reported as the rank's outcome
                    from conformance.processes._case import exception_fields

                    reply = {**reply, **exception_fields(exc, where="unpickling the result")}
            outcomes.append(replace(_reply_outcome(reply), stderr_tail=tail,
                                    seconds=reply["seconds"], pid=child.pid))
        return outcomes, all(r is not None for r in replies)

    def ask_exit(self) -> None:
        """Ask every rank to exit (``close`` then waits for them, briefly)."""
        for child in self.children:
            with contextlib.suppress(OSError):
                child.outbox.send("exit")

    def close(self, deadline: float | None = None) -> None:
        """Kill every rank's process group once it has exited or at ``deadline`` (half a
        second from now by default, after asking it to exit); remove the rendezvous
        directory."""
        if deadline is None:
            self.ask_exit()
            deadline = time.monotonic() + 0.5
        for child in self.children:
            while not child._exited() and time.monotonic() < deadline:
                time.sleep(0.005)
            child.close()  # SIGKILL now: a child marked dead first would get 5 s to exit
            child.dead = True
        shutil.rmtree(self.dir, ignore_errors=True)


def _grace(deadline: float, cut: str, rank: int, event: str) -> tuple[float, str]:
    """The deadline and the give-up reason once ``rank`` did ``event``: DEATH_GRACE from
    now, unless the deadline is sooner."""
    if time.monotonic() + DEATH_GRACE >= deadline:
        return deadline, cut
    return (time.monotonic() + DEATH_GRACE,
            f"no reply within {DEATH_GRACE:g} s of rank {rank} {event}")


Key = tuple[str, str, int, tuple[tuple[str, str], ...]]
_pools: dict[Key, RankPool] = {}
_lock = threading.Lock()
_runner: Callable[..., RanksOutcome] | None = None  # set under torchrun


def use_runner(runner: Callable[..., RanksOutcome] | None) -> None:
    """Route ``run_ranks`` to another runner (the torchrun world); None restores the pool."""
    global _runner
    _runner = runner


def pool_info(backend: str, device: str, world: int,
              env: dict[str, str] | None = None) -> dict[str, Any]:
    """The hello of a started pool (backend version, start-up seconds); {} if none."""
    key = (backend, device, world, tuple(sorted((env or {}).items())))
    pool = _pools.get(key)
    return dict(pool.info) if pool is not None and pool.ready else {}


def run_ranks(fn: Callable[..., Any] | str, *args: Any, backend: str = "gloo",
              device: str = "cpu", world: int = 2, timeout: float = 30.0,
              env: dict[str, str] | None = None, lockstep: bool = False,
              **kwargs: Any) -> RanksOutcome:
    """Run ``fn(*args, **kwargs)`` on every rank of the (backend, device, world) pool and
    return every rank's outcome; never raises for what the case does."""
    if _runner is not None:
        return _runner(fn, *args, backend=backend, device=device, world=world,
                       timeout=timeout, env=env, **kwargs)
    name = case_name(fn)
    env = {str(k): str(v) for k, v in (env or {}).items()}
    key: Key = (backend, str(device), int(world), tuple(sorted(env.items())))
    payload = pickle.dumps({"fn": name, "args": args, "kwargs": kwargs})
    with _lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = RankPool(backend, str(device), int(world), env)
        failed = pool.wait_ready()
        if failed is not None:
            _replace(key, pool, start=False)  # the next case tries again, from scratch
            return failed
        start = time.monotonic()
        outcomes, complete = pool.run(payload, timeout, lockstep)
        seconds = time.monotonic() - start
        restarted = ""
        out_of_step = _out_of_step(pool.sequences) if complete else ""
        if not complete:
            restarted = "a rank hung or died"
        elif out_of_step:  # the next collective would pair ranks' different calls: a hang
            restarted = _rejoin(pool)  # a new group on the same ranks ("" when it worked)
        elif any(o.kind != "returned" for o in outcomes):
            restarted = _probe(pool)
        if restarted:
            _replace(key, pool, start=True)
        return RanksOutcome(tuple(outcomes), backend, str(device), int(world), seconds,
                            restarted, out_of_step, dict(pool.info))


def close_pool(backend: str, device: str, world: int,
               env: dict[str, str] | None = None) -> None:
    """Stop the pool of that key if there is one (a cold pool after its case: the next
    case of the key starts a cold one again)."""
    env = {str(k): str(v) for k, v in (env or {}).items()}
    key: Key = (backend, str(device), int(world), tuple(sorted(env.items())))
    with _lock:
        pool = _pools.pop(key, None)
    if pool is not None:
        pool.close()


def _out_of_step(sequences: list[int | None]) -> str:
    """"" when every rank issued as many collectives on the group as the others (or the
    backend counts none), else the counts: a rank ran a collective the others did not (or
    skipped one), so the group's next collective would pair different calls and hang."""
    known = [s for s in sequences if s is not None]
    if len(known) < 2 or len(set(known)) == 1:
        return ""
    counts = ", ".join(f"rank {r}: {s}" for r, s in enumerate(sequences))
    return f"the ranks left the case out of step (collectives issued on the group: {counts})"


def _rejoin(pool: RankPool) -> str:
    """"" when every rank left its groups and joined a new one (a fresh rendezvous file),
    back in step; else why not (the pool is then replaced)."""
    pool.rejoins += 1
    store = os.path.join(pool.dir, f"store-{pool.rejoins}")
    outcomes, complete = pool.run(
        pickle.dumps({"fn": REJOIN, "args": (store, GROUP_TIMEOUT), "kwargs": {}}),
        START_TIMEOUT)
    seqs = [o.value.get("sequence") if o.kind == "returned" else None for o in outcomes]
    if complete and all(o.kind == "returned" and o.value.get("ok") for o in outcomes) \
            and not _out_of_step(seqs):
        return ""
    bad = next((o for o in outcomes if o.kind != "returned" or not o.value.get("ok")), None)
    return ("the ranks left the case out of step and could not join a new group ("
            + (bad.describe() if bad else f"counts {seqs}") + ")")


def _probe(pool: RankPool) -> str:
    """"" when the group still works after a failed case, else why it does not."""
    outcomes, complete = pool.run(pickle.dumps({"fn": PROBE, "args": (PROBE_TIMEOUT,),
                                                "kwargs": {}}), PROBE_TIMEOUT + 5.0)
    if complete and all(o.kind == "returned" and o.value.get("ok") for o in outcomes):
        return ""
    bad = next(o for o in outcomes if o.kind != "returned" or not o.value.get("ok"))
    return f"the probe collective failed after the case ({bad.describe()})"


def _replace(key: Key, pool: RankPool, start: bool) -> None:
    pool.close()
    _pools.pop(key, None)
    if start:  # the replacement starts now and joins while the caller goes on
        _pools[key] = RankPool(pool.backend, pool.device, pool.world, pool.env)


def running() -> int:
    """How many pools this process holds."""
    return len(_pools)


def shutdown() -> None:
    """Stop every pool (at exit, and at the end of a pytest session)."""
    with _lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:  # every rank of every pool winds down at once
        pool.ask_exit()
    deadline = time.monotonic() + 0.5
    for pool in pools:
        pool.close(deadline)


atexit.register(shutdown)
