"""The toolchain area's rules (conformance/areas/toolchain/facts.py): CUDA sm/compute targets
with the a/f suffixes, PTX JIT on the driver, ROCm target IDs, the driver against the CUDA
runtime (minor-version compatibility), the CPU half GEMM sums, the matrix's requirements.
The planted and blind environments through the suite: tests/test_toolchain_faults.py."""

from __future__ import annotations

import pytest

from conformance.areas.toolchain.facts import (
    arch_covers,
    driver_serves,
    half_gemm_failures,
    requirement_failures,
    rocm_target,
    target_runs_on,
    version_of,
)

pytestmark = pytest.mark.harness_only


@pytest.mark.parametrize("arch,cap,runs", [
    ("sm_80", [8, 0], True), ("sm_80", [8, 6], True), ("sm_80", [8, 9], True),
    ("sm_86", [8, 0], False), ("sm_80", [9, 0], False),          # SASS: same major, minor up
    ("sm_90a", [9, 0], True), ("sm_90a", [9, 1], False), ("sm_90a", [10, 0], False),
    ("sm_100a", [10, 3], False),                                   # 'a': exact capability only
    ("sm_100f", [10, 0], True), ("sm_100f", [10, 3], True), ("sm_103f", [10, 0], False),
    ("sm_100f", [12, 0], False), ("sm_120f", [12, 1], True),       # 'f': its major, minor up
    ("compute_90", [9, 0], True), ("compute_90", [10, 0], True), ("compute_90", [12, 1], True),
    ("compute_90", [8, 9], False),                                 # PTX: any later capability
    ("compute_90a", [9, 0], True), ("compute_90a", [10, 0], False),
    ("compute_90a", [12, 0], False),
    ("compute_100f", [10, 3], True), ("compute_100f", [12, 0], False),
    ("compute_103f", [10, 0], False),
    ("sm_121", [12, 1], True), ("sm_121", [12, 0], False),
    ("gfx942", [9, 0], None), ("sm_9x", [9, 0], None),
])
def test_target_runs_on(arch, cap, runs):
    assert target_runs_on(arch, cap) is runs


@pytest.mark.parametrize("arch_list,cap,covered", [
    (["sm_80", "sm_90"], [8, 6], True),
    (["sm_86"], [8, 0], False),
    (["sm_75", "compute_75"], [12, 0], True),   # PTX JIT
    (["sm_100", "sm_120"], [8, 9], False),
    (["sm_120"], [12, 1], True),
    (["compute_90a"], [10, 0], False),
    (["sm_100f"], [10, 3], True),
    ([], [9, 0], None),                         # no arch list: not judged
    (["weird"], [9, 0], None),                  # nothing understood: not judged
])
def test_arch_covers_cuda(arch_list, cap, covered):
    assert arch_covers(arch_list, cap, None)[0] is covered


def test_ptx_jit_needs_a_driver_as_new_as_the_ptx():
    """Minor-version compatibility serves a 12.8 runtime on a 12.2 driver, but that driver
    cannot JIT 12.8 PTX: a device covered by PTX only is not covered; SASS is unaffected."""
    assert arch_covers(["compute_80"], [8, 6], None, "12.8", "12.2")[0] is False
    assert "cudaErrorUnsupportedPtxVersion" in arch_covers(["compute_80"], [8, 6], None,
                                                           "12.8", "12.2")[1]
    assert arch_covers(["compute_80"], [8, 6], None, "12.8", "12.8")[0] is True
    assert arch_covers(["compute_80"], [8, 6], None, "12.8", "13.0")[0] is True
    assert arch_covers(["sm_80", "compute_80"], [8, 6], None, "12.8", "12.2")[0] is True
    assert arch_covers(["compute_80"], [8, 6], None, "12.8", None)[0] is True  # unknown


def test_rocm_target_ids():
    assert rocm_target("gfx942:sramecc+:xnack-") == ("gfx942", {"sramecc": "+", "xnack": "-"})
    assert rocm_target("gfx90a") == ("gfx90a", {})
    assert arch_covers(["gfx90a", "gfx942"], None, "gfx942")[0] is True
    assert arch_covers(["gfx90a", "gfx942"], None, "gfx942:sramecc+:xnack-")[0] is True
    assert arch_covers(["gfx90a"], None, "gfx942:sramecc+:xnack-")[0] is False
    assert arch_covers(["gfx90a"], None, "gfx1100")[0] is False
    # a code object fixing a feature loads only where the device has that setting
    assert arch_covers(["gfx90a:xnack+"], None, "gfx90a:sramecc+:xnack-")[0] is False
    assert arch_covers(["gfx90a:xnack-"], None, "gfx90a:sramecc+:xnack-")[0] is True
    assert arch_covers(["gfx90a:xnack+"], None, "gfx90a")[0] is True  # setting not reported
    # generic targets (LLVM AMDGPUUsage): the processors each lists
    assert arch_covers(["gfx9-4-generic"], None, "gfx942:sramecc+:xnack-")[0] is True
    assert arch_covers(["gfx11-generic"], None, "gfx942")[0] is False
    assert arch_covers(["gfx13-generic"], None, "gfx1300")[0] is None  # unknown generic
    assert arch_covers([], None, None)[0] is None


@pytest.mark.parametrize("cuda,driver,number,served", [
    ("12.8", "12.2", None, True),     # minor-version compatibility
    ("12.8", "12.0", None, True),
    ("12.8", "13.0", None, True),     # a newer major's driver
    ("13.0", "13.1", None, True),
    ("13.0", "12.8", None, False),    # an older major
    ("12.8", "11.8", None, False),
    ("12.8", None, "535.104.05", True),
    ("12.8", None, "525.60.13", True),
    ("12.8", None, "520.61.05", False),
    ("13.0", None, "575.57.08", False),
    ("13.0", None, "580.65.06", True),
    ("11.8", None, "450.80.02", True),
    ("13.0", "13.0", "535.104.05", True),   # forward compatibility (cuda-compat package)
    ("13.0", "12.2", "535.104.05", False),
    ("10.2", "10.1", None, False),          # before CUDA 11: no minor-version compatibility
    ("14.0", None, "600.1", None),          # a major without a known minimum: not judged
    (None, "13.0", "580.65.06", None),
    ("13.0", None, None, None),
])
def test_driver_serves(cuda, driver, number, served):
    assert driver_serves(cuda, driver, number)[0] is served


def test_version_of():
    assert str(version_of("2.13.0+cu130")) == "2.13.0"
    assert str(version_of("7.1.25424-4179531dcd")) == "7.1.25424"
    assert str(version_of("2.14.0.dev20260101")) == "2.14.0.dev20260101"
    assert version_of(None) is None and version_of("n/a") is None


def test_half_gemm_failures():
    good = {"float16": {"ones": 4096.0, "one_plus_tiny": 2.0},
            "bfloat16": {"ones": 4096.0, "one_plus_tiny": 2.0}}
    assert half_gemm_failures(good) == []
    bad = {**good, "float16": {"ones": 2048.0, "one_plus_tiny": [1.0, 2.0]}}
    lines = half_gemm_failures(bad)
    assert len(lines) == 2 and "what a float16 accumulator gives" in lines[0]


def test_requirement_failures():
    facts = {"cuda": "12.8", "torch": "2.11.0", "arch_covers_device": True, "hip": None,
             "driver_serves_runtime": False, "driver_check": "too old"}
    assert requirement_failures({"cuda": ">=12.6", "torch": "==2.11.*"}, facts) == []
    assert requirement_failures({"cuda": ">=13.0"}, facts) == \
        ["cuda >=13.0 required; this build has 12.8"]
    assert requirement_failures({"hip": ">=6"}, facts) == \
        ["hip >=6 required; this build has no hip"]
    assert requirement_failures({"arch_covers_device": False}, facts) == \
        ["arch_covers_device = False required; this build has True"]
    assert requirement_failures({"driver_serves_runtime": True}, facts) == \
        ["driver_serves_runtime = True required; this build has False (too old)"]
    assert "not a version specifier" in requirement_failures({"cuda": "thirteen"}, facts)[0]
    # nightlies and local versions meet a floor; HIP's build suffix is read
    assert requirement_failures({"torch": ">=2.11"}, {"torch": "2.14.0.dev20260101"}) == []
    assert requirement_failures({"torch": ">=2.11"}, {"torch": "2.11.0+cu130"}) == []
    assert requirement_failures({"hip": ">=7.1"}, {"hip": "7.1.25424-4179531dcd"}) == []
