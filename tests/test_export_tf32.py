"""The TF32 rule of the export area (test_tf32.py runs only on CUDA devices): TF32 rounding
against exact values, and the rule's verdicts on programs that emulate TF32 and bfloat16
products on the CPU (tests/planted/export_tf32.py), judged in-process as the test does."""

from __future__ import annotations

import contextlib

import pytest
import torch

from conformance.areas.export import cases
from conformance.areas.export.baseline import tf32
from conformance.areas.export.catalogue import EXAMPLE, MODELS, build, make_inputs
from conformance.areas.export.checks import judge, sizes
from conformance.harness.expectations import CheckFailure

# CI's oldest leg runs it too: torch.export's APIs and what they keep change between releases
pytestmark = pytest.mark.torch_release


def test_tf32_rounding():
    u = 2.0 ** -10  # TF32's unit in the last place at 1
    x = torch.tensor([1.0, 1 + u, 1 + u / 2, 1 + u / 4, 1 + 3 * u / 4, -(1 + u / 2), 3e38,
                      float("inf"), -float("inf"), 1e-40])
    want = [1.0, 1 + u, 1 + u, 1.0, 1 + u, -(1 + u), None, float("inf"), -float("inf"), None]
    got = tf32(x).tolist()
    for g, w in zip(got, want, strict=True):
        if w is not None:
            assert g == w
    assert abs(got[6] - 3e38) <= 3e38 * u / 2  # within half a TF32 ulp
    assert torch.isnan(tf32(torch.tensor([float("nan")]))).all()
    bits = torch.tensor(got[:6]).view(torch.int32)
    assert not (bits & 0x1FFF).any()  # 10 explicit mantissa bits at most


class _Record:
    def __init__(self) -> None:
        self.failed: list[str] = []

    def case(self, **_: object) -> None:
        pass

    def note(self, **_: object) -> None:
        pass

    def require(self, m):
        if not m.ok:
            self.failed.append(m.name)
        return m


def _verdict(spec: str, model: str, tf32_rule: bool) -> list[str]:
    m = MODELS[model]
    at = sizes(m)[:6]
    inputs = [make_inputs(m, b, s, "float32") for b, s in at]
    result = cases.roundtrip(spec, model, "batch", "float32", "cpu", at, inputs,
                             make_inputs(m, *EXAMPLE, "float32"), tf32_rule)
    record = _Record()
    with contextlib.suppress(CheckFailure):
        judge(record, m, "batch", "float32", build(m, torch.float32), result, inputs,
              eager_is_baseline=True, tf32=tf32_rule)
    return record.failed


@pytest.mark.parametrize("model", ["lstm", "encoder", "convnet"])
def test_tf32_rule(model):
    """TF32 products pass the TF32 rule and fail the strict one; bfloat16 products fail
    both; plain export passes both."""
    tf32_prog, bf16_prog = (f"tests.planted.export_tf32:{n}_products" for n in ("tf32", "bf16"))
    assert _verdict("impls.export:export", model, True) == []
    assert _verdict(tf32_prog, model, True) == []
    assert any("error ratio rule" in f for f in _verdict(tf32_prog, model, False))
    assert any("error ratio rule" in f for f in _verdict(bf16_prog, model, True))
