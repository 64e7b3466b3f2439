"""``--repro-dir``: a planted fault's failure becomes a script that shows the failure on its own
(a fresh process, torch and numpy only, nothing of this suite importable), and a correct
twin's run writes no script."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from conformance.harness.compare import elementwise_bound
from conformance.harness.probe import DeviceInfo
from conformance.harness.record import Record
from conformance.harness.registry import Capabilities, Impl
from conformance.harness.repro_trace import Trace, tracing
from conformance.report.repro import write_failure
from tests.conftest import SUITE

GEMM = str(SUITE / "gemm" / "test_gemm.py")
ERFCX = str(SUITE / "special" / "test_erfcx.py")


def _alone(script: Path) -> subprocess.CompletedProcess:
    """Run the script where only the standard library, torch and numpy can be imported: a
    fresh interpreter, no PYTHONPATH, cwd outside the project, site-packages without this
    suite (checked by the script's imports below)."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    return subprocess.run([sys.executable, "-I", str(script.name)], cwd=script.parent,
                          env=env, capture_output=True, text=True, timeout=300, check=False)


def _imports(text: str) -> set[str]:
    return set(re.findall(r"^\s*(?:from|import) ([\w.]+)", text, flags=re.M))


def test_stride_bug_reproduces_standalone(suite, tmp_path):
    """gemm: a kernel that ignores strides fails on transposed operands; the script rebuilds
    the same views and shows got / expected / bound and exit 1."""
    repro = tmp_path / "repro"
    run = suite(GEMM, "-n", "0", "-q", "--no-builtins", "-k", "float32 and test_long_ragged_k[",
                "--impl=gemm=planted.gemm_faults:ignores_strides", f"--repro-dir={repro}")
    assert run.returncode == 1, run.output[-3000:]
    scripts = sorted(repro.glob("*.py"))
    assert scripts and len(scripts) == len(list(repro.glob("*.pt"))), run.output[-2000:]
    assert f"standalone reproducer: {scripts[0]}" in run.output or any(
        f"standalone reproducer: {s}" in run.output for s in scripts)
    text = scripts[0].read_text()
    assert _imports(text) <= {"__future__", "argparse", "pathlib", "sys", "numpy", "torch"}, \
        _imports(text)
    assert "def ignores_strides" in text  # the implementation travels with the script
    assert "# test:      " in text and "torch: " in text and "--seed=0" in text
    proc = _alone(scripts[0])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAILED: reproduced" in proc.stdout, proc.stdout
    assert re.search(r"got .+, expected .+, \|error\| .+ vs bound", proc.stdout), proc.stdout
    assert "elements out of bound" in proc.stdout


def test_correct_twin_writes_nothing(suite, tmp_path):
    repro = tmp_path / "repro"
    run = suite(GEMM, "-n", "0", "-q", "--no-builtins", "-k", "float32 and test_long_ragged_k[",
                "--impl=gemm=impls.gemm:torch_matmul", f"--repro-dir={repro}")
    assert run.returncode == 0, run.output[-3000:]
    assert not repro.exists() or not list(repro.iterdir())


def test_other_checks_replay_the_call(suite, tmp_path):
    """erfcx's ulp checks are not elementwise |error| <= bound: the script replays the exact
    call (the NaNs of exp(x^2) erfc(x) show in its output) and prints the recorded verdict."""
    repro = tmp_path / "repro"
    run = suite(ERFCX, "-n", "0", "-q", "--no-builtins", "-k", "float32 and specials",
                "--impl=special.erfcx=planted.erfcx_faults:naive", f"--repro-dir={repro}")
    assert run.returncode == 1, run.output[-3000:]
    (script,) = repro.glob("*.py")
    proc = _alone(script)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "NaN 2" in proc.stdout and "special values exact: 1 of 5 differ" in proc.stdout, \
        proc.stdout


def _doubled_grad(x):
    """exp(x) with twice its gradient (a planted backward fault)."""
    class F(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = torch.exp(x)
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return 2 * g * y
    return F.apply(x)


def test_gradient_check_reproduces(tmp_path):
    """A check on an input's gradient: the script reruns forward and backward with the
    recorded cotangent and compares the gradient elementwise."""
    impl = Impl("demo", "doubled_grad", _doubled_grad, "tests.test_repro:_doubled_grad",
                "--impl", Capabilities())
    trace = Trace()
    x = torch.linspace(-2, 2, 7, dtype=torch.float64, requires_grad=True)
    g = torch.linspace(0.5, 2, 7, dtype=torch.float64)
    with tracing(trace):
        impl(x).backward(g)
    expected = (g * torch.exp(x)).detach().numpy()
    m = elementwise_bound("grad of exp", x.grad.numpy(), expected, np.full(7, 1e-12))
    assert not m.ok
    record = Record(nodeid="demo/test_demo.py::test_grad[doubled_grad]", area="demo",
                    impl="doubled_grad", device="cpu", dtype="float64", repro_args=[])
    state = SimpleNamespace(device=DeviceInfo("cpu", "cpu", "cpu", "cpu"), profile="ci",
                            seed=0)
    script = write_failure(tmp_path, record, "[demo] grad of exp: out of bound", m,
                           trace=trace, impl=impl, state=state)
    text = script.read_text()
    assert "torch.autograd.backward" in text and "T[0].grad" in text
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 1 and "FAILED: reproduced" in proc.stdout, \
        proc.stdout + proc.stderr
    assert "7 of 7 elements out of bound" in proc.stdout
