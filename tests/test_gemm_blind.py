"""test_reduced_precision (conformance/areas/gemm/precision.py) against the blind GEMM faults
(tests/planted/blind_gemm_faults.py, written without reading the checks): the shortcuts that
passed every GEMM test before it (TF32 only for K >= 2048, half-type products only for
K >= 2048, float64 from two float32 pieces for K >= 16; TF32 for K >= 1024, caught before
only by the random tests) fail it, and the two correct outside implementations pass. Plus
the construction's own promises: exactly representable operands whose rounding errors all
have one sign."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.areas.gemm import precision
from conformance.harness.tensors import rounded
from tests.conftest import SUITE

# fault -> the dtypes whose test_reduced_precision must fail
KILLS = {
    "tf32_k_ge_2048": {"float32"},
    "tf32_k_ge_1024": {"float32"},
    "half_products_k_ge_2048": {"float16", "bfloat16"},
    "f64_f32x2_emulated_k_ge_16": {"float64"},
}
CORRECT = ("numpy_float64_cast", "float32_accumulate")
DTYPES = ("float16", "bfloat16", "float32", "float64")


def test_blind_gemm_shortcuts_fail_reduced_precision(suite):
    impls = [f"--impl=gemm=planted.blind_gemm_faults:{x}" for x in (*KILLS, *CORRECT)]
    run = suite(str(SUITE / "gemm"), "-n", "0", "-q", "-p", "no:randomly", "--no-builtins",
                "-k", "test_reduced_precision", *impls)
    assert run.returncode == 1, run.output[-3000:]

    def outcomes(attr: str) -> dict[str, str]:
        found = [v for k, v in run.by_impl().items() if k.split(".")[-1] == attr]
        assert len(found) == 1, (attr, sorted(run.by_impl()))
        return {r["nodeid"].split("[")[1].rstrip("]").split("-")[-1]: r["outcome"]
                for r in found[0]}

    for fault, dtypes in KILLS.items():
        got = outcomes(fault)
        assert {d for d in DTYPES if got[d] == "failed"} == dtypes, (fault, got)
    for attr in CORRECT:
        got = outcomes(attr)
        assert all(got[d] == "passed" for d in DTYPES), (attr, got)


def _round_to_bits(x: np.ndarray, p: int, mode: str) -> np.ndarray:
    """x rounded to p significand bits: to nearest (ties to even) or by truncation."""
    m, e = np.frexp(x)  # x = m 2^e, m in [0.5, 1): p bits are m 2^p's integer part
    scaled = np.ldexp(m, p)
    q = np.round(scaled) if mode == "nearest" else np.trunc(scaled)
    return np.ldexp(q, e - p)


@pytest.mark.harness_only
@pytest.mark.parametrize("dtype,p", [("float32", 11), ("float32", 8), ("float64", 24)])
def test_below_half_shrinks_every_operand(dtype, p):
    x = precision.below_half(np.random.default_rng(1), (64, 64), dtype, p)
    assert np.array_equal(rounded(x, dtype), x) and (x > 0).all()
    for mode in ("nearest", "truncate"):
        loss = (x - _round_to_bits(x, p, mode)) / x  # relative, > 0: rounded down
        assert (loss >= 2.0**-p / (1 + 2.0**-precision.SIGNIFICAND_SPREAD) * 0.99).all()
        assert (loss <= 2.0**-p).all()


@pytest.mark.harness_only
def test_float32_pair_residual_is_just_below_half_an_ulp_of_lo():
    x = precision.f32_pair_residual(np.random.default_rng(2), (64, 64))
    hi = x.astype(np.float32).astype(np.float64)
    lo = (x - hi).astype(np.float32).astype(np.float64)
    r = x - hi - lo  # exact in float64 (Sterbenz / the pieces share x's bits)
    scale = np.ldexp(1.0, np.frexp(x)[1] - 1)  # 2^e, x in [2^e, 2^(e+1))
    assert np.array_equal(r / scale, np.full(x.shape, 2.0**-49 - 2.0**-52))
    assert ((lo / scale) >= 2.0**-25 * (2 - 2.0**-3)).all()


@pytest.mark.harness_only
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("k", [2, 16, 2048])
def test_biased_products_round_down_and_cancel(dtype, k):
    u = {"float16": 2.0**-11, "bfloat16": 2.0**-8}[dtype]
    a, b = precision.biased_products(np.random.default_rng(k), 3, k, 4, dtype)
    assert np.array_equal(rounded(a, dtype), a) and np.array_equal(rounded(b, dtype), b)
    prod = a[:, :, None] * b[None, :, :]  # (m, k, n), exact
    err = rounded(prod, dtype) - prod
    biased = (err <= -precision.BIAS * u * np.abs(prod)).sum(axis=1)
    assert (biased >= k - 1).all()  # all but the one exact, cancelling term
    total, size = prod.sum(axis=1), np.abs(prod).sum(axis=1)
    assert (np.abs(total) <= u * 4 * np.abs(prod).max(axis=1)).all()
    assert (size > 0).all()
