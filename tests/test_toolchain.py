"""The toolchain area's rules (conformance/areas/toolchain/facts.py) and its planted fakes."""

from __future__ import annotations

import pytest

from conformance.areas.toolchain.facts import arch_covers, driver_ok, requirement_failures
from tests.conftest import SUITE


@pytest.mark.parametrize("arch_list,cap,covered", [
    (["sm_80", "sm_90"], [8, 6], True),        # sm_80 SASS runs on sm_86
    (["sm_86"], [8, 0], False),                # not backwards
    (["sm_90a"], [9, 0], True), (["sm_90a"], [9, 1], False),  # arch-specific: exact only
    (["sm_75", "compute_75"], [12, 0], True),  # PTX JIT
    (["sm_100", "sm_120"], [8, 9], False),
    (["sm_120"], [12, 1], True),
])
def test_arch_covers(arch_list, cap, covered):
    assert arch_covers(arch_list, cap, None)[0] is covered


def test_arch_covers_rocm_and_cpu():
    assert arch_covers(["gfx90a", "gfx942"], None, "gfx942")[0] is True
    assert arch_covers(["gfx90a"], None, "gfx1100")[0] is False
    assert arch_covers([], None, None)[0] is None


def test_driver_ok():
    assert driver_ok("13.0", "13.0")[0] is True
    assert driver_ok("12.8", "13.0")[0] is True
    assert driver_ok("13.0", "12.8")[0] is False
    assert driver_ok(None, "13.0")[0] is None


def test_requirement_failures():
    facts = {"cuda": "12.8", "torch": "2.11.0", "arch_covers_device": True, "hip": None}
    assert requirement_failures({"cuda": ">=12.6", "torch": "==2.11.*"}, facts) == []
    assert requirement_failures({"cuda": ">=13.0"}, facts) == \
        ["cuda >=13.0 required; this build has 12.8"]
    assert requirement_failures({"hip": ">=6"}, facts) == \
        ["hip >=6 required; this build has no hip"]
    assert requirement_failures({"arch_covers_device": False}, facts) == \
        ["arch_covers_device = False required; this build has True"]
    assert "not a version specifier" in requirement_failures({"cuda": "thirteen"}, facts)[0]


def test_planted_toolchain_fakes(suite):
    """A build whose arch list lacks the device's capability, and one whose driver is older
    than its runtime, are flagged with the reason; the covered twin passes."""
    impls = [f"--impl=toolchain=planted.toolchain_fakes:{x}"
             for x in ("arch_dropped", "arch_covered", "old_driver")]
    run = suite(str(SUITE / "toolchain" / "test_toolchain.py"), "-n", "0", "-q",
                "-p", "no:randomly", "--no-builtins", "-k", "test_facts", *impls)
    assert run.returncode == 1, run.output[-3000:]
    rows = {r["impl"]: r for r in run.report["results"]}
    assert rows["arch_dropped"]["outcome"] == "failed"
    assert "no kernel image is available" in rows["arch_dropped"]["reason"]
    assert rows["old_driver"]["outcome"] == "failed"
    assert "is older than the build's CUDA 13.0" in rows["old_driver"]["reason"]
    assert rows["arch_covered"]["outcome"] == "passed"


def _matrix_with(tmp_path, requirement: dict) -> str:
    import yaml

    from conformance.harness.matrix import DEFAULT_MATRIX

    data = yaml.safe_load(DEFAULT_MATRIX.read_text())
    data["devices"]["cpu"]["toolchain"] = requirement
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_matrix_requirements_fail_the_run(suite, tmp_path):
    """A device matrix requiring a newer torch than the build fails test_requirements with
    the one-line reason, while the build's other checks pass (a met requirement:
    test_requirement_failures)."""
    args = (str(SUITE / "toolchain" / "test_toolchain.py"), "-n", "0", "-q",
            "-p", "no:randomly", "-k", "test_requirements or test_facts")
    bad = suite(*args, f"--device-matrix={_matrix_with(tmp_path, {'torch': '>=99'})}")
    assert bad.returncode == 1, bad.output[-3000:]
    (row,) = [r for r in bad.report["results"] if "test_requirements" in r["nodeid"]]
    assert row["outcome"] == "failed" and "torch >=99 required; this build has" in row["reason"]
    others = [r for r in bad.report["results"] if "test_requirements" not in r["nodeid"]]
    assert all(r["outcome"] != "failed" for r in others), others
