"""TF32 (area ``export``): float32 round trips with TF32 turned on, as cuBLAS and cuDNN run
them by default on Ampere and later GPUs for convolutions and RNNs
(``torch.backends.cudnn.allow_tf32``) and, when asked, for matmuls
(``torch.backends.cuda.matmul.allow_tf32``). test_roundtrip pins TF32 off and certifies
float32 arithmetic; this test certifies TF32's: the error-ratio rule against the TF32 plain
baseline, the same model with every matrix product's operands rounded to TF32 (10 mantissa
bits, round to nearest, baseline.tf32) and float32 accumulation. A kernel that rounds
operands to fewer bits (bfloat16's 7), or accumulates in them, fails it.

TF32 is a math mode of CUDA devices (and ROCm's): elsewhere the case is unsupported.
Models: those whose time is spent in matrix products of some depth (an LSTM, the encoder
layer, the conv net); the ``export`` path and eager, in float32.
"""

from __future__ import annotations

import pytest

from conformance.areas.export.runner import run_case
from conformance.harness.outcomes import unsupported
from conformance.harness.tensors import dtype_name

pytestmark = pytest.mark.area("export")
MODELS = ("lstm", "encoder", "convnet")
TF32_DEVICES = ("cuda", "rocm")


@pytest.mark.parametrize("model", MODELS)
def test_roundtrip_tf32(impl, model, dtype, device, record, isolated):
    if dtype_name(dtype) != "float32":
        unsupported("TF32 applies to float32 only")
    if device.type not in TF32_DEVICES:
        unsupported(f"TF32 is a math mode of CUDA / ROCm float32 products, not {device.type}'s")
    run_case(impl, model, "batch", dtype, device, record, isolated, tf32=True)
