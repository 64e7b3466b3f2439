"""What a rank of ``conformance.processes.ranks`` runs besides the cases: joining the process group
at start-up, the group a case should use, and the health probe run after a case that
raised. Imported in the rank processes only (and under torchrun)."""

from __future__ import annotations

import datetime
import os
import time
from typing import Any

_GROUP: dict[str, Any] = {}
_SUBGROUPS: dict[tuple[Any, ...], tuple[int | None, Any]] = {}


def join_group(spec: str, device: str) -> dict[str, Any]:
    """Join the process group ``BACKEND,RANK,WORLD,STORE_FILE,TIMEOUT_S`` (a FileStore
    rendezvous: no port is fixed); what the rank reports in its hello."""
    import torch
    import torch.distributed as dist

    backend, rank, world, store_file, timeout = spec.split(",")
    start = time.monotonic()
    kwargs: dict[str, Any] = {}
    dev = torch.device(device)
    if backend in ("nccl", "xccl") and dev.index is not None:
        kwargs["device_id"] = dev
    store = dist.FileStore(store_file, int(world))
    dist.init_process_group(backend, store=store, rank=int(rank), world_size=int(world),
                            timeout=datetime.timedelta(seconds=float(timeout)), **kwargs)
    _GROUP.update(backend=backend, rank=int(rank), world=int(world), device=device)
    warmed = warm_up()
    return {"rank": int(rank), "world": int(world), "backend": backend,
            "backend_version": backend_version(backend),
            "join_seconds": time.monotonic() - start, "warm_up": warmed}


def rejoin(store_file: str, timeout: float) -> dict[str, Any]:
    """Leave every process group and join a new one through ``store_file`` (same backend,
    rank and world): the pool's way back in step after a case left the ranks' collective
    counts apart (no rank is waiting in a collective then). The warm-up runs again."""
    import torch.distributed as dist

    dist.destroy_process_group()
    _SUBGROUPS.clear()
    _GROUP.pop("pg", None)
    spec = f"{_GROUP['backend']},{rank()},{world()},{store_file},{timeout:g}"
    joined = join_group(spec, device())
    return {"ok": joined["warm_up"] in ("done", "skipped"), "sequence": sequence(),
            "warm_up": joined["warm_up"]}


COLD_ENV = "CONFORMANCE_COLD_RANKS"  # "1": a pool whose ranks skip the warm-up


def warm_up() -> str:
    """The process's first collective, made at start-up so that no case is one (harness/
    history.py): a functional all_reduce of one float32 element on the group. The first
    collective of a process pays lazy initialisation (NCCL makes its communicator there;
    torch's functional collectives set up their autograd state: torch 2.11-2.15 fail the
    backward of a complex all_gather along dim 1 when it is the process's first), so a case
    run first would be timed and judged differently from the same case run later. A pool
    started with COLD_ENV=1 skips it: the tests of first calls build that history on
    purpose. Returns "done", "skipped" or why it failed (the cases then show it)."""
    if os.environ.get(COLD_ENV) == "1":
        return "skipped"
    import torch
    import torch.distributed._functional_collectives as fc

    try:
        x = torch.ones(1, device=device())
        fc.wait_tensor(fc.all_reduce(x, "sum", group()))
    except Exception as exc:
        return f"failed: {type(exc).__name__}: {str(exc)[:200]}"
    return "done"


def adopt_group(backend: str, device: str) -> None:
    """Use a process group that exists already (under torchrun)."""
    import torch.distributed as dist

    _GROUP.update(backend=backend, rank=dist.get_rank(), world=dist.get_world_size(),
                  device=device)  # no warm_up: the job's ranks, its groups rebuilt after a stall


def backend_version(backend: str) -> str:
    """The communication library's version where torch exposes it ("" otherwise)."""
    import torch

    if backend == "nccl":
        try:
            version = torch.cuda.nccl.version()
        except (AttributeError, RuntimeError):
            return ""
        return ".".join(str(v) for v in version) if isinstance(version, tuple) else str(version)
    if backend == "gloo":
        return f"gloo (torch {torch.__version__})"
    return ""


def rank() -> int:
    """This process's rank in the case's group."""
    return int(_GROUP["rank"])


def world() -> int:
    return int(_GROUP["world"])


def device() -> str:
    """The device this rank's tensors live on."""
    return str(_GROUP.get("device", "cpu"))


def group() -> Any:
    """The process group a case runs its collectives on (WORLD unless rebuilt)."""
    import torch.distributed as dist

    return _GROUP.get("pg") or dist.group.WORLD


def use_group(pg: Any) -> None:
    """Run the cases on ``pg`` from now on (a torchrun job's rebuilt group); subgroups made
    on the old one are forgotten."""
    _GROUP["pg"] = pg
    _SUBGROUPS.clear()


def subgroup(groups: tuple[tuple[int, ...], ...], mesh: bool = False
             ) -> tuple[int | None, Any]:
    """(index of this rank's group in ``groups`` or None, that process group), made once
    per layout on every rank of the world in the same order (group creation is collective).
    ``mesh``: the groups are dimension 0 of a 2-D DeviceMesh of shape (2, W / 2) (ranks
    r and r + W / 2), made by ``init_device_mesh``; else ``dist.new_group`` per group."""
    import torch.distributed as dist

    key = (groups, mesh)
    if key not in _SUBGROUPS:
        me = rank()
        mine = next((i for i, g in enumerate(groups) if me in g), None)
        if mesh:
            from torch.distributed.device_mesh import init_device_mesh

            half = world() // 2
            kind = device().split(":")[0]
            dm = init_device_mesh(kind, (2, half), mesh_dim_names=("dp", "tp"))
            want = tuple(sorted(g) for g in groups)
            have = tuple(sorted((j, j + half)) for j in range(half))
            if sorted(map(tuple, want)) != sorted(map(tuple, have)):
                raise ValueError(f"groups {groups} are not dimension 0 of a (2, {half}) mesh")
            handle = dm.get_group("dp")
        else:
            handle = None
            for i, g in enumerate(groups):
                made = dist.new_group(list(g))
                if i == mine:
                    handle = made
        _SUBGROUPS[key] = (mine, handle)
    return _SUBGROUPS[key]


def sequence() -> int | None:
    """How many collectives this rank has issued on the case group (the backend's own
    sequence number; None where the backend keeps none): every rank of a group that stayed
    in step gives the same number after a case."""
    try:
        return int(group()._get_sequence_number_for_group())
    except Exception:  # a backend without sequence numbers, or no group
        return None


def probe(timeout_s: float = 10.0) -> dict[str, Any]:
    """A small all_reduce on every rank: the group still works after a failed case."""
    import torch
    import torch.distributed as dist

    x = torch.full((4,), float(rank() + 1), device=device())
    work = dist.all_reduce(x, group=group(), async_op=True)
    work.wait(datetime.timedelta(seconds=timeout_s))
    expected = world() * (world() + 1) / 2
    return {"ok": bool(torch.all(x == expected).item()), "pid": os.getpid()}

