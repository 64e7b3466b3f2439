"""Fake build probes for the toolchain area (``--impl toolchain=planted.toolchain_fakes:X``):
one wrong environment per check and per requirement the device matrix states, each with a
correct twin (tests/test_toolchain_faults.py runs them through the suite).

test_facts (every build): ``arch_dropped`` (sm_86 with SASS for 9.0+ only),
``ptx_only_on_older_driver`` (PTX the driver is too old to JIT), ``old_driver`` (driver API
a major below the runtime), ``old_driver_number`` (CUDA 13.0 on driver 575),
``rocm_xnack_mismatch`` (code object fixed to xnack+, device xnack-); twins
``arch_covered``, ``ptx_only_on_newer_driver``, ``cuda_ok``, ``rocm_ok``.

Requirements (devices.<key>.toolchain in conformance/device_matrix.yaml): ``torch_too_old``
(torch >=2.11, every device), ``cuda_124`` (cuda >=12.6), the driver and arch fakes above
(driver_serves_runtime / arch_covers_device: true), ``rocm_64`` (hip >=7.1),
``rocm_arch_dropped`` (rocm arch_covers_device).

test_cpu_half_gemm_path: ``half_accumulating_gemm`` (a GEMM summing in the half type);
twin ``float32_accumulating_gemm``.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

_TORCH = torch.__version__.split("+")[0]
_CU130 = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]


def _build(arch_list: list[str], **over: Any) -> dict[str, Any]:
    """A CUDA 13.0 build on an sm_86 device, driver 580 (CUDA 13.0 API)."""
    return {"torch": _TORCH, "cuda": "13.0", "hip": None, "cudnn": "9.13.0", "nccl": "2.27.7",
            "driver": "13.0", "driver_version": "580.65.06", "arch_list": arch_list,
            "capability": [8, 6], "gcn_arch": None, "dsa": False, "blas": None, **over}


def _rocm(arch_list: list[str], gcn_arch: str, **over: Any) -> dict[str, Any]:
    return {"torch": _TORCH, "cuda": None, "hip": "7.2.26015-fc0010cf6a", "cudnn": None,
            "nccl": "2.27.7", "driver": None, "driver_version": None, "arch_list": arch_list,
            "capability": None, "gcn_arch": gcn_arch, "dsa": False, "blas": None, **over}


# ------------------------------------------------------------------------------------- CUDA

def arch_dropped(device: torch.device) -> dict[str, Any]:
    """sm_86 is not covered: SASS for 9.0 and later only, no PTX."""
    return _build(["sm_90", "sm_100", "sm_120"])


def arch_covered(device: torch.device) -> dict[str, Any]:
    """sm_80 SASS runs on sm_86."""
    return _build(["sm_80", "sm_90", "sm_100", "sm_120"])


def cuda_ok(device: torch.device) -> dict[str, Any]:
    """A cu130 wheel on an H100 with driver 580: meets every cuda-entry requirement."""
    return _build(_CU130, capability=[9, 0])


def old_driver(device: torch.device) -> dict[str, Any]:
    """A CUDA 13.0 runtime on a driver whose API is 12.8 (no driver number known)."""
    return _build(["sm_80"], driver="12.8", driver_version=None)


def old_driver_number(device: torch.device) -> dict[str, Any]:
    """A cu130 wheel on driver 575.57.08 (CUDA 12.9), from a probe that knows the driver's
    number only: CUDA 13.x needs >= 580."""
    return _build(_CU130, driver=None, driver_version="575.57.08")


def ptx_only_on_older_driver(device: torch.device) -> dict[str, Any]:
    """Only compute_80 PTX, made by CUDA 12.8, on driver 535 (CUDA 12.2): the runtime is
    served (minor-version compatibility) but the driver cannot JIT newer PTX."""
    return _build(["compute_80"], cuda="12.8", driver="12.2", driver_version="535.104.05")


def ptx_only_on_newer_driver(device: torch.device) -> dict[str, Any]:
    """The same build on driver 570 (CUDA 12.8): the JIT works."""
    return _build(["compute_80"], cuda="12.8", driver="12.8", driver_version="570.133.20")


def cuda_124(device: torch.device) -> dict[str, Any]:
    """A CUDA 12.4 build (no 2.11 wheel) on driver 550: runs, but below the matrix's cuda."""
    return _build(_CU130, cuda="12.4", driver="12.4", driver_version="550.54.15",
                  capability=[9, 0])


def torch_too_old(device: torch.device) -> dict[str, Any]:
    """torch 2.10: older than any release the suite supports (and the matrix requires)."""
    return _build(_CU130, torch="2.10.0", capability=[9, 0])


# ------------------------------------------------------------------------------------- ROCm

def rocm_ok(device: torch.device) -> dict[str, Any]:
    """A rocm7.2 wheel on an MI300X reporting its full target ID."""
    return _rocm(["gfx90a", "gfx942", "gfx1100"], "gfx942:sramecc+:xnack-")


def rocm_64(device: torch.device) -> dict[str, Any]:
    """A ROCm 6.4 build: below the matrix's hip >=7.1."""
    return _rocm(["gfx90a", "gfx942"], "gfx942:sramecc+:xnack-", hip="6.4.43482-0f2d60242")


def rocm_arch_dropped(device: torch.device) -> dict[str, Any]:
    """No gfx942 code object (gfx90a and gfx1100 only) on an MI300X."""
    return _rocm(["gfx90a", "gfx1100"], "gfx942:sramecc+:xnack-")


def rocm_xnack_mismatch(device: torch.device) -> dict[str, Any]:
    """Code built for gfx90a:xnack+ on an MI250X running with xnack off."""
    return _rocm(["gfx90a:xnack+"], "gfx90a:sramecc+:xnack-")


# ---------------------------------------------------------------------------- CPU half GEMM

@functools.cache
def _sequential_sums(accumulate_in_half: bool) -> dict[str, dict[str, float]]:
    """The sums of impls/toolchain.py's half_gemm_sums, by a dot product summed left to
    right in float32 or in the half type itself, rounded to the half type at the end."""
    k = 4096
    rows = {"ones": [1.0] * k, "one_plus_tiny": [1.0] + [2.0 ** -12] * (k - 1)}
    out: dict[str, dict[str, float]] = {}
    for dtype in (torch.float16, torch.bfloat16):
        acc_dtype = dtype if accumulate_in_half else torch.float32
        out[str(dtype).removeprefix("torch.")] = sums = {}
        for case, row in rows.items():
            acc = torch.zeros((), dtype=acc_dtype)
            for x in torch.tensor(row, dtype=dtype).to(acc_dtype):
                acc = acc + x
            sums[case] = float(acc.to(dtype))
    return out


def half_accumulating_gemm(device: torch.device) -> dict[str, Any]:
    """A CPU half GEMM that sums in the half type (as an fp16-accumulating BLAS would)."""
    return {**_build([]), "capability": None, "cpu_half_gemm": _sequential_sums(True)}


def float32_accumulating_gemm(device: torch.device) -> dict[str, Any]:
    return {**_build([]), "capability": None, "cpu_half_gemm": _sequential_sums(False)}


FAKES = (arch_dropped, arch_covered, cuda_ok, old_driver, old_driver_number,
         ptx_only_on_older_driver, ptx_only_on_newer_driver, cuda_124, torch_too_old,
         rocm_ok, rocm_64, rocm_arch_dropped, rocm_xnack_mismatch, half_accumulating_gemm,
         float32_accumulating_gemm)

for _f in FAKES:
    _f.conformance_name = _f.__name__  # type: ignore[attr-defined]
