"""The oracles against independent references: a naive Python selection for TopK, exact
rational arithmetic (mpmath / fractions) for the GEMM product, and simulated accumulations
for the GEMM error bound (it must hold for float32 accumulation in any order and be
violated by a float16 accumulator)."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles import gemm, topk

pytestmark = pytest.mark.harness_only  # no torch behaviour: newest torch only in CI

NAN = float("nan")


def _naive_topk(row: list[float], k: int, largest: bool) -> list[float]:
    def key(v: float) -> tuple[int, float]:
        return (1, 0.0) if math.isnan(v) else (0, v)  # NaN above everything

    return sorted(row, key=key, reverse=largest)[:k]


def _same(a, b) -> bool:
    return len(a) == len(b) and all(
        (math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b, strict=True))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(row=st.lists(st.sampled_from([NAN, -math.inf, math.inf, -0.0, 0.0, 1.0, -1.0, 2.5])
                    | st.floats(allow_nan=True), min_size=0, max_size=30),
       data=st.data())
def test_topk_matches_a_naive_selection(row, data):
    k = data.draw(st.integers(0, len(row)), label="k")
    largest = data.draw(st.booleans(), label="largest")
    got = topk.topk(np.array(row, dtype=np.float64), k, axis=0, largest=largest).tolist()
    assert _same(got, _naive_topk(row, k, largest))


def test_topk_documented_semantics():
    x = np.array([1.0, NAN, -0.0, 3.0, NAN, 0.0])
    assert _same(topk.topk(x, 3, 0, True).tolist(), [NAN, NAN, 3.0])
    assert _same(topk.topk(x, 3, 0, False).tolist(), [-0.0, 0.0, 1.0])
    assert topk.same_values(np.array([-0.0]), np.array([0.0]))[0]
    assert not topk.identical_values(np.array([-0.0]), np.array([0.0]))[0]
    assert topk.identical_values(np.array([NAN]), np.array([-NAN]))[0]


def test_topk_integers_are_exact():
    big = np.array([2**63 - 1, 2**63 - 2, -(2**63), 5], dtype=np.int64)
    assert topk.topk(big, 2, 0, True).tolist() == [2**63 - 1, 2**63 - 2]
    assert topk.topk(big, 1, 0, False).tolist() == [-(2**63)]
    with pytest.raises(ValueError):
        topk.topk(big, 5, 0)


def test_topk_along_any_axis():
    rng = np.random.default_rng(1)
    x = rng.integers(-3, 4, (4, 5, 6)).astype(np.float64)
    for axis in range(-3, 3):
        got = topk.topk(x, 2, axis, True)
        want = -np.sort(-x, axis=axis).take([0, 1], axis=axis)
        np.testing.assert_array_equal(got, want)


def test_gemm_product_against_mpmath():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 50)) * 2.0 ** rng.integers(-20, 20, (3, 50))
    b = rng.standard_normal((50, 4))
    ref = gemm.matmul(a, b)
    mpmath.mp.prec = 300
    for i in range(3):
        for j in range(4):
            exact = mpmath.fsum(mpmath.mpf(a[i, t]) * mpmath.mpf(b[t, j]) for t in range(50))
            p = sum(abs(a[i, t] * b[t, j]) for t in range(50))
            assert abs(float(exact - mpmath.mpf(ref[i, j]))) <= gemm.gamma(50, gemm.U64) * p


def test_gemm_broadcasting_follows_matmul_rules():
    a, b = np.ones((2, 1, 3, 4)), np.ones((5, 4, 6))
    assert gemm.matmul(a, b).shape == (2, 5, 3, 6)
    assert gemm.matmul(np.ones(4), np.ones(4)).shape == ()
    assert gemm.matmul(np.ones(4), np.ones((4, 2))).shape == (2,)


def test_gamma():
    assert gemm.gamma(10, 2.0**-24) == pytest.approx(10 * 2.0**-24 / (1 - 10 * 2.0**-24))
    assert gemm.gamma(2**24, 2.0**-24) == math.inf


def _fraction(x: float) -> Fraction:
    return Fraction(float(x))


def _accumulate(a_row, b_col, dtype, order):
    """Sum of products with every operation rounded to ``dtype`` (products exact for
    16-bit inputs in float32), in the given order."""
    acc = dtype(0)
    for t in order:
        acc = dtype(acc + dtype(dtype(a_row[t]) * dtype(b_col[t])))
    return acc


@pytest.mark.parametrize("out_dtype", [np.float16, np.float32])
def test_gemm_bound_holds_for_float32_accumulation_in_any_order(out_dtype):
    rng = np.random.default_rng(3)
    k = 700
    for trial in range(8):
        a = rng.uniform(-1, 1, (1, k)).astype(out_dtype).astype(np.float64)
        b = rng.uniform(0.5, 1, (k, 1)).astype(out_dtype).astype(np.float64)
        ref = gemm.matmul(a, b)
        name = np.dtype(out_dtype).name
        bound = gemm.error_bound(a, b, ref, accumulate="float32", output=name)[0, 0]
        order = rng.permutation(k) if trial % 2 else np.arange(k)
        acc = _accumulate(a[0], b[:, 0], np.float32, order)
        c = float(out_dtype(acc))
        exact = sum(_fraction(a[0, t]) * _fraction(b[t, 0]) for t in range(k))
        assert abs(Fraction(c) - exact) <= Fraction(bound)  # against the exact value
        assert abs(c - ref[0, 0]) <= bound  # and against the float64 reference


def test_gemm_bound_is_violated_by_float16_accumulation():
    rng = np.random.default_rng(4)
    k = 1024
    a = rng.uniform(0.5, 1, (1, k)).astype(np.float16).astype(np.float64)
    b = rng.uniform(0.5, 1, (k, 1)).astype(np.float16).astype(np.float64)
    ref = gemm.matmul(a, b)
    bound = gemm.error_bound(a, b, ref, accumulate="float32", output="float16")[0, 0]
    c = float(_accumulate(a[0], b[:, 0], np.float16, range(k)))
    assert abs(c - ref[0, 0]) > 4 * bound


def test_gemm_bound_components():
    a = np.full((1, 4), 1.0)
    b = np.full((4, 1), 1.0)
    ref = gemm.matmul(a, b)
    bound = gemm.error_bound(a, b, ref, accumulate="float32", output="bfloat16")[0, 0]
    acc = (1 + 2.0**-8) * (gemm.gamma(4, 2.0**-24) + gemm.gamma(4, 2.0**-53)) * 4
    expected = acc + 2.0**-8 * 4 + 2.0**-134 + 4 * 2.0**-150
    assert bound == pytest.approx(expected * (1 + 16 * 2.0**-53), rel=1e-15)
    assert gemm.FORMATS["float16"].eta == 2.0**-25
