"""Which communication backends and world sizes the collectives areas run per device, and
why a combination cannot run here (a skip for missing hardware, with the reason)."""

from __future__ import annotations

import torch

from conformance.processes.ranks import ONE_DEVICE_PER_RANK

# matrix device key -> backends (the first is the device's native one)
BACKENDS: dict[str, tuple[str, ...]] = {
    "cpu": ("gloo",),
    "cuda": ("nccl", "gloo"),  # gloo with CUDA tensors: staged through the host
    "rocm": ("nccl", "gloo"),  # rccl, through torch's "nccl" backend
    "xpu": ("xccl",),
}
# world sizes per backend; 3 catches code that assumes an even split
WORLDS: dict[str, tuple[int, ...]] = {"gloo": (2, 3, 4), "nccl": (2, 3, 4, 8),
                                      "xccl": (2, 3, 4, 8)}
GLOO_GPU_WORLDS = (2, 3)  # gloo with GPU tensors: ranks share the GPUs


def combinations(device_key: str) -> list[tuple[str, int]]:
    """(backend, world) pairs the areas are parametrised with on this device (under
    torchrun: the job's backend and world size only)."""
    from conformance.processes.torchrun import active

    job = active()
    if job is not None:
        return [job]
    out = []
    for backend in BACKENDS.get(device_key, ()):
        worlds = GLOO_GPU_WORLDS if backend == "gloo" and device_key != "cpu" else \
            WORLDS[backend]
        out.extend((backend, w) for w in worlds)
    return out


def missing(backend: str, world: int, device_type: str) -> str | None:
    """Why (backend, world) cannot run on this host; None when it can."""
    import torch.distributed as dist

    if not dist.is_available():
        return "this torch build has no torch.distributed"
    if not dist.is_backend_available(backend):
        return f"this torch build has no {backend} backend"
    from conformance.processes.torchrun import active

    if backend in ONE_DEVICE_PER_RANK and active() is None:  # torchrun placed the ranks
        count = getattr(torch, device_type).device_count() if device_type != "cpu" else 0
        if count < world:
            return (f"{backend} needs one {device_type} device per rank: world size {world} "
                    f"needs {world}, this host has {count}")
    return None
