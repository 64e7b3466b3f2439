"""The rank cases on a torchrun job's own processes instead of a local pool: rank 0 runs
pytest (the usual session, report and all) and sends each case to every rank over a
control group; the other ranks serve cases until rank 0 says "exit".

``torchrun --nnodes N --nproc-per-node G -m conformance.areas.collectives [pytest args]`` (see
``conformance/areas/collectives/__main__.py``). The tests then run at the job's world size only
(backend and world in their ids, as usual). A rank that hangs fails the case when the
control group's timeout passes; a rank that crashes ends the job (torchrun's rule).
"""

from __future__ import annotations

import datetime
import os
import pickle
import sys
import time
from typing import Any

from conformance.processes._case import case_name, run_case
from conformance.processes.isolate import Outcome, _reply_outcome

ENV = "CONFORMANCE_TORCHRUN"  # set on rank 0's pytest: "BACKEND,WORLD"
_CONTROL: dict[str, Any] = {}


def active() -> tuple[str, int] | None:
    """(backend, world) when this process is rank 0 of a torchrun job running pytest."""
    value = os.environ.get(ENV, "")
    if not value:
        return None
    backend, world = value.split(",")
    return backend, int(world)


def init(backend: str, device: str, timeout_s: float) -> tuple[int, int]:
    """Join the job's process group (env:// from torchrun) and a gloo control group."""
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
    _CONTROL["group"] = dist.new_group(backend="gloo",
                                       timeout=datetime.timedelta(seconds=timeout_s))
    adopt_group(backend, own)
    return dist.get_rank(), dist.get_world_size()


def _exchange(message: Any) -> list[Any]:
    """Rank 0's message to every rank; every rank's reply back to rank 0."""
    import torch.distributed as dist

    box = [message]
    dist.broadcast_object_list(box, src=0, group=_CONTROL["group"])
    if box[0] == "exit":
        return []
    reply = _run(box[0])
    gathered: list[Any] = [None] * dist.get_world_size() if dist.get_rank() == 0 else []
    dist.gather_object(reply, gathered if dist.get_rank() == 0 else None, dst=0,
                       group=_CONTROL["group"])
    return gathered


def _run(message: dict[str, Any]) -> dict[str, Any]:
    start = time.monotonic()
    reply = run_case(message["fn"], message["args"], message["kwargs"], pickled=True)
    reply["seconds"] = time.monotonic() - start
    return reply


def serve() -> None:
    """Ranks other than 0: run every case rank 0 sends, until "exit"."""
    import torch.distributed as dist

    while True:
        box: list[Any] = [None]
        dist.broadcast_object_list(box, src=0, group=_CONTROL["group"])
        if box[0] == "exit":
            _leave()
            return
        reply = _run(box[0])
        dist.gather_object(reply, None, dst=0, group=_CONTROL["group"])


def finish() -> None:
    """Rank 0: tell the other ranks to stop."""
    import torch.distributed as dist

    box = ["exit"]
    dist.broadcast_object_list(box, src=0, group=_CONTROL["group"])
    try:
        _leave()
    except Exception as exc:  # a rank that hung: the verdicts are in, say so and go on
        print(f"warning: the ranks did not shut down together: {exc}".splitlines()[0],
              file=sys.stderr)


def _leave() -> None:
    """Every rank: meet the others, then tear the groups down before the interpreter exits.

    Exiting with the groups alive lets gloo's worker threads be destroyed while still
    joinable, and a rank aborts ("terminate called without an active exception", seen on
    torch 2.11 in about one run in three under load) after every case has passed.
    """
    import torch.distributed as dist

    dist.barrier(group=_CONTROL["group"])
    dist.destroy_process_group()
    _CONTROL.clear()


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
    start = time.monotonic()
    try:
        replies = _exchange({"fn": case_name(fn), "args": args, "kwargs": kwargs})
    except Exception as exc:  # the control group's timeout: some rank hung
        replies = [None] * job_world
        reason = f"{type(exc).__name__}: {exc}".splitlines()[0]
    else:
        reason = ""
    outcomes = []
    for reply in replies:
        if reply is None:
            outcomes.append(Outcome("timeout", message=reason, seconds=timeout))
            continue
        if reply["kind"] == "returned":
            reply["value"] = pickle.loads(reply["value"])
        outcomes.append(_reply_outcome(reply))
    info = {"backend": backend, "backend_version": backend_version(backend),
            "start_seconds": 0.0, "torchrun": True}
    return RanksOutcome(tuple(outcomes), backend, device, job_world,
                        time.monotonic() - start, "", info)
