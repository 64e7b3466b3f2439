"""Which library served a CPU half-precision GEMM: oneDNN, MKL, or ATen's own fallback.

Run in a child process with oneDNN's and MKL's verbose logging switched on; the first
primitive or routine they log names the path. OpenBLAS logs nothing, so a BLAS_INFO=open
build whose call neither library logged is reported as OpenBLAS (shgemm/sbgemm, or ATen's
fallback where the OpenBLAS build lacks them).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
import sys

_SCRIPT = """
import torch
a = torch.ones(64, 48, dtype=torch.{dtype})
b = torch.ones(48, 32, dtype=torch.{dtype})
c = a @ b
assert float(c[0, 0]) == 48.0
print("PROBE-DONE", flush=True)
"""


@functools.cache
def served_by(dtype: str) -> str:
    """A one-line description of the library that ran a CPU ``dtype`` matmul."""
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1", MKL_VERBOSE="1",
               OMP_NUM_THREADS="1")
    try:
        proc = subprocess.run([sys.executable, "-c", _SCRIPT.format(dtype=dtype)], env=env,
                              capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown (probe failed: {exc})"
    if "PROBE-DONE" not in proc.stdout:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return f"unknown (probe failed: {last})"
    for line in proc.stdout.splitlines():
        if line.startswith(("onednn_verbose", "dnnl_verbose")) and ",exec," in line:
            fields = line.split(",")
            kind = fields[5] if len(fields) > 5 else "?"
            impl = fields[6] if len(fields) > 6 else "?"
            return f"oneDNN {kind} primitive ({impl})"
        routine = re.match(r"MKL_VERBOSE (\w+)\(", line)
        if routine:
            return f"MKL {routine.group(1)}"
    import torch

    if "BLAS_INFO=open" in torch.__config__.show():
        return "OpenBLAS (no oneDNN/MKL call logged)"
    return "ATen native CPU GEMM (no oneDNN/MKL call logged)"
