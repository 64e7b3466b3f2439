"""The collectives oracle's rounding bounds (oracles/collectives.py): against sums,
averages and products simulated in float16 / bfloat16 / float32 in random orders, not
vacuous, and the float64 reference correctly rounded."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from oracles import collectives as cl

pytestmark = pytest.mark.harness_only

A = np.array

# ----------------------------------------------------------------------------- bounds

def _bf16(x) -> np.ndarray:
    """Round to bfloat16 (nearest, ties to even on the float32 bit pattern), as float32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


ROUND = {
    "float16": lambda v: np.asarray(v, dtype=np.float64).astype(np.float16),
    "float32": lambda v: np.asarray(v, dtype=np.float64).astype(np.float32),
    "bfloat16": lambda v: _bf16(np.asarray(v, dtype=np.float64).astype(np.float32)),
}


def _add(a, b, fmt: str):
    """a + b rounded to fmt (operands are fmt values; numpy's float16 / float32 arithmetic
    and a float32 sum rounded to bfloat16 are correctly rounded: double rounding is
    innocuous with 24 >= 2p + 2 bits)."""
    if fmt == "bfloat16":
        return _bf16(np.float32(a) + np.float32(b))
    return a + b


def _tree_sum(terms: list, fmt: str, rng) -> np.ndarray:
    """Sum the terms (all in fmt) with a random binary tree, rounding every addition."""
    terms = list(terms)
    while len(terms) > 1:
        i, j = sorted(rng.choice(len(terms), size=2, replace=False))
        b = terms.pop(j)
        a = terms.pop(i)
        terms.append(_add(a, b, fmt))
    return terms[0]


def _inputs(fmt: str, w: int, rng, n: int = 200) -> list:
    scale = np.exp2(rng.integers(-6, 7, size=(w, n)))
    vals = rng.standard_normal((w, n)) * scale
    vals[:, :20] = np.abs(vals[:, :20])  # same-sign columns: no cancellation
    return [ROUND[fmt](v) for v in vals]


def test_sum_bound_zero_for_one_rank():
    assert_array_equal(cl.sum_bound([A([1., -2.])], "float16"), [0, 0])
    assert cl.gamma(0, 0.5) == 0
    assert [cl.unit_roundoff(f) for f in ("float64", "float32", "float16", "bfloat16")] == [
        2.0**-53, 2.0**-24, 2.0**-11, 2.0**-8]
    assert cl.gamma(3, 2.0**-4) == 3 / 13


@pytest.mark.parametrize("fmt", ["float16", "float32", "bfloat16"])
@pytest.mark.parametrize("w", [2, 3, 8])
def test_sum_bound_covers_any_order(fmt, w):
    rng = np.random.default_rng(w * 7 + len(fmt))
    xs = _inputs(fmt, w, rng)
    exact = cl.all_reduce(xs, "sum")[0]
    bound = cl.sum_bound(xs, fmt)
    worst = 0.0
    for _ in range(6):
        err = np.abs(np.asarray(_tree_sum(xs, fmt, rng), dtype=np.float64) - exact)
        assert np.all(err <= bound)
        worst = max(worst, float(np.max(err / np.maximum(bound, 1e-300))))
    assert worst > 0  # the simulation does round
    # a wider accumulator rounded once to the input format is covered too
    wide = ROUND[fmt](np.sum(np.stack([np.asarray(x, np.float64) for x in xs]), axis=0))
    assert np.all(np.abs(wide.astype(np.float64) - exact) <= bound)


def test_sum_bound_not_vacuous():
    xs = [np.float16(1), np.float16(2.0**-11), np.float16(2.0**-11)]
    s = (xs[0] + xs[1]) + xs[2]  # ties to even: 1 + 2^-11 -> 1, twice
    exact = 1 + 2.0**-10
    err = abs(float(s) - exact)
    assert err == 2.0**-10
    xs64 = [A([float(x)]) for x in xs]
    bound = float(cl.sum_bound(xs64, "float16")[0])
    g = cl.gamma(2, 2.0**-11)
    assert err <= bound < 4 * g * exact
    assert err > 0.99 * bound  # the bound is nearly attained


@pytest.mark.parametrize("w", [3, 4, 5])
def test_avg_bound_covers_both_formulas(w):
    rng = np.random.default_rng(50 + w)
    fmt = "float16"
    xs = _inputs(fmt, w, rng)
    exact = cl.all_reduce(xs, "sum")[0] / w  # the sum is exact in float64 here
    bound = cl.avg_bound(xs, fmt)
    wq, recip = np.float16(w), np.float16(1 / w)
    for _ in range(4):
        s = _tree_sum(xs, fmt, rng)
        for got in (
            s / wq,  # post-division
            s * recip,  # post-multiplication by fl(1/W)
            _tree_sum([x / wq for x in xs], fmt, rng),  # pre-division
            _tree_sum([x * recip for x in xs], fmt, rng),  # pre-multiplication (PreMulSum)
        ):
            assert got.dtype == np.float16
            assert np.all(np.abs(got.astype(np.float64) - exact) <= bound)


def test_product_bound_covers_any_order():
    rng = np.random.default_rng(5)
    for fmt in ("float16", "bfloat16", "float32"):
        w = 5
        xs = [ROUND[fmt](rng.uniform(0.5, 2.0, 100) * rng.choice([-1, 1], 100))
              for _ in range(w)]
        exact = [Fraction(1)] * 100
        for x in xs:
            exact = [e * Fraction(float(v)) for e, v in zip(exact, x, strict=True)]
        bound = cl.product_bound(xs, fmt)
        for _ in range(3):
            order = rng.permutation(w)
            p = xs[order[0]]
            for k in order[1:]:
                p = _bf16(np.float32(p) * xs[k]) if fmt == "bfloat16" else p * xs[k]
            err = np.array([abs(Fraction(float(v)) - e) for v, e in zip(p, exact, strict=True)])
            assert np.all(err.astype(np.float64) <= bound)


def test_reference_is_correctly_rounded():
    rng = np.random.default_rng(9)
    w, n = 6, 300
    vals = rng.standard_normal((w, n)) * np.exp2(rng.integers(-60, 60, size=(w, n)))
    vals[:, 0] = [1e308, 1e308, -1e308, -1e308, 1.0, 2.0**-60]  # overflowing partial sums
    xs = list(vals)
    got = cl.all_reduce(xs, "sum")[0]
    want = np.array([float(sum(Fraction(float(v)) for v in col)) for col in vals.T])
    assert_array_equal(got, want)
    assert np.all(np.isfinite(got))
    with np.errstate(over="ignore", invalid="ignore"):
        naive = np.sum(vals, axis=0)
    assert np.any(naive != want)  # the naive float64 sum would not be exact here
    xs = list(vals[:, 1:])
    for op in ("sum", "avg", "product"):
        ref = cl.all_reduce(xs[:3], op)[0]
        ex = [Fraction(float(a)) + Fraction(float(b)) + Fraction(float(c))
              for a, b, c in zip(*xs[:3], strict=True)]
        if op == "avg":
            ex = [e / 3 for e in ex]
        if op == "product":
            ex = [Fraction(float(a)) * Fraction(float(b)) * Fraction(float(c))
                  for a, b, c in zip(*xs[:3], strict=True)]
        err = np.array([float(abs(Fraction(float(r)) - e)) for r, e in zip(ref, ex, strict=True)])
        assert np.all(err <= cl.reference_error(xs[:3], op))
    assert_array_equal(cl.reference_error(xs, "max"), np.zeros(n - 1))


def test_exact_or_rounded():
    v = A([1.0, -3.0, 0.0])
    assert_array_equal(cl.exact_or_rounded(v, "float16"), [2.0**-11, 3 * 2.0**-11, 0])
    x = np.random.default_rng(1).standard_normal(100)
    for fmt, rnd in ROUND.items():
        err = np.abs(rnd(x).astype(np.float64) - x)
        assert np.all(err <= cl.exact_or_rounded(x, fmt))


def test_avg_bound_needs_the_rounded_reciprocal():
    """NCCL-style pre-multiplication by fl(1/3) rounds twice per term: this case exceeds the
    one-rounding-per-term formula and stays within avg_bound."""
    x = np.float16([-0.00724029541015625, -3.048828125, -0.048309326171875])
    r = np.float16(1 / 3)
    got = float((x[0] * r + x[1] * r) + x[2] * r)
    exact = sum(float(v) for v in x) / 3
    u, a = 2.0**-11, float(np.sum(np.abs(x.astype(np.float64))))
    g = cl.gamma(2, u)
    one_rounding = max(g * a / 3 + u * abs(exact) * (1 + g), g * a / 3 + u * a / 3 * (1 + g))
    bound = float(cl.avg_bound([A([float(v)]) for v in x], "float16")[0])
    assert one_rounding < abs(got - exact) <= bound
