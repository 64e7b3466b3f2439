"""The example adapter for a library that is not torch (docs/examples/numpy_adapter.py,
numpy through DLPack) passes the suite under the contracts of docs/contracts.md.

Each child run is a whole area on the CPU with the adapter alone (``--no-builtins``):
topk, gemm and attention in full (every test, every dtype; bfloat16, which numpy lacks,
and the attention features the adapter does not declare are reported unsupported), and of
the samplers the one class the adapter implements, ``TestExponential``. On a 2-core machine
they took 28-30, 18-20, 40-54 and 11-12 s (torch 2.13 CPU, the machine shared
with a CI run).
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
import torch

from tests.conftest import SUITE

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
ADAPTER = EXAMPLES / "numpy_adapter.py"
DTYPES = {"float16", "float32", "float64"}  # what the adapter declares for floats

# area, attribute, selection, tests that must pass for every declared float dtype
AREAS = [
    ("topk", "numpy_topk", [SUITE / "topk"],
     {"test_random", "test_k_extremes_every_dim", "test_special_values",
      "test_zero_size_and_scalars", "test_invalid_k_raises", "test_rocm_smem_boundaries"}),
    ("gemm", "numpy_matmul", [SUITE / "gemm"],
     {"test_random_2d", "test_batched", "test_broadcast_and_vectors", "test_long_ragged_k",
      "test_awkward_shapes", "test_accumulation_precision"}),
    ("attention", "numpy_attention", [SUITE / "attention"],
     {"test_forward_random", "test_forward_lse_random", "test_backward_random",
      "test_forward_catalogue", "test_forward_lse_catalogue", "test_backward_catalogue",
      "test_lse_is_natural_log",
      "test_gqa_head_mapping", "test_growing_scores"}),
    ("sampler.exponential", "numpy_exponential",
     [f"{SUITE / 'samplers' / 'test_samplers.py'}::TestExponential"],
     {"test_goodness_of_fit", "test_other_parameters", "test_two_sample_vs_cpu",
      "test_independence", "test_layouts", "test_reproducible", "test_extreme_parameters"}),
]


def _adapter():
    pytest.importorskip("numpy", reason="[skipped] numpy is not installed")
    spec = importlib.util.spec_from_file_location("numpy_adapter", ADAPTER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("area,attr,selection,must_pass", AREAS, ids=[a[0] for a in AREAS])
def test_example_adapter_passes_its_area(suite, monkeypatch, area, attr, selection, must_pass):
    _adapter()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(EXAMPLES), os.environ.get("PYTHONPATH")])))
    run = suite(*map(str, selection), "-n", "0", "-q", "--device=cpu", "--no-builtins",
                f"--impl={area}=numpy_adapter:{attr}")
    assert run.returncode == 0, run.output[-3000:]
    summary = run.report["summary"]
    assert summary["failed"] == summary["error"] == summary["unexpected-pass"] == 0, summary
    results = run.report["results"]
    assert results and {r["impl"] for r in results} == {f"example.{attr}"}
    passed = {(r["nodeid"].split("::")[-1].split("[")[0], r["dtype"])
              for r in results if r["outcome"] == "passed"}
    missing = [f"{t}[{d}]" for t in sorted(must_pass) for d in sorted(DTYPES)
               if (t, d) not in passed]
    assert not missing, f"did not pass: {missing}"
    if area == "topk":  # the integer dtypes too
        assert {("test_random", d) for d in ("int8", "uint8", "int32", "int64")} <= passed
    if area.startswith("sampler."):  # runs in float32 only
        assert ("test_parameter_validation", "float32") in passed
    # numpy has no bfloat16: declared away, so never passed, always unsupported
    bf16 = [r for r in results if r["dtype"] == "bfloat16"]
    assert bf16 and all(r["outcome"] == "unsupported" for r in bf16)


def test_attention_backward_is_the_gradient():
    """The attention autograd.Function's numpy backward, for out and for lse, against
    finite differences in float64 (GQA 4:2, Dv != D, a custom scale)."""
    na = _adapter()
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(s, dtype=torch.float64, generator=gen, requires_grad=True)
               for s in ((2, 4, 5, 8), (2, 2, 7, 8), (2, 2, 7, 3)))

    def fn(q, k, v):
        return na.numpy_attention(q, k, v, scale=0.3, enable_gqa=True, return_lse=True)

    assert torch.autograd.gradcheck(fn, (q, k, v))
    out, lse = fn(q, k, v)
    assert (out.shape, out.dtype, lse.shape, lse.dtype) == (
        (2, 4, 5, 3), torch.float64, (2, 4, 5), torch.float64)


def test_attention_output_dtypes_and_refusals():
    """float16 in: out float16, lse float32; a mask or a score_mod is refused, as is
    Hq != Hkv without enable_gqa."""
    na = _adapter()
    q, k, v = (torch.randn(s).to(torch.float16) for s in ((1, 2, 3, 16), (1, 1, 4, 16),
                                                         (1, 1, 4, 16)))
    out, lse = na.numpy_attention(q, k, v, enable_gqa=True, return_lse=True)
    assert (out.dtype, out.shape, lse.dtype, lse.shape) == (
        torch.float16, (1, 2, 3, 16), torch.float32, (1, 2, 3))
    with pytest.raises(NotImplementedError):
        na.numpy_attention(q, k, v, score_mod=lambda s, b, h, i, j: s, enable_gqa=True)
    with pytest.raises(ValueError, match="enable_gqa"):
        na.numpy_attention(q, k, v)
