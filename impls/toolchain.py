"""Build probes, the implementations of the area ``toolchain``: what the build says of itself.

Contract (``--impl toolchain=module:attr``): ``fn(device) -> dict`` with the keys below (None
where the build has no such thing). A vendor's build-info source, or a test's fake one,
plugs in here.

- ``torch``, ``cuda``, ``hip``, ``cudnn``, ``nccl``: version strings
- ``driver``: the CUDA version of the driver's API (torch's query, e.g. "13.0"; ROCm: None)
- ``driver_version``: the NVIDIA driver's number (e.g. "580.65.06", from pynvml if installed,
  else ``nvidia-smi``; None when neither answers, and on ROCm)
- ``arch_list``: ``torch.cuda.get_arch_list()`` (``sm_XY`` SASS, ``compute_XY`` PTX, ``gfx...``)
- ``capability``: ``[major, minor]`` of the device (CUDA), ``gcn_arch``: the ROCm target ID
  with its feature settings (``gfx942:sramecc+:xnack-``)
- ``dsa``: whether device-side assertions are compiled in (CUDA/ROCm builds)
- ``blas``: the CPU BLAS torch was built with (BLAS_INFO); ``openblas_half_gemm``: for an
  OpenBLAS build, whether it exports ``shgemm_`` / ``sbgemm_``
- ``cpu_half_gemm`` (device cpu; None elsewhere): ``{dtype: {case: value}}`` for float16 and
  bfloat16, sums a torch.matmul whose float32 accumulation is exact (``half_gemm_sums``)
"""

from __future__ import annotations

import functools
import re
from typing import Any

import torch


def _cudnn() -> str | None:
    try:
        v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    except Exception:  # a broken cuDNN install: reported as absent
        return None
    return None if v is None else f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 \
        else str(v)


def _nccl() -> str | None:
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # no NCCL in this build
        return None
    return ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)


def _driver() -> str | None:
    get = getattr(torch._C, "_cuda_getDriverVersion", None)
    if get is None or torch.version.hip:
        return None
    try:
        v = int(get())  # e.g. 13000 for the CUDA 13.0 driver API
    except Exception:  # no driver
        return None
    return f"{v // 1000}.{v % 1000 // 10}"


@functools.cache
def _driver_version() -> str | None:
    """The NVIDIA driver's number: NVML (pynvml / nvidia-ml-py) if installed, else
    ``nvidia-smi`` in a child (10 s limit); None when neither answers."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        try:
            v = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # not installed, or no NVML: ask nvidia-smi
        pass
    import subprocess

    try:
        proc = subprocess.run(["nvidia-smi", "--query-gpu=driver_version",
                               "--format=csv,noheader"], capture_output=True, text=True,
                              timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = proc.stdout.strip().splitlines() if proc.returncode == 0 else []
    return lines[0].strip() if lines and re.match(r"\d+\.", lines[0].strip()) else None


def half_gemm_sums() -> dict[str, dict[str, float]]:
    """A (16, 4096) x (4096, 16) torch.matmul on the CPU in float16 and bfloat16: even rows
    of A are ones ("ones", exact sum 4096), odd rows 1 then 4095 times 2**-12
    ("one_plus_tiny", exact 2 - 2**-12, 2.0 in the output); B is ones. Per case the value
    its 128 outputs give, or the sorted distinct values where they disagree (the area's
    check, conformance/areas/toolchain/facts.py, judges them)."""
    k = 4096
    tiny = torch.full((k,), 2.0 ** -12, dtype=torch.float64)
    tiny[0] = 1.0
    rows = {"ones": torch.ones(k, dtype=torch.float64), "one_plus_tiny": tiny}
    out: dict[str, dict[str, float]] = {}
    for dtype in (torch.float16, torch.bfloat16):
        a = torch.stack([rows[c] for _ in range(8) for c in rows]).to(dtype)
        c = (a @ torch.ones(k, 16, dtype=dtype)).double()
        name = str(dtype).removeprefix("torch.")
        out[name] = {}
        for i, case in enumerate(rows):
            values = sorted(set(c[i::2].flatten().tolist()))
            out[name][case] = values[0] if len(values) == 1 else values
    return out


def _openblas_half_gemm() -> dict[str, bool] | None:
    """Whether the OpenBLAS torch links exports shgemm_ / sbgemm_ (half / bfloat16 GEMM);
    None when the libraries cannot be searched."""
    import ctypes
    from pathlib import Path

    found = {"shgemm": False, "sbgemm": False}
    libs = sorted(Path(torch.__file__).parent.joinpath("lib").glob("*.so*"))
    libs += sorted(Path(torch.__file__).parent.parent.glob("*openblas*/**/*.so*"))
    if not libs:
        return None
    for lib in libs:
        try:
            handle = ctypes.CDLL(str(lib))
        except OSError:
            continue
        for name in found:
            found[name] = found[name] or hasattr(handle, f"{name}_")
    return found


def torch_build(device: torch.device) -> dict[str, Any]:
    """The facts of the running torch build, for ``device``."""
    gpu = device.type == "cuda" and torch.cuda.is_available()
    info: dict[str, Any] = {
        "torch": torch.__version__.split("+")[0], "cuda": torch.version.cuda,
        "hip": torch.version.hip, "cudnn": _cudnn() if gpu else None,
        "nccl": _nccl() if gpu else None, "driver": _driver() if gpu else None,
        "driver_version": _driver_version() if gpu and not torch.version.hip else None,
        "arch_list": list(torch.cuda.get_arch_list()) if gpu else [],
        "capability": None, "gcn_arch": None, "dsa": None, "blas": None,
    }
    match = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    info["blas"] = match.group(1) if match else None
    info["openblas_half_gemm"] = _openblas_half_gemm() if info["blas"] == "open" else None
    info["cpu_half_gemm"] = half_gemm_sums() if device.type == "cpu" else None
    if gpu:
        props = torch.cuda.get_device_properties(device)
        if torch.version.hip:
            info["gcn_arch"] = getattr(props, "gcnArchName", "") or None  # features kept
        else:
            info["capability"] = [props.major, props.minor]
        show = torch.__config__.show()
        info["dsa"] = "TORCH_USE_CUDA_DSA" in show or "TORCH_USE_HIP_DSA" in show
    return info


torch_build.conformance_name = "torch.build"  # type: ignore[attr-defined]
