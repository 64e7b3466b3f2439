"""Process history (conformance/harness/history.py, conformance/run/order.py,
ci/order_proof.py): a fresh compile state compiles afresh, the reset costs no Dynamo import,
--test-order's usage errors, and the order proof's comparison."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conformance.harness.history import fresh_compile_state
from tests.conftest import TESTS

ROOT = TESTS.parent


def test_a_fresh_compile_state_compiles_afresh():
    import torch
    from torch._dynamo.testing import CompileCounter

    counter = CompileCounter()

    def f(x, scale):
        return x * scale

    compiled = torch.compile(f, backend=counter)
    x = torch.ones(3)
    for scale in (2.0, 3.0, 4.0, 5.0):  # specialised or (from 2.15) dynamic: either way cached
        compiled(x, scale)
    before = counter.frame_count
    compiled(x, 4.0)
    assert counter.frame_count == before  # the process remembers
    fresh_compile_state()
    assert torch.equal(compiled(x, 4.0), x * 4.0)
    assert counter.frame_count == before + 1  # a first call again


def test_the_reset_costs_no_dynamo_import():
    code = ("import sys, torch; had = 'torch._dynamo' in sys.modules; "
            "from conformance.harness.history import fresh_compile_state; "
            "fresh_compile_state(); print(had, 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.split()
    if out[0] == "True":
        pytest.skip("this torch imports Dynamo with torch")
    assert out == ["False", "False"]


@pytest.mark.harness_only
@pytest.mark.parametrize("value", ["backwards", "shuffle:x", "reverse:3", "shuffle:-1"])
def test_a_bad_test_order_is_a_usage_error(value):
    from conformance.run.order import parse

    with pytest.raises(pytest.UsageError, match="--test-order"):
        parse(value)
    assert parse("shuffle:7") == "shuffle:7" and parse("shuffle").startswith("shuffle:")


@pytest.mark.harness_only
def test_shuffle_prints_its_seed_and_runs_every_test(suite):
    run = suite(str(TESTS / "demo" / "demo_measured.py"), "--device=cpu", "-n", "2",
                "--test-order=shuffle")
    line = next(x for x in run.stdout.splitlines() if "test order shuffle:" in x)
    assert "reproduce with --test-order=shuffle:" in line
    assert run.report["collected"] == 3 and run.returncode in (0, 1), run.output[-2000:]


def _report(tmp_path, name: str, outcomes: dict[str, str]):
    d = tmp_path / name
    d.mkdir()
    results = [{"nodeid": n, "outcome": o} for n, o in outcomes.items()]
    (d / "report.json").write_text(json.dumps(
        {"results": results, "verdict": "PASS", "run": {"command": f"pytest {name}"}}))
    (d / "seconds").write_text("12")
    return f"{name}={d}"


@pytest.mark.harness_only
def test_the_order_proof_names_every_difference(tmp_path):
    sys.path.insert(0, str(ROOT / "ci"))
    try:
        import order_proof
    finally:
        sys.path.pop(0)
    same = {"a::t1": "passed", "a::t2": "expected-fail"}
    a = _report(tmp_path, "fwd", same)
    b = _report(tmp_path, "rev", same)
    c = _report(tmp_path, "n3", {"a::t1": "failed"})
    assert order_proof.main([a, b, "-o", str(tmp_path / "ok.md")]) == 0
    assert "0 with an outcome that differs" in (tmp_path / "ok.md").read_text()
    assert order_proof.main([a, b, c, "-o", str(tmp_path / "bad.md")]) == 1
    text = (tmp_path / "bad.md").read_text()
    assert "- `a::t1`: fwd passed, rev passed, n3 failed" in text
    assert "- `a::t2`: fwd expected-fail, rev expected-fail, n3 absent" in text
    assert "| fwd | `pytest fwd` | 12 s | PASS |" in text
    assert order_proof.main([str(tmp_path / "nowhere")]) == 4


def test_settings_and_generators_come_back_as_the_session_started():
    import random

    import numpy as np
    import torch

    from conformance.harness.history import restore, snapshot

    start = snapshot()
    first = (torch.rand(3), np.random.rand(2), random.random())
    restore(start)
    dtype, precision = torch.get_default_dtype(), torch.get_float32_matmul_precision()
    torch.set_default_dtype(torch.float64)
    torch.set_float32_matmul_precision("medium" if precision != "medium" else "high")
    try:
        changed = restore(start)
    finally:
        torch.set_default_dtype(dtype)
        torch.set_float32_matmul_precision(precision)
    assert set(changed) == {"default dtype", "float32 matmul precision"}
    assert torch.get_default_dtype() == dtype
    again = (torch.rand(3), np.random.rand(2), random.random())
    assert torch.equal(first[0], again[0]) and np.array_equal(first[1], again[1])
    assert first[2] == again[2]
    assert restore(start) == []
