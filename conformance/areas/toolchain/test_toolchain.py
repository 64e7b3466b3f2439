"""The toolchain area: the build's facts (recorded in the report), the checks every build
must pass on its device (its arch list covers the GPU, its driver serves its CUDA runtime),
and the facts the device matrix requires (``devices.<key>.toolchain``)."""

from __future__ import annotations

import pytest

from conformance.areas.toolchain.facts import arch_covers, driver_ok, requirement_failures
from conformance.harness.compare import exact
from conformance.harness.outcomes import unsupported
from conformance.harness.probes.blas import served_by

pytestmark = pytest.mark.area("toolchain")


def _facts(impl, device, record) -> dict:
    facts = dict(impl(device))
    covered, why = arch_covers(facts.get("arch_list") or [], facts.get("capability"),
                               facts.get("gcn_arch"))
    facts["arch_covers_device"] = covered
    facts["arch_coverage"] = why
    record.note(**{f"toolchain_{k}": v for k, v in facts.items()})
    return facts


def _torchscript() -> dict:
    """Whether torch.jit.script / trace warn (which category) and TorchScript still works
    (the probe conformance/harness/probes/torchscript.py, which the export area's check shares)."""
    from conformance.harness.probes.torchscript import call, status

    info = status()
    for entry in ("script", "trace"):
        found, error = call(entry)
        info[f"{entry}_warns"] = sorted({w["category"] for w in found}) or None
        if error:
            info[f"{entry}_error"] = error
    return info


def test_facts(impl, device, record):
    """Record the facts (TorchScript's status too); a GPU the arch list does not cover, or
    a driver older than the CUDA runtime, fails with the one-line reason."""
    facts = _facts(impl, device, record)
    record.note(**{f"torchscript_{k}": v for k, v in _torchscript().items()})
    covered = facts["arch_covers_device"]
    record.require(exact("the arch list covers the device", 0 if covered is not False else 1,
                         1, facts["arch_coverage"]))
    ok, why = driver_ok(facts.get("cuda"), facts.get("driver"))
    record.require(exact("the driver serves the CUDA runtime", 0 if ok is not False else 1, 1,
                         why))


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


def test_cpu_half_gemm_path(device, record):
    """Which library serves float16 / bfloat16 GEMM on the CPU (the GEMM area's probe)."""
    if device.type != "cpu":
        unsupported("the CPU half-precision GEMM path exists only on the CPU")
    paths = {dt: served_by(dt) for dt in ("float16", "bfloat16")}
    record.note(**{f"half_gemm_{dt}": p for dt, p in paths.items()})
    unknown = [dt for dt, p in paths.items() if p.startswith("unknown")]
    record.require(exact("the half GEMM path is identified", len(unknown), 2,
                         "; ".join(paths[dt] for dt in unknown)))
