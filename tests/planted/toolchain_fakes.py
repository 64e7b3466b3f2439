"""Fake build probes for the toolchain area (``--impl toolchain=planted.toolchain_fakes:X``):
a CUDA build on an sm_86 device whose arch list lacks it (flagged), and its twin that has
SASS for sm_80 (which runs on sm_86: passes)."""

from __future__ import annotations

from typing import Any

import torch


def _build(arch_list: list[str]) -> dict[str, Any]:
    return {"torch": torch.__version__.split("+")[0], "cuda": "13.0", "hip": None,
            "cudnn": "9.13.0", "nccl": "2.27.7", "driver": "13.0", "arch_list": arch_list,
            "capability": [8, 6], "gcn_arch": None, "dsa": False, "blas": None}


def arch_dropped(device: torch.device) -> dict[str, Any]:
    """sm_86 is not covered: SASS for 9.0 and 10.0 only, no PTX."""
    return _build(["sm_90", "sm_100", "sm_120"])


def arch_covered(device: torch.device) -> dict[str, Any]:
    return _build(["sm_80", "sm_90", "sm_100", "sm_120"])


def old_driver(device: torch.device) -> dict[str, Any]:
    """A CUDA 13.0 runtime on a driver whose API is 12.8."""
    return {**_build(["sm_80"]), "driver": "12.8"}


for _f in (arch_dropped, arch_covered, old_driver):
    _f.conformance_name = _f.__name__  # type: ignore[attr-defined]
