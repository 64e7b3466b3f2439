"""Toolchain facts derived from a build probe (impls/toolchain.py), and the requirements a
device matrix states on them.

Architecture coverage (CUDA): a device of compute capability (M, m) runs a build's kernels
if the arch list holds SASS for the same major at a minor <= m (``sm_Mk``, k <= m; the
arch-specific ``sm_90a`` / ``sm_100a`` variants only on that exact capability), or PTX it can
JIT (``compute_XY`` with (X, Y) <= (M, m)); otherwise every kernel launch fails with "no
kernel image is available for execution on the device". ROCm: the device's gfx target must
be in the list. Minimum drivers for a CUDA runtime (NVIDIA's compatibility table, Linux):
CUDA 13.x >= 580, 12.x >= 525, 11.x >= 450.
"""

from __future__ import annotations

import re
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

MIN_DRIVER = {13: 580, 12: 525, 11: 450}
VERSION_KEYS = ("torch", "cuda", "hip", "cudnn", "nccl", "driver")


def arch_covers(arch_list: list[str], capability: list[int] | None, gcn_arch: str | None
                ) -> tuple[bool | None, str]:
    """(covered, why); None when there is no GPU to cover."""
    if gcn_arch:
        ok = gcn_arch in arch_list
        return ok, f"{gcn_arch} {'in' if ok else 'not in'} the arch list {arch_list}"
    if not capability:
        return None, "no GPU device"
    major, minor = capability
    for arch in arch_list:
        m = re.fullmatch(r"(sm|compute)_(\d+?)(\d)(a|f)?", arch)
        if not m:
            continue
        kind, a_major, a_minor, suffix = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        if kind == "sm" and a_major == major and (a_minor == minor if suffix else
                                                 a_minor <= minor):
            return True, f"SASS {arch} runs on sm_{major}{minor}"
        if kind == "compute" and (a_major, a_minor) <= (major, minor):
            return True, f"PTX {arch} JIT-compiles for sm_{major}{minor}"
    return False, (f"no SASS or PTX in the arch list {arch_list} for sm_{major}{minor}: "
                   f"every kernel fails with 'no kernel image is available'")


def driver_ok(cuda: str | None, driver: str | None) -> tuple[bool | None, str]:
    """Whether the driver serves the build's CUDA runtime: ``driver`` is the CUDA version
    of the driver API (torch's query, e.g. "13.0"; NVIDIA driver 580 gives 13.0), which
    must be at least the runtime's major.minor. None when either is unknown."""
    if not cuda or not driver:
        return None, "no CUDA runtime or no driver version"
    try:
        runtime = Version(".".join(cuda.split(".")[:2]))
        ok = Version(driver) >= runtime
    except InvalidVersion:
        return None, f"versions not understood (runtime {cuda!r}, driver {driver!r})"
    return ok, (f"the driver's CUDA {driver} {'covers' if ok else 'is older than'} the "
                f"build's CUDA {cuda} runtime"
                + ("" if ok else f" (CUDA {runtime.major} needs driver >= "
                                 f"{MIN_DRIVER.get(runtime.major, '?')})"))


def requirement_failures(required: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    """One line per requirement of the matrix the facts violate."""
    out = []
    for key, want in sorted(required.items()):
        have = facts.get(key)
        if key in VERSION_KEYS:
            try:
                spec = SpecifierSet(str(want))
            except InvalidSpecifier:
                out.append(f"{key}: {want!r} is not a version specifier")
                continue
            if have is None:
                out.append(f"{key} {want} required; this build has no {key}")
                continue
            try:
                ok = Version(str(have)) in spec
            except InvalidVersion:
                out.append(f"{key} {want} required; version {have!r} not understood")
                continue
            if not ok:
                out.append(f"{key} {want} required; this build has {have}")
        elif have != want:
            out.append(f"{key} = {want} required; this build has {have}")
    return out
