"""The toolchain area through the suite: the blind environments (tests/planted/
blind_toolchain_envs.py, written from NVIDIA's and AMD's documents without reading the
checks: every LEGAL one passes test_facts, every ILLEGAL one fails it), the planted wrong
environments (tests/planted/toolchain_fakes.py) flagged by the check or the matrix
requirement they break while their twins pass, and torch's own build passing on this CPU.

One run per distinct set of requirements the device matrix states (the CPU entry of a copy
of the matrix takes each device's set in turn); the CPU set's run also judges the blind
environments and torch's own build."""

from __future__ import annotations

import json

import pytest
import yaml

from conformance.harness.matrix import DEFAULT_MATRIX
from tests.conftest import SUITE
from tests.planted import blind_toolchain_envs as blind

# each matrix requirement -> the planted environments that break it, per device entry
# (entries not named here state torch's version only)
BREAKS = {
    "cuda": {"torch": ["torch_too_old"], "cuda": ["cuda_124"],
             "driver_serves_runtime": ["old_driver", "old_driver_number"],
             "arch_covers_device": ["arch_dropped", "ptx_only_on_older_driver"]},
    "rocm": {"torch": ["torch_too_old"], "hip": ["rocm_64"],
             "arch_covers_device": ["rocm_arch_dropped", "rocm_xnack_mismatch"]},
    "*": {"torch": ["torch_too_old"]},
}
TWINS = {"cuda": ["cuda_ok", "arch_covered", "ptx_only_on_newer_driver"], "rocm": ["rocm_ok"],
         "*": ["cuda_ok", "rocm_ok"]}
# test_facts: what each planted environment must get, and a phrase of the reason
FACTS = {"arch_dropped": "no kernel image is available",
         "ptx_only_on_older_driver": "cudaErrorUnsupportedPtxVersion",
         "old_driver": "cudaErrorInsufficientDriver",
         "old_driver_number": "needs a driver >= 580",
         "rocm_arch_dropped": "hipErrorNoBinaryForGpu",
         "rocm_xnack_mismatch": "gfx90a:xnack+ (device has xnack-)",
         "arch_covered": None, "ptx_only_on_newer_driver": None, "cuda_ok": None,
         "rocm_ok": None, "cuda_124": None, "torch_too_old": None}


DEVICES = yaml.safe_load(DEFAULT_MATRIX.read_text())["devices"]
CPU_SET = json.dumps(DEVICES["cpu"].get("toolchain") or {}, sort_keys=True)


def _requirement_sets() -> dict[str, tuple[str, dict]]:
    """Distinct requirement sets of the matrix: JSON of the set -> (entry kind, set)."""
    out = {}
    devices = DEVICES
    for name, entry in devices.items():
        required = entry.get("toolchain") or {}
        kind = name if name in BREAKS else "*"
        assert set(required) == set(BREAKS[kind]), (
            f"devices.{name}.toolchain {sorted(required)}: each requirement needs a planted "
            f"environment that breaks it (BREAKS[{kind!r}] has {sorted(BREAKS[kind])})")
        out.setdefault(json.dumps(required, sort_keys=True), (kind, required))
    return out


SETS = _requirement_sets()


def _matrix_with(tmp_path, requirement: dict) -> str:
    data = yaml.safe_load(DEFAULT_MATRIX.read_text())
    data["devices"]["cpu"]["toolchain"] = requirement
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _rows(run, test: str) -> dict[str, dict]:
    return {r["impl"]: r for r in run.report["results"] if f"::{test}[" in r["nodeid"]}


def _check_requirements(rows: dict[str, dict], kind: str) -> None:
    for req, names in BREAKS[kind].items():
        for name in names:
            assert rows[name]["outcome"] == "failed", (req, name, rows[name])
            assert f"{req} " in rows[name]["reason"], (req, name, rows[name]["reason"])
    for name in TWINS[kind]:
        assert rows[name]["outcome"] == "passed", (name, rows[name].get("reason"))


OTHER_SETS = [k for k in SETS if k != CPU_SET]


@pytest.mark.parametrize("key", OTHER_SETS, ids=[SETS[k][0] for k in OTHER_SETS])
def test_requirements_planted(suite, tmp_path, key):
    """Each requirement of each device entry fails on its planted environment, with the
    requirement named; the entry's correct twins meet them all (the CPU entry's set, which
    mps and xpu share: test_blind_planted_and_cpu_build)."""
    kind, required = SETS[key]
    fakes = sorted({f for names in BREAKS[kind].values() for f in names} | set(TWINS[kind]))
    run = suite(str(SUITE / "toolchain" / "test_toolchain.py"), "-n", "0", "-q",
                "-p", "no:randomly", "--no-builtins", "-k", "test_requirements",
                f"--device-matrix={_matrix_with(tmp_path, required)}",
                *[f"--impl=toolchain=planted.toolchain_fakes:{f}" for f in fakes])
    assert run.report is not None, run.output[-3000:]
    _check_requirements(_rows(run, "test_requirements"), kind)


def test_blind_planted_and_cpu_build(suite, tmp_path):
    """On the CPU entry's requirements (torch's version, as mps's and xpu's): every blind
    LEGAL environment passes test_facts and every ILLEGAL one fails it; the planted
    environments get what FACTS says, torch_too_old fails test_requirements; the half
    GEMM that sums in the half type is flagged and its float32 twin passes; torch's own
    build passes test_facts and test_requirements here (its half GEMM path test, 7 s of
    child processes, runs in the area's own CI job)."""
    kind, required = SETS[CPU_SET]
    impls = [f"--impl=toolchain=planted.blind_toolchain_envs:{f.__name__}"
             for f in (*blind.LEGAL, *blind.ILLEGAL)]
    impls += [f"--impl=toolchain=planted.toolchain_fakes:{f}"
              for f in (*FACTS, "half_accumulating_gemm", "float32_accumulating_gemm")]
    run = suite(str(SUITE / "toolchain" / "test_toolchain.py"), "-n", "0", "-q",
                "-p", "no:randomly", "-k", "not (half_gemm and build)",
                f"--device-matrix={_matrix_with(tmp_path, required)}", *impls)
    assert run.report is not None, run.output[-3000:]
    facts = _rows(run, "test_facts")
    wrong = {f.__name__: facts[f.__name__].get("reason") for f in blind.LEGAL
             if facts[f.__name__]["outcome"] != "passed"}
    wrong |= {f.__name__: "passed" for f in blind.ILLEGAL
              if facts[f.__name__]["outcome"] != "failed"}
    assert not wrong, wrong
    for name, phrase in FACTS.items():
        want = "passed" if phrase is None else "failed"
        assert facts[name]["outcome"] == want, (name, facts[name])
        assert phrase is None or phrase in facts[name]["reason"], (name, facts[name]["reason"])
    half = _rows(run, "test_cpu_half_gemm_path")
    assert half["half_accumulating_gemm"]["outcome"] == "failed"
    assert "2048.0 is what a float16 accumulator gives" in half["half_accumulating_gemm"][
        "reason"]
    assert half["float32_accumulating_gemm"]["outcome"] == "passed"
    assert all(r["outcome"] == "unsupported" for n, r in half.items()
               if "gemm" not in n), half  # probes that measure no CPU half GEMM
    reqs = _rows(run, "test_requirements")
    _check_requirements(reqs, kind)
    assert "torch >=2.11 required; this build has 2.10.0" in reqs["torch_too_old"]["reason"]
    assert facts["torch.build"]["outcome"] == "passed", facts["torch.build"]
    assert reqs["torch.build"]["outcome"] == "passed", reqs["torch.build"]
