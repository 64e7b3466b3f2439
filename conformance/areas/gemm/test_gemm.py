"""GEMM conformance: C = A B within a rigorous forward-error bound of the float64 product.

The bound (oracles/gemm.py) certifies float32 accumulation for float16/bfloat16 inputs and
the input precision for float32/float64, plus one rounding of the output. Every test runs
per registered gemm implementation and dtype; features: "2d", "batched", "broadcast".
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from conformance.areas.gemm import precision
from conformance.areas.gemm.checks import DISTRIBUTIONS, check_gemm, make_operand
from conformance.harness.probes.blas import served_by
from conformance.harness.strategies import seeds, sizes
from conformance.harness.tensors import LAYOUTS, dtype_name, from_numpy, relayout

pytestmark = pytest.mark.area("gemm")
MAX_MACS = 1 << 21  # m*n*k per Hypothesis example: keeps the ci profile fast on CPU


def _operands(rng, a_shape, b_shape, dtype, dist, device, layouts=("contiguous",) * 2):
    k = a_shape[-1]
    a = relayout(from_numpy(make_operand(rng, a_shape, dtype, dist, k), dtype, device),
                 layouts[0])
    b = relayout(from_numpy(make_operand(rng, b_shape, dtype, dist, k), dtype, device),
                 layouts[1])
    return a, b


@st.composite
def _mnk(draw, max_k: int = 4096):
    k = draw(st.one_of(sizes(1, 257), st.sampled_from([511, 1024, 1031, 2048, 4093, 4096])),
             label="k")
    k = min(k, max_k)
    room = max(MAX_MACS // k, 1)
    m = draw(sizes(1, max(1, min(257, room))), label="m")
    n = draw(sizes(1, max(1, min(257, room // m))), label="n")
    return m, n, k


@pytest.mark.needs("2d")
@given(data=st.data())
def test_random_2d(impl, dtype, device, record, data):
    """2-D products: awkward m, n, k (k up to 4096), transposed/strided/offset operands."""
    m, n, k = data.draw(_mnk(), label="m,n,k")
    dist = data.draw(st.sampled_from(DISTRIBUTIONS), label="dist")
    layouts = (data.draw(st.sampled_from(LAYOUTS), label="layout_a"),
               data.draw(st.sampled_from(LAYOUTS), label="layout_b"))
    rng = np.random.default_rng(data.draw(seeds(), label="seed"))
    a, b = _operands(rng, (m, k), (k, n), dtype, dist, device, layouts)
    check_gemm(record, impl, a, b, dist=dist)


@pytest.mark.needs("batched")
@given(data=st.data())
def test_batched(impl, dtype, device, record, data):
    """3-D operands with one batch size (the bmm contract), any layout."""
    m, n, k = data.draw(_mnk(max_k=1024), label="m,n,k")
    batch = data.draw(st.sampled_from([1, 2, 3, 7]), label="batch")
    dist = data.draw(st.sampled_from(DISTRIBUTIONS), label="dist")
    layouts = (data.draw(st.sampled_from(LAYOUTS), label="layout_a"),
               data.draw(st.sampled_from(LAYOUTS), label="layout_b"))
    rng = np.random.default_rng(data.draw(seeds(), label="seed"))
    a, b = _operands(rng, (batch, m, k), (batch, k, n), dtype, dist, device, layouts)
    check_gemm(record, impl, a, b, dist=dist)


BROADCAST_SHAPES = [
    ((7,), (7,)), ((7,), (7, 5)), ((3, 7), (7,)), ((2, 3, 7), (7, 5)), ((3, 7), (4, 7, 5)),
    ((2, 1, 3, 7), (4, 7, 5)), ((1, 3, 7), (6, 7, 2)), ((5,), (2, 3, 5, 4)), ((0, 3, 4), (4, 2)),
    ((3, 0), (0, 4)), ((2, 3, 129), (129, 1)),
]


@pytest.mark.needs("broadcast")
@pytest.mark.parametrize("a_shape,b_shape", BROADCAST_SHAPES, ids=str)
def test_broadcast_and_vectors(impl, dtype, device, record, rng, a_shape, b_shape):
    """torch.matmul's rank rules: 1-D operands, batch broadcasting, empty and k = 0."""
    for dist in ("uniform", "integers"):
        for layouts in (("contiguous", "contiguous"), ("strided", "transposed")):
            a, b = _operands(rng, a_shape, b_shape, dtype, dist, device, layouts)
            check_gemm(record, impl, a, b, dist=dist)


# Long reductions with ragged tails: primes and tile multiples +- 1 above 2048 (K mod 16 =
# 5, 5, 7, 13, 1, 15, 15; none a multiple of 16, 32, ..., 256), where a split-K or panel
# loop that mishandles its last, partial panel shows. Positive operands make every lost or
# doubled term an error of the same sign.
RAGGED_K = [2053, 2309, 3079, 4093, 4097, 6143, 8191]


@pytest.mark.needs("2d")
@pytest.mark.parametrize("k", RAGGED_K, ids=lambda k: f"k{k}")
def test_long_ragged_k(impl, dtype, device, record, rng, k):
    """2-D products with long, ragged K (contiguous and transposed operands)."""
    for dist in ("positive", "uniform"):
        for layouts in (("contiguous", "contiguous"), ("transposed", "transposed")):
            a, b = _operands(rng, (5, k), (k, 3), dtype, dist, device, layouts)
            check_gemm(record, impl, a, b, dist=dist)


@pytest.mark.needs("batched")
@pytest.mark.parametrize("k", RAGGED_K, ids=lambda k: f"k{k}")
def test_long_ragged_k_batched(impl, dtype, device, record, rng, k):
    """The same K values in batched form (3 batches)."""
    for dist in ("positive", "uniform"):
        a, b = _operands(rng, (3, 5, k), (3, k, 3), dtype, dist, device)
        check_gemm(record, impl, a, b, dist=dist)


FIXED_SHAPES = [(1, 1, 1), (1, 4096, 1), (2, 4096, 3), (17, 1023, 1), (113, 129, 127),
                (127, 257, 239), (64, 4096, 64), (1, 203, 799)]


@pytest.mark.needs("2d")
@pytest.mark.parametrize("m,k,n", FIXED_SHAPES, ids=lambda v: str(v))
def test_awkward_shapes(impl, dtype, device, record, rng, m, k, n):
    """Size-1, prime and off-by-one sizes; K up to 4096; transposed operands."""
    for layouts in (("contiguous", "contiguous"), ("transposed", "transposed")):
        a, b = _operands(rng, (m, k), (k, n), dtype, "uniform", device, layouts)
        check_gemm(record, impl, a, b, dist="uniform")


@pytest.mark.needs("2d")
@pytest.mark.parametrize("k", [1024, 4096], ids=lambda k: f"k{k}")
def test_accumulation_precision(impl, dtype, device, record, rng, k):
    """Certifies the accumulation precision: with positive operands every partial sum grows,
    so a float16 accumulator (or half-type partial sums) exceeds the bound. Operand
    shortcuts (TF32) are test_reduced_precision's: their random errors grow like sqrt(K)."""
    a, b = _operands(rng, (16, k), (k, 16), dtype, "positive", device)
    check_gemm(record, impl, a, b, dist="positive")


@pytest.mark.needs("2d")
def test_reduced_precision(impl, dtype, device, record, rng):
    """Certifies the operand and product precision at small and moderate K: operands on
    which a shortcut's rounding errors all have one sign (precision.py), so they add up
    linearly in K and exceed the bound. float32: TF32 (K up to 8192) and bfloat16 operands;
    float64: float32 operands (K up to 256) and two-float32 emulation (K <= 16); float16 /
    bfloat16: products rounded to the input type (K up to 2048 / 8192). 8 x K x 8 products;
    docs/areas/gemm.md gives each margin."""
    name = dtype_name(dtype)
    for shortcut, ks in precision.SHORTCUTS[name]:
        for k in ks:
            a, b = precision.operands(rng, shortcut, name, 8, k, 8)
            check_gemm(record, impl, from_numpy(a, dtype, device),
                       relayout(from_numpy(b, dtype, device), "transposed"),
                       shortcut=shortcut, k=k)


@pytest.mark.needs("2d")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16],
                         ids=lambda d: str(d).removeprefix("torch."))
def test_cpu_fp16_blas_path(impl, dtype, device, record, rng):
    """The CPU half-precision GEMM path, at 512^3 and K = 4096; for torch's own
    implementations, records which library (oneDNN, MKL, OpenBLAS, ATen fallback) served
    it. The library comes from a probe of torch.matmul in a child process, so it describes
    torch, never a plugged-in implementation."""
    if impl.origin == "builtin":  # the GEMM built-ins are all adapters over torch's API
        served = served_by(str(dtype).removeprefix("torch."))
        record.note(**{"torch probe: CPU matmul served by": served})
    for (m, k, n), dist in (((512, 512, 512), "uniform"), ((64, 4096, 48), "positive")):
        a, b = _operands(rng, (m, k), (k, n), dtype, dist, device)
        check_gemm(record, impl, a, b, dist=dist)
