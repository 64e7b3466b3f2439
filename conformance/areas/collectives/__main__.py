"""The collectives areas on a torchrun job (one host or many):

    torchrun --standalone --nproc-per-node 4 -m conformance.areas.collectives --report out/
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \\
        -m conformance.areas.collectives --device=cuda --backend=nccl --report out/

Rank 0 runs pytest on the collectives areas with the remaining arguments (``--device``,
``--report``, ``-k`` ...) and writes the usual report; every rank runs the cases
(``conformance.processes.torchrun``). Exit status: pytest's (4 for a usage error).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

DEFAULT_BACKEND = {"cpu": "gloo", "cuda": "nccl", "xpu": "xccl"}


def _device(pytest_args: list[str]) -> str:
    for i, arg in enumerate(pytest_args):
        if arg.startswith("--device="):
            return arg.split("=", 1)[1]
        if arg == "--device" and i + 1 < len(pytest_args):
            return pytest_args[i + 1]
    return "cpu"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.areas.collectives",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", help="gloo, nccl or xccl (default: the device's own)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds before a hung collective fails its case (default 120)")
    opts, pytest_args = parser.parse_known_args(argv)
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        print("error: run this under torchrun (RANK and WORLD_SIZE are not set), e.g. "
              "torchrun --standalone --nproc-per-node 2 -m conformance.areas.collectives",
              file=sys.stderr)
        return 4
    device = _device(pytest_args)
    backend = opts.backend or DEFAULT_BACKEND.get(device.split(":")[0])
    if backend is None:
        print(f"error: no collectives backend for device {device!r}", file=sys.stderr)
        return 4
    from conformance.processes import ranks, torchrun

    rank, world = torchrun.init(backend, device, opts.timeout)
    if rank != 0:
        torchrun.serve()
        return _exit(0, torchrun.unclean())
    import pytest

    os.environ[torchrun.ENV] = f"{backend},{world}"
    ranks.use_runner(torchrun.runner)
    here = Path(__file__).resolve().parent
    try:
        code = int(pytest.main([str(here), "-p", "no:cacheprovider", *pytest_args]))
    finally:
        torchrun.finish()
    return _exit(code, torchrun.unclean())


def _exit(code: int, unclean: bool) -> int:
    """``code``; where a rank never came back, exit now (tearing the groups down would
    wait on its collective): the report is written already."""
    if unclean:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
