"""Build probes, the implementations of the area ``toolchain``: what the build says of itself.

Contract (``--impl toolchain=module:attr``): ``fn(device) -> dict`` with the keys below (None
where the build has no such thing). A vendor's build-info source, or a test's fake one,
plugs in here.

- ``torch``, ``cuda``, ``hip``, ``cudnn``, ``nccl``: version strings
- ``driver``: the GPU driver's version string (CUDA: torch's driver API query; ROCm: None
  unless known)
- ``arch_list``: ``torch.cuda.get_arch_list()`` (``sm_XY`` SASS, ``compute_XY`` PTX, ``gfx...``)
- ``capability``: ``[major, minor]`` of the device (CUDA), ``gcn_arch``: the ROCm target
- ``dsa``: whether device-side assertions are compiled in (CUDA/ROCm builds)
- ``blas``: the CPU BLAS torch was built with (BLAS_INFO); ``openblas_half_gemm``: for an
  OpenBLAS build, whether it exports ``shgemm_`` / ``sbgemm_``
"""

from __future__ import annotations

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
        "arch_list": list(torch.cuda.get_arch_list()) if gpu else [],
        "capability": None, "gcn_arch": None, "dsa": None, "blas": None,
    }
    match = re.search(r"BLAS_INFO=([^,\s]+)", torch.__config__.show())
    info["blas"] = match.group(1) if match else None
    info["openblas_half_gemm"] = _openblas_half_gemm() if info["blas"] == "open" else None
    if gpu:
        props = torch.cuda.get_device_properties(device)
        if torch.version.hip:
            info["gcn_arch"] = (getattr(props, "gcnArchName", "") or "").split(":")[0] or None
        else:
            info["capability"] = [props.major, props.minor]
        show = torch.__config__.show()
        info["dsa"] = "TORCH_USE_CUDA_DSA" in show or "TORCH_USE_HIP_DSA" in show
    return info


torch_build.conformance_name = "torch.build"  # type: ignore[attr-defined]
