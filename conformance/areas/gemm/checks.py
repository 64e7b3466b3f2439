"""The GEMM conformance check: output structure, then the forward-error bound.

The bound certifies a stated accumulation precision (``ACCUMULATE``): float32 accumulation
for float16/bfloat16 inputs, the input precision otherwise. A float16 accumulator violates
it for large K (test_accumulation_precision); reduced-precision operands or products (TF32,
bfloat16, float64 in float32 pieces, half-type products) violate it on operands that bias
their rounding (test_reduced_precision, precision.py).
"""

from __future__ import annotations

import numpy as np
import torch

from conformance.harness import recheck
from conformance.harness.compare import elementwise_bound, exact
from conformance.harness.record import Record
from conformance.harness.registry import Impl
from conformance.harness.tensors import describe, dtype_name, exact_numpy
from oracles import gemm as oracle

ACCUMULATE = {"float16": "float32", "bfloat16": "float32", "float32": "float32",
              "float64": "float64"}
DISTRIBUTIONS = ("uniform", "positive", "wide", "integers")


def make_operand(rng: np.random.Generator, shape: tuple[int, ...], dtype: torch.dtype,
                 dist: str, k: int) -> np.ndarray:
    """Values for one operand; magnitudes chosen so |A||B| stays finite in ``dtype``."""
    name = dtype_name(dtype)
    fmt = oracle.FORMATS[name]
    if dist == "uniform":
        return rng.uniform(-1, 1, shape)
    if dist == "positive":
        return rng.uniform(0.5, 1, shape)
    if dist == "wide":
        # |a|,|b| <= 2^e with k 2^(2e) <= max/4: a spread of exponents, no overflow
        e = int(max(0, min(6, np.floor(np.log2(fmt.max_finite / 4 / max(k, 1)) / 2))))
        return rng.choice([-1.0, 1.0], shape) * 2.0 ** rng.uniform(-e - 4, e, shape)
    if dist == "integers":
        return rng.integers(-8, 9, shape).astype(np.float64)
    raise ValueError(f"unknown distribution {dist!r}")


def bound_name(dtype: str) -> str:
    return f"|C - AB| <= forward-error bound (accumulate {ACCUMULATE[dtype]}, output {dtype})"


def check_gemm(record: Record, impl: Impl, a: torch.Tensor, b: torch.Tensor,
               **case: object) -> None:
    """Run ``impl(a, b)`` and require torch.matmul's shape/dtype and the error bound."""
    __tracebackhide__ = True
    name = dtype_name(a.dtype)
    record.case(a=describe(a), b=describe(b), **case)
    a64, b64 = exact_numpy(a), exact_numpy(b)
    ref = oracle.matmul(a64, b64)
    bound = oracle.error_bound(a64, b64, ref, accumulate=ACCUMULATE[name], output=name)
    recheck.expect_next(recheck.within_bound(bound_name(name), recheck.output(), ref, bound,
                                             dtype=a.dtype, device=True))
    out = impl(a, b)
    problems = []
    if not isinstance(out, torch.Tensor):
        problems.append(f"returned {type(out).__name__}, not a tensor")
    else:
        if out.dtype != a.dtype:
            problems.append(f"dtype {dtype_name(out.dtype)} != {name}")
        if tuple(out.shape) != ref.shape:
            problems.append(f"shape {tuple(out.shape)} != {ref.shape}")
        if out.device != a.device:
            problems.append(f"on {out.device}, inputs on {a.device}")
    record.require(exact("output structure", len(problems), 3, "; ".join(problems)))
    record.require(elementwise_bound(bound_name(name), exact_numpy(out), ref, bound))
