"""Blind build probes for the toolchain area (``--impl toolchain=planted.blind_toolchain_envs:X``).

Written without reading the area's code or docs, from NVIDIA's and AMD's documentation only.
``LEGAL`` holds configurations that really run and must be accepted; ``ILLEGAL`` holds ones
that fail on real hardware and must be flagged. Each probe describes one build + device; the
suite runs on CPU here, so it is the probe's facts that are judged.

Sources cited in the docstrings (short names):

[COMPAT]   CUDA Compatibility, "Minor Version Compatibility", Table 1 (CUDA 11.x/12.x/13.x
           driver version ranges): CUDA 13.x needs a driver >= 580; CUDA 12.x needs >= 525,
           minor-version compatibility up to < 580, newer drivers through backward
           compatibility; CUDA 11.x >= 450. "This minimum required driver ... should belong
           to the same major release."
           https://docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html
[FAQ]      CUDA Compatibility, FAQ: "Drivers have always been backwards compatible with CUDA"
           (an application built with an older toolkit runs on any newer driver).
           https://docs.nvidia.com/deploy/cuda-compatibility/frequently-asked-questions.html
[BWCOMPAT] Blackwell Compatibility Guide for CUDA Applications, 1.2: "A cubin generated for a
           certain compute capability is supported to run on any GPU with the same major
           revision and same or higher minor revision ... a cubin generated for compute
           capability 8.6 is not supported to run on a GPU with compute capability 8.0, and a
           cubin generated with compute capability 8.x is not supported to run on a GPU with
           compute capability 9.0." and "PTX is forward-compatible ... PTX code generated for
           compute capability 9.x is supported to run on compute capability 9.x or any higher
           revision (major or minor), including compute capability 10.0."
           https://docs.nvidia.com/cuda/blackwell-compatibility-guide/index.html
[PG-FEAT]  CUDA C++ Programming Guide, "Feature Availability" (architecture-specific and
           family-specific feature sets, sec. 20.1.3 in the 12.9/13.0 guide; the "Compute
           Capability and Streaming Multiprocessor Versions" / compiler-target part of the new
           programming guide): code built for an architecture-specific target (``sm_90a``,
           ``compute_90a``, ``sm_100a`` ...) runs only on devices of exactly that compute
           capability; code built for a family-specific target (``sm_100f``, ``compute_100f``,
           CUDA 12.9+) runs on devices of the same major compute capability with an equal or
           higher minor one.
           https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#feature-availability
[BLOG-F]   NVIDIA Technical Blog, "NVIDIA Blackwell and NVIDIA CUDA 12.9 Introduce
           Family-Specific Architecture Features" (J. Bentz, 2025): ``compute_100f`` code is
           compatible with CC 10.0 and 10.3; ``sm_120f`` with 12.0 and 12.1; architecture-
           specific ("a") code, PTX included, is not forward compatible to any other CC.
           https://developer.nvidia.com/blog/nvidia-blackwell-and-nvidia-cuda-12-9-introduce-family-specific-architecture-features/
[NVCC]     nvcc documentation, "GPU Compilation" / "-arch, -code": ``compute_XX`` embeds PTX
           that the driver JIT-compiles; ``sm_XX`` embeds SASS (cubin) for that SM;
           ``sm_XXa`` / ``sm_XXf`` the arch- and family-specific variants.
           https://docs.nvidia.com/cuda/cuda-compiler-driver-nvcc/index.html
[AMDGPU]   LLVM "User Guide for AMDGPU Backend", "Target ID" and processor table: a code
           object is built for one processor (``gfx90a``, ``gfx942``, ...); the target ID adds
           feature settings (``gfx942:sramecc+:xnack-``) that only select among code objects
           for that same processor; a code object for one processor does not load on another
           (only the explicit ``gfx9-4-generic``-style generic targets span processors).
           https://llvm.org/docs/AMDGPUUsage.html#target-id

The brief's rules were checked against these and none had to be reversed. Two care points the
docs add, honoured below: minor-version compatibility does not cover JIT of PTX newer than the
driver (so the 12.8-on-535 probe carries SASS for its device), and Blackwell devices need a
driver of their own generation (>= 570/575), so every sm_10x/sm_12x probe runs on driver 580+.
"""

from __future__ import annotations

from typing import Any

import torch

_TORCH = torch.__version__.split("+")[0]


def _cuda(runtime: str, driver: str, driver_version: str, capability: list[int],
          arch_list: list[str]) -> dict[str, Any]:
    if runtime.startswith("13."):
        cudnn, nccl = "9.13.0", "2.27.7"
    elif runtime.startswith("12."):
        cudnn, nccl = "9.10.2", "2.27.3"
    else:
        cudnn, nccl = "9.1.0", "2.21.5"
    return {"torch": _TORCH, "cuda": runtime, "hip": None, "cudnn": cudnn, "nccl": nccl,
            "driver": driver, "driver_version": driver_version, "arch_list": list(arch_list),
            "capability": list(capability), "gcn_arch": None, "dsa": False, "blas": None}


def _rocm(arch_list: list[str], gcn_arch: str) -> dict[str, Any]:
    return {"torch": _TORCH, "cuda": None, "hip": "7.1", "cudnn": None, "nccl": "2.26.6",
            "driver": None, "arch_list": list(arch_list), "capability": None,
            "gcn_arch": gcn_arch, "dsa": False, "blas": None}


# Real driver releases and the CUDA version each reports through cudaDriverGetVersion.
_R520 = ("11.8", "520.61.05")   # shipped with CUDA 11.8
_R525 = ("12.0", "525.60.13")   # shipped with CUDA 12.0: the CUDA 12.x minimum [COMPAT]
_R535 = ("12.2", "535.104.05")  # CUDA 12.2 branch (LTS)
_R580 = ("13.0", "580.65.06")   # shipped with CUDA 13.0: the CUDA 13.x minimum [COMPAT]
_R590 = ("13.1", "590.44.01")   # shipped with CUDA 13.1

# A cu130-style list (PyTorch wheels: SASS for 7.5 .. 12.0 plus PTX for the newest).
_CU130_ARCHES = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]
_CU128_ARCHES = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]


# --------------------------------------------------------------------------------- LEGAL


def minor_compat_128_on_535(device: torch.device) -> dict[str, Any]:
    """CUDA 12.8 runtime on driver 535 (reports 12.2), H100 (sm_90) with sm_90 SASS.

    Rule: from CUDA 11 on, a toolkit of one major release runs on any driver of that major
    release at or above its minimum (12.x: >= 525) -- minor-version compatibility [COMPAT].
    PTX JIT of 12.8 PTX would need a newer driver, so the device is covered by SASS.
    Expected: LEGAL (accepted)."""
    return _cuda("12.8", *_R535, [9, 0], _CU128_ARCHES)


def minor_compat_128_on_525(device: torch.device) -> dict[str, Any]:
    """CUDA 12.8 runtime on driver 525.60.13 (reports 12.0), the exact CUDA 12.x minimum.

    Rule: CUDA 12.x minimum driver is >= 525 [COMPAT]; A100 (sm_80) has sm_80 SASS.
    Expected: LEGAL (boundary of minor-version compatibility)."""
    return _cuda("12.8", *_R525, [8, 0], _CU128_ARCHES)


def runtime12_on_driver580(device: torch.device) -> dict[str, Any]:
    """CUDA 12.8 runtime on driver 580 (reports 13.0): older major runtime, newer driver.

    Rule: drivers are backward compatible with every older toolkit [FAQ]; Table 1 of
    [COMPAT] says 12.x on >= 580 is "still supported through backward compatibility".
    Expected: LEGAL (a newer driver major is fine; only an older one is not)."""
    return _cuda("12.8", *_R580, [9, 0], _CU128_ARCHES)


def runtime13_on_580(device: torch.device) -> dict[str, Any]:
    """CUDA 13.0 runtime on driver 580.65.06 (reports 13.0), H100.

    Rule: CUDA 13.x needs a driver >= 580 [COMPAT]; 580 is that minimum.
    Expected: LEGAL."""
    return _cuda("13.0", *_R580, [9, 0], _CU130_ARCHES)


def runtime13_on_590(device: torch.device) -> dict[str, Any]:
    """CUDA 13.0 runtime on a newer driver 590.44.01 reporting 13.1, H100.

    Rule: a newer driver runs older runtimes (backward compatibility) [FAQ], [COMPAT].
    Expected: LEGAL."""
    return _cuda("13.0", *_R590, [9, 0], _CU130_ARCHES)


def sass_sm80_on_sm86(device: torch.device) -> dict[str, Any]:
    """Only sm_80 SASS, device sm_86 (RTX 30xx / A40).

    Rule: a cubin for X.y runs on X.z with z >= y ("a cubin generated for compute capability
    8.0 is supported to run on a GPU with compute capability 8.6") [BWCOMPAT].
    Expected: LEGAL."""
    return _cuda("13.0", *_R580, [8, 6], ["sm_80"])


def sass_sm80_on_sm89(device: torch.device) -> dict[str, Any]:
    """Only sm_80 SASS, device sm_89 (Ada: L4 / RTX 40xx).

    Rule: same major, higher minor runs the cubin [BWCOMPAT].
    Expected: LEGAL."""
    return _cuda("13.0", *_R580, [8, 9], ["sm_80"])


def ptx_compute90_on_sm100(device: torch.device) -> dict[str, Any]:
    """SASS for 8.0/9.0 plus compute_90 PTX, device sm_100 (B200), driver 580.

    Rule: no SASS applies across majors, but non-suffixed PTX is forward compatible to any
    higher CC, "including compute capability 10.0" -- the driver JIT-compiles it
    [BWCOMPAT], [NVCC]. Expected: LEGAL (slower first launch, but it runs)."""
    return _cuda("13.0", *_R580, [10, 0], ["sm_80", "sm_90", "compute_90"])


def ptx_compute90_on_sm120(device: torch.device) -> dict[str, Any]:
    """SASS for 8.0/9.0 plus compute_90 PTX, device sm_120 (RTX 50xx), driver 580.

    Rule: plain PTX JITs to any later major [BWCOMPAT]. Expected: LEGAL."""
    return _cuda("13.0", *_R580, [12, 0], ["sm_80", "sm_90", "compute_90"])


def family_sm100f_on_sm103(device: torch.device) -> dict[str, Any]:
    """Only sm_100f (family-specific) SASS, device sm_103 (B300 / GB300), CUDA 13.0.

    Rule: family-specific targets (CUDA 12.9+) run on the same major CC with an equal or
    higher minor: compute_100f / sm_100f cover 10.0 and 10.3 [PG-FEAT], [BLOG-F].
    Expected: LEGAL."""
    return _cuda("13.0", *_R580, [10, 3], ["sm_100f"])


def family_sm120f_on_sm121(device: torch.device) -> dict[str, Any]:
    """Only sm_120f SASS, device sm_121 (GB10 / DGX Spark), CUDA 13.0.

    Rule: sm_120f covers 12.0 and 12.1 [BLOG-F], [PG-FEAT]. Expected: LEGAL."""
    return _cuda("13.0", *_R580, [12, 1], ["sm_120f"])


def arch_sm90a_on_sm90(device: torch.device) -> dict[str, Any]:
    """Only sm_90a (architecture-specific) SASS, device sm_90 (H100).

    Rule: "a" code runs on exactly the CC it names [PG-FEAT], [NVCC]; 9.0 == 9.0.
    Expected: LEGAL."""
    return _cuda("13.0", *_R580, [9, 0], ["sm_90a"])


def arch_sm100a_on_sm100(device: torch.device) -> dict[str, Any]:
    """sm_90a and sm_100a SASS, device sm_100 (B200).

    Rule: sm_100a on exactly CC 10.0 [PG-FEAT]. Expected: LEGAL."""
    return _cuda("13.0", *_R580, [10, 0], ["sm_90a", "sm_100a"])


def rocm_gfx942_target_id(device: torch.device) -> dict[str, Any]:
    """ROCm build with gfx90a and gfx942 code objects on an MI300X reporting the full target
    ID ``gfx942:sramecc+:xnack-``.

    Rule: the processor is the part before the first ':'; ``sramecc+``/``xnack-`` are
    target-ID feature settings of that processor, and code built for plain ``gfx942``
    (feature "any") loads under either setting [AMDGPU]. Expected: LEGAL."""
    return _rocm(["gfx90a", "gfx942"], "gfx942:sramecc+:xnack-")


def rocm_gfx942_plain(device: torch.device) -> dict[str, Any]:
    """ROCm build with gfx942 in the list, device gcn_arch plain ``gfx942``.

    Rule: same processor [AMDGPU]. Expected: LEGAL."""
    return _rocm(["gfx90a", "gfx942", "gfx1100"], "gfx942")


def cpu_only(device: torch.device) -> dict[str, Any]:
    """A CPU-only build: no CUDA, no HIP, no device.

    Rule: nothing GPU-side to check; a CPU wheel is a valid build. Expected: LEGAL."""
    return {"torch": _TORCH, "cuda": None, "hip": None, "cudnn": None, "nccl": None,
            "driver": None, "arch_list": [], "capability": None, "gcn_arch": None,
            "dsa": False, "blas": None}


# ------------------------------------------------------------------------------- ILLEGAL


def ptx_compute90a_only_on_sm100(device: torch.device) -> dict[str, Any]:
    """Only compute_90a (architecture-specific PTX), device sm_100.

    Rule: "a" PTX is not forward compatible; it cannot be JIT-compiled for any CC other than
    9.0 [PG-FEAT], [BLOG-F]. Expected: ILLEGAL (no kernel image)."""
    return _cuda("13.0", *_R580, [10, 0], ["compute_90a"])


def ptx_compute90a_only_on_sm120(device: torch.device) -> dict[str, Any]:
    """Only compute_90a PTX, device sm_120.

    Rule: as above [PG-FEAT], [BLOG-F]. Expected: ILLEGAL."""
    return _cuda("13.0", *_R580, [12, 0], ["compute_90a"])


def arch_sm90a_on_sm100(device: torch.device) -> dict[str, Any]:
    """Only sm_90a SASS, device sm_100.

    Rule: "a" SASS runs only on its exact CC, and no SASS crosses majors [PG-FEAT],
    [BWCOMPAT]. Expected: ILLEGAL."""
    return _cuda("13.0", *_R580, [10, 0], ["sm_90a"])


def arch_sm100a_on_sm103(device: torch.device) -> dict[str, Any]:
    """Only sm_100a SASS, device sm_103.

    Rule: architecture-specific code does not run on a later minor of the same major (unlike
    plain and "f" SASS); only the exact CC [PG-FEAT], [BLOG-F]. Expected: ILLEGAL."""
    return _cuda("13.0", *_R580, [10, 3], ["sm_100a"])


def family_sm100f_on_sm120(device: torch.device) -> dict[str, Any]:
    """Only sm_100f SASS, device sm_120.

    Rule: a family-specific target covers its own major only (10.x), not 12.x [PG-FEAT],
    [BLOG-F]. Expected: ILLEGAL."""
    return _cuda("13.0", *_R580, [12, 0], ["sm_100f"])


def sass_sm86_on_sm80(device: torch.device) -> dict[str, Any]:
    """Only sm_86 SASS, device sm_80 (A100).

    Rule: "a cubin generated for compute capability 8.6 is not supported to run on a GPU with
    compute capability 8.0" [BWCOMPAT]. Expected: ILLEGAL."""
    return _cuda("13.0", *_R580, [8, 0], ["sm_86"])


def sass_sm90_on_sm100(device: torch.device) -> dict[str, Any]:
    """SASS for 8.0 and 9.0 only, no PTX, device sm_100.

    Rule: cubins do not cross majors [BWCOMPAT]. Expected: ILLEGAL."""
    return _cuda("13.0", *_R580, [10, 0], ["sm_80", "sm_90"])


def runtime13_on_535(device: torch.device) -> dict[str, Any]:
    """CUDA 13.0 runtime on driver 535.104.05 (reports 12.2), H100 with sm_90 SASS.

    Rule: CUDA 13.x needs a driver >= 580; minor-version compatibility only spans one major
    release [COMPAT]. Expected: ILLEGAL (cudaErrorInsufficientDriver)."""
    return _cuda("13.0", *_R535, [9, 0], _CU130_ARCHES)


def runtime128_on_driver118(device: torch.device) -> dict[str, Any]:
    """CUDA 12.8 runtime on driver 520.61.05 (reports 11.8), A100 with sm_80 SASS.

    Rule: CUDA 12.x needs a driver >= 525 [COMPAT]; an 11.x driver is a major below.
    Expected: ILLEGAL."""
    return _cuda("12.8", *_R520, [8, 0], _CU128_ARCHES)


def rocm_gfx90a_only_on_gfx942(device: torch.device) -> dict[str, Any]:
    """ROCm build with gfx90a code objects only, device ``gfx942:sramecc+:xnack-``.

    Rule: AMDGPU code objects are per processor; a gfx90a object does not load on gfx942
    [AMDGPU]. Expected: ILLEGAL (hipErrorNoBinaryForGpu)."""
    return _rocm(["gfx90a"], "gfx942:sramecc+:xnack-")


LEGAL = (minor_compat_128_on_535, minor_compat_128_on_525, runtime12_on_driver580,
         runtime13_on_580, runtime13_on_590, sass_sm80_on_sm86, sass_sm80_on_sm89,
         ptx_compute90_on_sm100, ptx_compute90_on_sm120, family_sm100f_on_sm103,
         family_sm120f_on_sm121, arch_sm90a_on_sm90, arch_sm100a_on_sm100,
         rocm_gfx942_target_id, rocm_gfx942_plain, cpu_only)

ILLEGAL = (ptx_compute90a_only_on_sm100, ptx_compute90a_only_on_sm120, arch_sm90a_on_sm100,
           arch_sm100a_on_sm103, family_sm100f_on_sm120, sass_sm86_on_sm80, sass_sm90_on_sm100,
           runtime13_on_535, runtime128_on_driver118, rocm_gfx90a_only_on_gfx942)

for _f in (*LEGAL, *ILLEGAL):
    _f.conformance_name = _f.__name__  # type: ignore[attr-defined]
