"""The toolchain area: the build's facts (recorded in the report), the checks every build
must pass on its device (its arch list covers the GPU, its driver serves its CUDA runtime,
the CPU half GEMM accumulates in float32), and the facts the device matrix requires
(``devices.<key>.toolchain``). The rules: conformance/areas/toolchain/facts.py."""

from __future__ import annotations

import functools

import pytest

from conformance.areas.toolchain.facts import derived, half_gemm_failures, requirement_failures
from conformance.harness.compare import exact
from conformance.harness.outcomes import unsupported
from conformance.harness.probes.blas import served_by

pytestmark = pytest.mark.area("toolchain")


def _facts(impl, device, record) -> dict:
    facts = dict(impl(device))
    facts.update(derived(facts))
    record.note(**{f"toolchain_{k}": v for k, v in facts.items()})
    return facts


@functools.cache
def _torchscript() -> dict:
    """Whether torch.jit.script / trace warn (which category) and TorchScript still works
    (the probe conformance/harness/probes/torchscript.py, which the export area's check
    shares); once per process: it describes the running torch, whichever probe is judged."""
    from conformance.harness.probes.torchscript import call, status

    info = status()
    for entry in ("script", "trace"):
        found, error = call(entry)
        info[f"{entry}_warns"] = sorted({w["category"] for w in found}) or None
        if error:
            info[f"{entry}_error"] = error
    return info


def test_facts(impl, device, record):
    """Record the facts (TorchScript's status too); a GPU the arch list does not cover
    (CUDA sm/compute rules with the a/f suffixes, PTX JIT on the driver; ROCm processor and
    feature settings), or a driver that cannot serve the CUDA runtime (minor-version
    compatibility: the major's minimum driver), fails with the one-line reason. A fact that
    cannot be judged (no GPU, no driver version) passes and is recorded as such."""
    facts = _facts(impl, device, record)
    record.note(**{f"torchscript_{k}": v for k, v in dict(_torchscript()).items()})
    covered = facts["arch_covers_device"]
    record.require(exact("the arch list covers the device", 0 if covered is not False else 1,
                         1, facts["arch_coverage"]))
    served = facts["driver_serves_runtime"]
    record.require(exact("the driver serves the CUDA runtime", 0 if served is not False else 1,
                         1, facts["driver_check"]))


def test_requirements(impl, device, record, request):
    """The matrix's ``toolchain`` requirements for this device, each met."""
    from conformance.harness.runstate import STATE

    state = request.config.stash[STATE]
    required = state.matrix.devices[state.device.matrix_key].toolchain
    if not required:
        unsupported(f"the matrix states no toolchain requirements for "
                    f"{state.device.matrix_key!r} (facts recorded only)")
    facts = _facts(impl, device, record)
    record.case(required=required)
    bad = requirement_failures(required, facts)
    record.require(exact("the build meets the matrix's toolchain requirements", len(bad),
                         len(required), "; ".join(bad)))


def test_cpu_half_gemm_path(impl, device, record):
    """The CPU float16 / bfloat16 GEMM accumulates in float32 (or wider), not in the half
    type: the probe's ``cpu_half_gemm`` sums (a 16 x 4096 x 16 matmul whose float32
    accumulation is exact in any order; a half accumulator stalls at 2048 / 256 on ones and
    loses 2**-12 steps next to 1) must be exact. For torch's own build also records which
    library served the GEMM (the GEMM area's probe, a child process: oneDNN, MKL, OpenBLAS
    or ATen's fallback). It does not certify the error bound (the GEMM area's
    test_accumulation_precision and test_cpu_fp16_blas_path do)."""
    if device.type != "cpu":
        unsupported("the CPU half-precision GEMM path exists only on the CPU")
    sums = dict(impl(device)).get("cpu_half_gemm")
    if not sums:
        unsupported("the build probe measures no CPU half GEMM (no 'cpu_half_gemm' fact)")
    record.note(**{f"half_gemm_sums_{dt}": v for dt, v in sums.items()})
    if impl.origin == "builtin":  # the path describes torch, never a plugged-in probe
        paths = {dt: served_by(dt) for dt in ("float16", "bfloat16")}
        record.note(**{f"half_gemm_{dt}": p for dt, p in paths.items()})
    bad = half_gemm_failures(sums)
    record.require(exact("the CPU half GEMM accumulates in float32", len(bad),
                         2 * len(sums), "; ".join(bad)))
