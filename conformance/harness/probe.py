"""Resolve ``--device``, probe the live device's capability tags, capture the environment."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

import torch

from conformance.harness.deps import probe_cute_dsl, probe_tags
from conformance.harness.errors import ConfigError

DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps", "xpu")
# Optional packages whose presence becomes a capability tag (tag -> import name).
OPTIONAL_PACKAGES = {
    "triton": "triton",
    "cutlass-dsl": "cutlass",
    "flash-attn-4": "flash_attn",
    "executorch": "executorch",  # whether it loads: the export case says (skipped, why)
}
DISTRIBUTIONS = ("numpy", "scipy", "hypothesis", "pytest", "pytest-xdist", "triton",
                 "nvidia-cutlass-dsl", "flash-attn-4", "executorch")


@dataclass(frozen=True)
class DeviceInfo:
    kind: str  # torch's device type: cpu | cuda | mps | xpu
    matrix_key: str  # cpu | cuda | rocm | mps | xpu
    torch_device: str  # e.g. "cuda:1"
    name: str
    tags: frozenset[str] = field(default_factory=frozenset)
    details: dict[str, Any] = field(default_factory=dict)
    absent: dict[str, str] = field(default_factory=dict)  # probed tag -> why it is absent
    index: int | None = None  # the GPU's index (cuda / xpu), None elsewhere
    pinned: bool = False  # --device=KIND:N: every xdist worker on GPU N
    spread: tuple[int, ...] = ()  # --device=KIND under xdist: the GPUs the workers take


def _available(kind: str) -> bool:
    if kind == "cpu":
        return True
    if kind == "cuda":
        return torch.cuda.is_available()
    if kind == "mps":
        return bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    if kind == "xpu":
        return hasattr(torch, "xpu") and torch.xpu.is_available()
    return False


def _auto() -> str:
    for kind in ("cuda", "xpu", "mps"):
        if _available(kind):
            return kind
    return "cpu"


def _worker_index() -> int:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    match = re.fullmatch(r"gw(\d+)", worker)
    return int(match.group(1)) if match else 0


def blas_info() -> dict[str, str]:
    """BLAS/LAPACK/oneDNN facts from torch's build configuration."""
    config = torch.__config__.show()
    out: dict[str, str] = {}
    for key in ("BLAS_INFO", "LAPACK_INFO", "USE_MKLDNN", "USE_OPENMP"):
        match = re.search(rf"\b{key}=([^,\s]+)", config)
        if match:
            out[key] = match.group(1)
    match = re.search(r"CPU capability usage: (\S+)", config)
    if match:
        out["CPU_CAPABILITY"] = match.group(1)
    return out


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# How to get each optional package; an extra built against one torch release says which.
INSTALL_HINTS = {
    "triton": "pip install triton",
    "cutlass-dsl": "pip install -e '.[cute]'",
    "flash-attn-4": "pip install -e '.[cute]'",
    "executorch": "pip install -e '.[executorch]'",
}
# extra -> (the torch releases it is built for, why): elsewhere its cases are skipped saying so
TORCH_PINNED_EXTRAS = {
    "executorch": ("==2.13.*", "executorch 1.5.1 is built against torch 2.13: its runtime "
                               "extension loads with torch 2.13 only"),
}


def _absent_reason(tag: str, mod: str) -> str:
    why = f"package {mod} is not installed ({INSTALL_HINTS.get(tag, 'pip install ' + mod)})"
    if tag in TORCH_PINNED_EXTRAS:
        from packaging.specifiers import SpecifierSet
        from packaging.version import Version

        spec, because = TORCH_PINNED_EXTRAS[tag]
        here = Version(torch.__version__.split("+")[0])
        if not SpecifierSet(spec).contains(here, prereleases=True):
            why = (f"package {mod} is not installed, and its extra needs torch{spec}, not "
                   f"torch {torch.__version__} ({because}); run it in a torch{spec} venv")
    return why


def _package_tags() -> tuple[set[str], dict[str, str]]:
    present = {tag for tag, mod in OPTIONAL_PACKAGES.items() if importlib.util.find_spec(mod)}
    absent = {tag: _absent_reason(tag, mod)
              for tag, mod in OPTIONAL_PACKAGES.items() if tag not in present}
    if "cutlass-dsl" in present:  # only where cutlass.cute imports (deps.probe_cute_dsl)
        why = probe_cute_dsl()
        if why is not None:
            present.discard("cutlass-dsl")
            absent["cutlass-dsl"] = why
            if "flash-attn-4" in present:  # flash_attn.cute is written in the CuTe DSL
                present.discard("flash-attn-4")
                absent["flash-attn-4"] = f"flash_attn.cute needs cutlass.cute: {why}"
    probed, failed = probe_tags()
    return present | probed, {**absent, **failed}


INDEXED_KINDS = ("cuda", "xpu")  # the kinds --device=KIND:N takes
TORCHRUN_ENV = "CONFORMANCE_TORCHRUN"  # conformance.processes.torchrun.ENV (a lower layer)


def parse_device(requested: str) -> tuple[str, int | None]:
    """``--device`` as (kind, index): ``cuda`` -> ("cuda", None), ``cuda:1`` -> ("cuda", 1);
    ConfigError (one line) for an unknown kind, an index a kind does not take, a bad index."""
    kind, sep, text = requested.partition(":")
    if kind not in DEVICE_CHOICES:
        raise ConfigError(f"--device: unknown device {requested!r} (expected one of: "
                          f"{', '.join(DEVICE_CHOICES)}); cuda:N / xpu:N name GPU N")
    if not sep:
        return kind, None
    if kind not in INDEXED_KINDS:
        raise ConfigError(f"--device={requested}: {kind} takes no device index (use "
                          f"--device={kind}; an index is for cuda:N and xpu:N)")
    if not text.isdigit() or not text.isascii():
        raise ConfigError(f"--device={requested}: the device index must be a whole number "
                          f">= 0, e.g. --device={kind}:1")
    return kind, int(text)


def _device_count(kind: str) -> int:
    return int(getattr(torch, kind).device_count()) if kind in INDEXED_KINDS else 0


def _check_index(kind: str, index: int) -> None:
    count = _device_count(kind)
    if index >= count:
        held = f"indices 0-{count - 1}" if count > 1 else "index 0" if count else "none"
        visible = "CUDA_VISIBLE_DEVICES" if kind == "cuda" else "ZE_AFFINITY_MASK"
        raise ConfigError(f"--device={kind}:{index}: this host has {count} {kind} "
                          f"device{'s' * (count != 1)} ({held}; {visible} narrows them)")
    if os.environ.get(TORCHRUN_ENV):
        raise ConfigError(f"--device={kind}:{index}: under torchrun each rank uses its "
                          f"LOCAL_RANK's device: give --device={kind}")


def xdist_workers(opt: Any) -> int:
    """How many xdist workers this controller starts (1 without xdist, and in a worker)."""
    if os.environ.get("PYTEST_XDIST_WORKER") or getattr(opt, "dist", "no") == "no":
        return 1
    return max(1, len(getattr(opt, "tx", None) or ()))


def resolve_device(requested: str, workers: int = 1) -> DeviceInfo:
    """Turn ``--device`` into a DeviceInfo; ConfigError (one line) if unknown/unavailable.

    ``cuda:N`` / ``xpu:N`` pins this process and every xdist worker to GPU N; ``cuda`` /
    ``xpu`` alone is device 0, and under xdist each worker takes device ``gwK mod count``
    (``workers``, the controller's worker count, says which devices the run spans)."""
    kind, explicit = parse_device(requested)
    kind = _auto() if kind == "auto" else kind
    if not _available(kind):
        raise ConfigError(
            f"--device={requested if explicit is not None else kind}: no {kind} device is "
            f"available to this torch {torch.__version__} build (use --device=auto or "
            "--device=cpu)"
        )
    if explicit is not None:
        _check_index(kind, explicit)
    package_tags, absent = _package_tags()
    tags = {kind, *package_tags}
    details: dict[str, Any] = {}
    blas = blas_info()
    if "BLAS_INFO" in blas:
        tags.add(f"blas:{blas['BLAS_INFO']}")
    if torch.backends.mkldnn.is_available():
        tags.add("mkldnn")
    matrix_key, index, name = kind, None, _cpu_name()
    spread: tuple[int, ...] = ()
    if kind in INDEXED_KINDS:
        count = max(_device_count(kind), 1)
        index = explicit if explicit is not None else _worker_index() % count
        if explicit is None and workers > 1 and count > 1:
            spread = tuple(sorted({w % count for w in range(workers)}))
    if kind == "cuda":
        props = torch.cuda.get_device_properties(index)
        name = props.name
        details["memory_bytes"] = int(props.total_memory)
        details["multiprocessors"] = int(props.multi_processor_count)
        if torch.version.hip:
            matrix_key = "rocm"
            tags.add("hip")
            arch = getattr(props, "gcnArchName", "") or ""
            if arch:
                tags.add(arch.split(":")[0])
                details["arch"] = arch
        else:
            major, minor = props.major, props.minor
            tags.add(f"sm{major}{minor}")
            details["compute_capability"] = f"{major}.{minor}"
    elif kind == "xpu":
        props = torch.xpu.get_device_properties(index)
        name = props.name
        details["memory_bytes"] = int(getattr(props, "total_memory", 0))
    elif kind == "mps":
        name = f"Apple GPU ({platform.machine()})"
    torch_device = f"{kind}:{index}" if index is not None else kind
    if index is not None:
        getattr(torch, kind).set_device(index)
    return DeviceInfo(kind, matrix_key, torch_device, name, frozenset(tags), details, absent,
                      index=index, pinned=explicit is not None, spread=spread)


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def matmul_settings() -> dict[str, Any]:
    """Global switches that change what a matmul computes (TF32, reduced-precision
    reductions); a GEMM result is only meaningful next to them."""
    cuda = torch.backends.cuda.matmul
    return {
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "cuda_allow_tf32": bool(cuda.allow_tf32),
        "cuda_allow_fp16_reduced_precision_reduction":
            bool(cuda.allow_fp16_reduced_precision_reduction),
        "cuda_allow_bf16_reduced_precision_reduction":
            bool(cuda.allow_bf16_reduced_precision_reduction),
        "cudnn_allow_tf32": bool(torch.backends.cudnn.allow_tf32),
    }


def _driver_version(info: DeviceInfo) -> str | None:
    """The GPU driver's version (nvidia-smi / rocm-smi), or None off GPUs or without them."""
    if info.kind != "cuda":
        return None
    tool = ["rocm-smi", "--showdriverversion"] if torch.version.hip else [
        "nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
    try:
        proc = subprocess.run(tool, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    if proc.returncode != 0 or not lines:
        return None
    match = re.search(r"\d+(\.\d+)+", lines[-1] if torch.version.hip else lines[0])
    return match.group(0) if match else lines[0]


def environment(info: DeviceInfo) -> dict[str, Any]:
    """Everything a reader of a report needs to know about where it ran: for a GPU its
    identity too (index, UUID, PCI address, driver, VBIOS: ``harness/gpu.py``), and under
    ``--device=cuda`` with xdist workers spread over several GPUs, each one's (``gpus``)."""
    driver = _driver_version(info)
    gpu: dict[str, Any] = {}
    gpus = None
    if info.index is not None:
        from conformance.harness.gpu import identity

        gpu = identity(info.kind, info.index)
        if info.spread:
            gpus = [gpu if i == info.index else identity(info.kind, i) for i in info.spread]
    return {
        "device": {
            "requested_kind": info.kind,
            "matrix_key": info.matrix_key,
            "torch_device": info.torch_device,
            "name": info.name,
            "tags": sorted(info.tags),
            "absent_tags": dict(sorted(info.absent.items())),
            "index": info.index,
            "pinned": info.pinned,
            **info.details,
            **{k: v for k, v in gpu.items()
               if k != "name" and (v is not None or k not in info.details)},
        },
        "gpus": gpus,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": torch.version.hip,
        "cuda_driver": driver,
        "blas": blas_info(),
        "matmul_settings": matmul_settings(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": _cpu_name(),
        "cpu_count": os.cpu_count(),
        "packages": {d: v for d in DISTRIBUTIONS if (v := _dist_version(d))},
        "device_side_assertions": device_side_assertions(),
        "torchscript": _torchscript(),
    }


def _torchscript() -> dict[str, Any]:
    from conformance.harness.probes.torchscript import status

    return status()


def device_side_assertions() -> dict[str, Any]:
    """What is known before any assertion fails: the build kind, the runtime switch
    ``PYTORCH_USE_CUDA_DSA`` and (ROCm) whether kernel asserts are compiled in. torch has no
    API for TORCH_USE_CUDA_DSA: the device_assert area's messages reveal it (``observed``,
    filled in by the report)."""
    out: dict[str, Any] = {"runtime_switch": os.environ.get("PYTORCH_USE_CUDA_DSA"),
                           "observed": None}
    if not (torch.version.cuda or torch.version.hip):
        out["build"] = "not applicable (no CUDA or HIP in this build)"
    else:
        out["build"] = "HIP" if torch.version.hip else "CUDA"
        if torch.version.hip:
            show = torch.__config__.show()
            out["rocm_kernel_assert"] = "USE_ROCM_KERNEL_ASSERT=ON" in show or \
                "USE_ROCM_KERNEL_ASSERT=1" in show
    return out
