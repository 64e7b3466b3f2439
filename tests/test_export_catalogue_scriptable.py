"""The export catalogue's models survive a user's TorchScript round trip: ``torch.jit.script``
and ``torch.jit.trace`` (under ``no_grad``, as for inference) of every model give eager's
outputs bit for bit at the example size and at other sizes (a failure here would be the
suite's annotations, not torch's). The one thing torch cannot do is named: tracing the
transformer encoder layer with grad enabled (see test_encoder_trace_with_grad)."""

from __future__ import annotations

import warnings

import pytest
import torch

from conformance.areas.export.catalogue import EXAMPLE, MODELS, build, make_inputs, to_tensors

# CI's oldest leg runs it too: TorchScript's scripting and tracing differ between releases
pytestmark = pytest.mark.torch_release

SIZES = (EXAMPLE, (7, 9), (1, 1))  # the trace is taken at the example


def _args(name: str, batch: int, seq: int) -> tuple[torch.Tensor, ...]:
    return tuple(to_tensors(make_inputs(MODELS[name], batch, seq, "float32"), torch.float32,
                            "cpu"))


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():  # TorchScript's deprecation (test_torchscript.py checks it)
        warnings.filterwarnings("ignore", message=r"`torch\.jit\.\w+` is deprecated",
                                category=DeprecationWarning)
        yield


@pytest.mark.parametrize("how", ["script", "trace"])
@pytest.mark.parametrize("name", list(MODELS))
def test_torchscript_matches_eager(name, how):
    module = build(MODELS[name], torch.float32)
    with torch.no_grad():
        program = (torch.jit.script(module) if how == "script"
                   else torch.jit.trace(module, _args(name, *EXAMPLE)))
        for size in SIZES:
            args = _args(name, *size)
            got, want = program(*args), module(*args)
            assert len(got) == len(want) == len(MODELS[name].outputs), size
            for g, w in zip(got, want, strict=True):
                assert g.dtype == w.dtype and g.shape == w.shape, size
                assert torch.equal(g, w), (size, float((g - w).abs().max()))


@pytest.mark.xfail(strict=True, raises=torch.jit.TracingCheckError, reason=(
    "torch: nn.TransformerEncoderLayer takes its fused fast path only without grad "
    "(torch/nn/modules/transformer.py, 'torch.is_grad_enabled() and any(x.requires_grad "
    "...)'), and torch.jit.trace's check re-traces under @torch.no_grad() "
    "(torch/jit/_trace.py _check_trace): the two graphs differ"))
def test_encoder_trace_with_grad():
    torch.jit.trace(build(MODELS["encoder"], torch.float32), _args("encoder", *EXAMPLE))
