"""Toolchain facts derived from a build probe (impls/toolchain.py), the rules that judge them,
and the requirements a device matrix states on them (docs/areas/toolchain.md has the rules
with their sources).

CUDA arch list (a device of compute capability M.m):
- ``sm_XY`` SASS runs on the same major at a minor >= Y; ``sm_XYf`` (family-specific) the
  same; ``sm_XYa`` (architecture-specific) only on exactly X.Y;
- ``compute_XY`` PTX JIT-compiles for any capability >= X.Y; ``compute_XYf`` for the same
  major at a minor >= Y; ``compute_XYa`` only for exactly X.Y. PTX made by CUDA X.y needs a
  driver whose CUDA API is >= X.y (minor-version compatibility does not cover the JIT).
Without a matching entry every launch fails with "no kernel image is available".

ROCm: the processor of the device's target ID (``gfx942`` of ``gfx942:sramecc+:xnack-``)
must have a code object in the list (its own, or a generic target's that lists it), and a
feature the code object fixes (``xnack+``) must agree with the device's setting.

Driver: a CUDA X.y runtime is served by any driver >= the minimum of its major (minor-version
compatibility: 13.x >= 580, 12.x >= 525, 11.x >= 450; Linux branch numbers), which a newer
major's driver always is; judged on the NVIDIA driver number when the probe has it, on the
driver's CUDA API version otherwise (same or newer major: served).
"""

from __future__ import annotations

import re
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

MIN_DRIVER = {13: 580, 12: 525, 11: 450}
VERSION_KEYS = ("torch", "cuda", "hip", "cudnn", "nccl", "driver", "driver_version")
NO_IMAGE = "every kernel launch fails with 'no kernel image is available'"

# LLVM AMDGPUUsage, "AMDGPU Generic Processors": the processors each generic target runs on
GENERIC_TARGETS = {
    "gfx9-generic": ("gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"),
    "gfx9-4-generic": ("gfx940", "gfx941", "gfx942", "gfx950"),
    "gfx10-1-generic": ("gfx1010", "gfx1011", "gfx1012", "gfx1013"),
    "gfx10-3-generic": ("gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035",
                        "gfx1036"),
    "gfx11-generic": ("gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151",
                      "gfx1152", "gfx1153"),
    "gfx12-generic": ("gfx1200", "gfx1201"),
}


def version_of(text: Any) -> Version | None:
    """A version from a build's version string: ``2.13.0+cu130`` -> 2.13.0 (local part
    dropped), ``7.1.25424-4179531dcd`` (HIP) -> 7.1.25424; None if there is none."""
    if text is None:
        return None
    try:
        v = Version(str(text))
        return Version(v.public)
    except InvalidVersion:
        m = re.match(r"\d+(\.\d+)*", str(text).strip())
        return Version(m.group(0)) if m else None


# ------------------------------------------------------------------------------ CUDA targets

def cuda_target(arch: str) -> tuple[str, int, int, str] | None:
    """``sm_100f`` -> ("sm", 10, 0, "f"); None for anything that is not a CUDA target."""
    m = re.fullmatch(r"(sm|compute)_(\d+)(\d)([af]?)", arch.strip())
    return None if m is None else (m.group(1), int(m.group(2)), int(m.group(3)), m.group(4))


def target_runs_on(arch: str, capability: list[int] | tuple[int, int]) -> bool | None:
    """Whether code for ``arch`` runs on a device of ``capability`` (SASS as is, PTX after
    the driver's JIT); None when ``arch`` is not a CUDA target."""
    parsed = cuda_target(arch)
    if parsed is None:
        return None
    kind, major, minor, suffix = parsed
    cap = (int(capability[0]), int(capability[1]))
    if suffix == "a":                      # architecture-specific: that capability only
        return (major, minor) == cap
    if suffix == "f" or kind == "sm":      # family-specific, or SASS: the same major
        return major == cap[0] and minor <= cap[1]
    return (major, minor) <= cap           # plain PTX: any later capability


def _ptx_jit_blocked(runtime: str | None, driver: str | None) -> str | None:
    """Why the driver cannot JIT the build's PTX (None: it can, or it is not known)."""
    built, api = version_of(runtime), version_of(driver)
    if built is None or api is None:
        return None
    need = Version(f"{built.major}.{built.minor}")
    if api >= need:
        return None
    return (f"PTX made by CUDA {need} needs a driver of CUDA >= {need} to JIT-compile (minor-"
            f"version compatibility does not cover PTX JIT: cudaErrorUnsupportedPtxVersion); "
            f"this driver's CUDA API is {driver}, so every kernel launch fails")


def _cuda_covers(arch_list: list[str], capability: list[int], runtime: str | None,
                 driver: str | None) -> tuple[bool | None, str]:
    dev = f"sm_{capability[0]}{capability[1]}"
    known = [a for a in arch_list if cuda_target(a)]
    if not known:
        return None, f"no CUDA target understood in the arch list {arch_list} (not judged)"
    sass = [a for a in known if a.startswith("sm_") and target_runs_on(a, capability)]
    if sass:
        return True, f"SASS {sass[0]} runs on {dev}"
    ptx = [a for a in known if a.startswith("compute_") and target_runs_on(a, capability)]
    if ptx:
        blocked = _ptx_jit_blocked(runtime, driver)
        if blocked is None:
            return True, f"PTX {ptx[0]} JIT-compiles for {dev}"
        return False, f"only PTX ({', '.join(ptx)}) covers {dev}, and {blocked}"
    major, minor = capability
    return False, (f"nothing in the arch list {arch_list} runs on {dev} (SASS sm_{major}y or "
                   f"sm_{major}yf with y <= {minor}, or sm_{dev[3:]}a; PTX compute_XY with X.Y <= "
                   f"{major}.{minor}, compute_{major}yf with y <= {minor}, or compute_{dev[3:]}a): "
                   f"{NO_IMAGE}")


# ------------------------------------------------------------------------------ ROCm targets

def rocm_target(target_id: str) -> tuple[str, dict[str, str]]:
    """``gfx942:sramecc+:xnack-`` -> ("gfx942", {"sramecc": "+", "xnack": "-"}) (LLVM
    AMDGPUUsage "Target ID": processor, then feature settings; a feature left out is "any")."""
    proc, *features = target_id.strip().split(":")
    settings = {}
    for f in features:
        if f[-1:] in "+-" and len(f) > 1:
            settings[f[:-1]] = f[-1]
    return proc, settings


def _rocm_covers(arch_list: list[str], gcn_arch: str) -> tuple[bool | None, str]:
    proc, have = rocm_target(gcn_arch)
    mismatched, unknown = [], []
    for entry in arch_list:
        eproc, fixed = rocm_target(entry)
        if eproc != proc and proc not in GENERIC_TARGETS.get(eproc, ()):
            if eproc.endswith("-generic") and eproc not in GENERIC_TARGETS:
                unknown.append(entry)
            continue
        clash = [f"{f}{s}" for f, s in fixed.items() if f in have and have[f] != s]
        if not clash:
            return True, f"{entry} loads on {gcn_arch} (processor {proc})"
        mismatched.append(f"{entry} (device has {', '.join(f + have[f] for f in fixed)})")
    if unknown:
        return None, (f"no code object for {proc} except possibly the generic target(s) "
                      f"{unknown}, whose processors this suite does not know (not judged)")
    why = f"no code object in {arch_list} loads on {gcn_arch} (processor {proc})"
    if mismatched:
        why += f"; feature settings differ: {'; '.join(mismatched)}"
    return False, why + ": every kernel launch fails (hipErrorNoBinaryForGpu)"


def arch_covers(arch_list: list[str], capability: list[int] | None, gcn_arch: str | None,
                runtime: str | None = None, driver: str | None = None
                ) -> tuple[bool | None, str]:
    """(covered, why); None when there is no GPU to cover or the list cannot be judged.
    ``runtime`` / ``driver`` (CUDA versions of the build and of the driver's API) judge
    whether PTX can be JIT-compiled when only PTX covers the device."""
    if not gcn_arch and not capability:
        return None, "no GPU device"
    if not arch_list:
        return None, "the build reports no arch list (not judged)"
    if gcn_arch:
        return _rocm_covers(arch_list, gcn_arch)
    return _cuda_covers(arch_list, list(capability), runtime, driver)


# ------------------------------------------------------------------------------------ driver

def _branch(driver_version: Any) -> int | None:
    """The NVIDIA driver branch: 535 of "535.104.05"."""
    m = re.match(r"\s*(\d+)", str(driver_version)) if driver_version is not None else None
    return int(m.group(1)) if m else None


def driver_serves(cuda: str | None, driver: str | None, driver_version: str | None = None
                  ) -> tuple[bool | None, str]:
    """Whether the driver serves the build's CUDA runtime. By the driver's CUDA API version
    (``driver``, e.g. "12.2", what the runtime itself checks): the runtime's major or newer
    (from CUDA 11; before, at least the runtime's version). Without it, by the NVIDIA driver
    number (``driver_version``, e.g. "535.104.05"): >= the minimum of the runtime's major.
    Where both are known and only the number falls short, a forward-compatibility package
    (cuda-compat: a newer user-mode driver on an older kernel driver) serves the runtime, and
    the API version says so. None when the runtime or both driver versions are unknown."""
    runtime = version_of(cuda)
    if runtime is None:
        return None, "no CUDA runtime"
    major, minimum, branch = runtime.major, MIN_DRIVER.get(runtime.major), _branch(driver_version)
    by_number = None if branch is None or minimum is None else branch >= minimum
    api = version_of(driver)
    if api is None:
        if by_number is None:
            return None, f"no driver version known (CUDA {cuda} runtime; not judged)"
        return by_number, (f"NVIDIA driver {driver_version} "
                           f"{'serves' if by_number else 'is too old for'} the build's CUDA "
                           f"{cuda} runtime (CUDA {major}.x needs a driver >= {minimum}"
                           + ("" if by_number else "; cudaErrorInsufficientDriver") + ")")
    need = Version(f"{major}") if major >= 11 else Version(f"{major}.{runtime.minor}")
    ok = Version(f"{api.major}") >= need if major >= 11 else api >= need
    which = f"the driver (CUDA API {driver}" + (f", {driver_version})" if driver_version else ")")
    if ok:
        how = ("forward compatibility: the kernel driver is below the major's minimum "
               f"{minimum}, a newer user-mode driver serves" if by_number is False else
               "a newer major's driver" if api.major > major else
               "minor-version compatibility" if api < runtime else "a driver at least as new")
        return True, f"{which} serves the build's CUDA {cuda} runtime ({how})"
    return False, (f"{which} cannot serve the build's CUDA {cuda} runtime (it needs a CUDA "
                   f"{need} driver or newer"
                   + (f", >= {minimum}" if minimum else "") + "): cudaErrorInsufficientDriver")


def derived(facts: dict[str, Any]) -> dict[str, Any]:
    """The facts the checks and the matrix's requirements use, derived from a probe's."""
    covered, why = arch_covers(facts.get("arch_list") or [], facts.get("capability"),
                               facts.get("gcn_arch"), facts.get("cuda"), facts.get("driver"))
    served, how = driver_serves(facts.get("cuda"), facts.get("driver"),
                                facts.get("driver_version"))
    out = {"arch_covers_device": covered, "arch_coverage": why,
           "driver_serves_runtime": served, "driver_check": how}
    if facts.get("gcn_arch"):
        out["gcn_processor"], out["gcn_features"] = rocm_target(facts["gcn_arch"])
    return out


# -------------------------------------------------------------------------- CPU half GEMM

# Rows of a (16, 4096) x (4096, 16) GEMM whose float32 (or wider) accumulation is exact in
# any order, with a float16 / bfloat16 output (impls/toolchain.py, half_gemm_sums):
# "ones": 4096 ones sum to 4096; a float16 accumulator stalls at 2048, a bfloat16 one at 256.
# "one_plus_tiny": 1 + 4095 * 2**-12 = 2 - 2**-12, which the output rounds to 2.0; an
# accumulator in the half type keeps 1 + 2**-12 = 1 (sequentially), or drops a block's tail.
HALF_GEMM_EXPECTED = {"ones": 4096.0, "one_plus_tiny": 2.0}
HALF_ACCUMULATOR = {"float16": {"ones": 2048.0, "one_plus_tiny": 1.0},
                    "bfloat16": {"ones": 256.0, "one_plus_tiny": 1.0}}


def half_gemm_failures(sums: dict[str, dict[str, float]]) -> list[str]:
    """One line per dtype and case whose measured sum differs from float32 accumulation."""
    out = []
    for dtype, got in sorted(sums.items()):
        for case, want in HALF_GEMM_EXPECTED.items():
            have = got.get(case)
            if have != want:
                tell = HALF_ACCUMULATOR.get(dtype, {}).get(case)
                out.append(f"{dtype} {case}: {have}, float32 accumulation gives {want}"
                           + (f" ({have} is what a {dtype} accumulator gives)"
                              if have == tell else ""))
    return out


# ---------------------------------------------------------------------------- requirements

def requirement_failures(required: dict[str, Any], facts: dict[str, Any]) -> list[str]:
    """One line per requirement of the matrix the facts violate. Version keys take a
    specifier (pre-releases and nightlies included: ``>=2.11`` admits 2.14.0.dev);
    others must equal the fact."""
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
            version = version_of(have)
            if version is None:
                out.append(f"{key} {want} required; version {have!r} not understood")
            elif not spec.contains(version, prereleases=True):
                out.append(f"{key} {want} required; this build has {have}")
        elif have != want:
            why = facts.get({"arch_covers_device": "arch_coverage",
                             "driver_serves_runtime": "driver_check"}.get(key, ""))
            out.append(f"{key} = {want} required; this build has {have}"
                       + (f" ({why})" if why else ""))
    return out
