"""The start-up probes for known-bad dependency pairs: the Triton interpreter on
triton < 3.7 with numpy >= 2.4 is reported as absent (with the fix), never as a wall of
failures; elsewhere the probe passes."""

from __future__ import annotations

import pytest
from packaging.version import Version

from conformance.harness import deps
from conformance.harness.versions import installed_version

# CI's oldest leg runs it too: the start-up probes judge the release's own triton and numpy
pytestmark = pytest.mark.torch_release


def _fake_interpreter(launch):
    """A stand-in for triton's InterpretedFunction whose kernel[grid](...) calls launch."""

    class Fake:
        def __init__(self, fn):
            pass

        def __getitem__(self, grid):
            return launch

    return Fake


def test_probe_agrees_with_the_known_bad_pair():
    pytest.importorskip("triton", reason="[skipped] triton is not installed")
    if not deps.interpreter_in_use():
        pytest.skip("[skipped] CUDA is present: Triton compiles, the interpreter is not used")
    triton_v, numpy_v = Version(installed_version("triton")), Version(installed_version("numpy"))
    problem = deps.probe_triton_interpreter()
    if triton_v < Version("3.7") and numpy_v >= Version("2.4"):
        assert problem is not None and "only 0-dimensional arrays" in problem, problem
        assert 'fix: pip install "numpy<2.4"' in problem and deps.TRITON_NUMPY_LINK in problem
    else:
        assert problem is None, problem
    present, absent = deps.probe_tags()
    assert ("triton-interpreter" in present) is (problem is None)
    assert absent.get("triton-interpreter") == problem


def test_a_failing_interpreter_names_the_pair_and_the_fix(monkeypatch):
    """Simulated: the probe kernel raises as triton 3.6 does under numpy 2.4."""
    pytest.importorskip("triton", reason="[skipped] triton is not installed")
    import triton.runtime.interpreter as interp

    def launch(*args, **kwargs):
        raise TypeError("only 0-dimensional arrays can be converted to Python scalars")

    monkeypatch.setattr(interp, "InterpretedFunction", _fake_interpreter(launch))
    versions = {"triton": "3.6.0", "numpy": "2.4.6"}
    monkeypatch.setattr(deps, "installed_version", versions.get)
    problem = deps.probe_triton_interpreter()
    assert problem == (
        "Triton's interpreter fails the start-up probe: TypeError: only 0-dimensional arrays "
        "can be converted to Python scalars; triton 3.6.0's interpreter does not work with "
        f"numpy 2.4.6 ({deps.TRITON_NUMPY_LINK}); fix: pip install \"numpy<2.4\" "
        "(or a torch whose triton is >= 3.7)")


def test_a_wrong_result_is_a_failed_probe(monkeypatch):
    pytest.importorskip("triton", reason="[skipped] triton is not installed")
    import triton.runtime.interpreter as interp

    def launch(x, out, n, BLOCK):
        out.zero_()

    monkeypatch.setattr(interp, "InterpretedFunction", _fake_interpreter(launch))
    problem = deps.probe_triton_interpreter()
    assert problem is not None and problem.startswith(
        "Triton's interpreter computed a wrong result in the start-up probe")


def test_the_triton_path_is_skipped_with_the_reason_when_the_probe_fails(suite):
    """End to end where the pair is broken (CI's torch 2.11 leg with numpy 2.4): every
    triton_fa case is 'skipped' with the probe's reason, none failed; a run of them alone
    tests nothing, so it exits 0 only with --allow-empty (and says it ran nothing)."""
    pytest.importorskip("triton", reason="[skipped] triton is not installed")
    problem = deps.probe_triton_interpreter() if deps.interpreter_in_use() else None
    if problem is None:
        pytest.skip("[skipped] the Triton interpreter works here (no known-bad pair)")
    from tests.conftest import SUITE

    run = suite(str(SUITE / "attention" / "test_attention.py"), "--device=cpu", "-n", "0",
                "-k", "triton_fa and float32", "--allow-empty")
    assert run.returncode == 0, run.output[-3000:]
    assert "ran nothing here" in run.stdout, run.stdout[-3000:]
    results = run.report["results"]
    skipped = [r for r in results if r["outcome"] == "skipped"]
    assert skipped and all(r["outcome"] in ("skipped", "unsupported") for r in results)
    assert all("requires triton-interpreter" in r["reason"] and 'numpy<2.4' in r["reason"]
               for r in skipped), skipped[0]["reason"]
    assert "triton-interpreter absent:" in run.stdout
