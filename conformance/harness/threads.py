"""Thread pools of a qualification process: torch's intra-op pool, Inductor's compile
workers and the BLAS that numpy's float64 oracles call.

On a CPU run the xdist workers already hold every core, so each worker gets
cores // workers intra-op threads and Inductor compiles in-process; on an accelerator each
worker's Inductor compile pool gets cores // workers threads. The oracles' BLAS
(numpy's OpenBLAS, a second pool next to torch's) runs one thread on CPU runs: its threads
spin between calls, and measured on the 2-core machine with the other core busy, the
attention oracle's backward (B=2, H=4, 129 x 127, D=64) took 36 ms of wall and 47 ms of CPU
with two OpenBLAS threads against 10 ms and 10 ms with one (docs/results/time-budget-2026-12-04.md).
The oracles' results do not depend on it: OpenBLAS splits a GEMM's output, not its sums.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

_limiter: Any = None  # threadpoolctl's limiter, kept for the process's life


def configure(device_kind: str, workers: int) -> dict[str, int]:
    """Apply the policy; returns what it set (for the report's header)."""
    cores = os.cpu_count() or 1
    done: dict[str, int] = {}
    if device_kind == "cpu":
        # Inductor compiles in this process rather than in a pool of subprocesses: the
        # pool's start-up cost more than its parallelism gained (68 -> 64 s for the 16
        # compiled FlexAttention cases)
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
        if workers > 1:  # xdist workers share the cores: no oversubscribed intra-op pools
            torch.set_num_threads(max(1, cores // workers))
            done["torch"] = torch.get_num_threads()
    else:
        # an accelerator run: each worker's Inductor pool gets its share of the cores (left
        # alone, each of 8 workers on a 16-core GPU host starts a pool of 16 compilers)
        share = max(1, cores // max(workers, 1))
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(share))
        done["inductor_compile"] = int(os.environ["TORCHINDUCTOR_COMPILE_THREADS"])
    oracle = 1 if device_kind == "cpu" else max(1, cores // max(workers, 1))
    # for a BLAS loaded later (scipy's) and for the child processes (isolation, ranks)
    os.environ.setdefault("OPENBLAS_NUM_THREADS", str(oracle))
    done["oracle_blas"] = limit_oracle_blas(oracle)
    return done


def limit_oracle_blas(threads: int) -> int:
    """Limit every BLAS loaded outside torch's own libraries (numpy's, scipy's) to
    ``threads``; returns ``threads`` (0 when threadpoolctl found none)."""
    global _limiter
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # a declared dependency; an old environment runs unlimited
        return 0
    torch_dir = Path(torch.__file__).resolve().parent
    controller = ThreadpoolController()
    paths = [info["filepath"] for info in controller.info()
             if info["user_api"] == "blas"
             and torch_dir not in Path(info["filepath"]).resolve().parents]
    if not paths:
        return 0
    _limiter = controller.select(filepath=paths).limit(limits=threads)
    return threads
