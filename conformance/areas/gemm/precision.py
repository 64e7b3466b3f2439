"""Operands on which a precision shortcut's rounding errors all have one sign.

Random operands make a shortcut's rounding errors unbiased: they grow like sqrt(K), while
the rigorous bound (oracles/gemm.py) grows like K, so a shortcut hides for long K. Here
every term's error has the same sign, so the error adds up linearly in K and exceeds the
bound deterministically over a stated K range (docs/areas/gemm.md, "which test catches
what"). Every value is exactly representable in the dtype under test.

- ``below_half``: float32 / float64 operands whose significand bits below a p-bit format's
  half-ulp are "just below half", x = 2^e (1 + j 2^-(p-1) + 2^-p - 2^-(P-1)) (P: the
  dtype's precision). Rounding x to p bits (to nearest, ties either way, or truncating)
  shrinks |x| by 2^e (2^-p - 2^-(P-1)), a relative error of at least 2^-p / m (m the
  significand, kept below 1 + 2^-6); all operands positive, so every product loses about
  2^-(p-1) of itself.
- ``f32_pair_residual``: float64 operands x = hi + lo + r with hi, lo float32 values and the
  residual r just below half an ulp of lo: an emulation from two float32 pieces
  (hi*hi + hi*lo + lo*hi, ~48 bits) loses lo_a lo_b + hi_a r_b + r_a hi_b >= 54 u64 per
  product, while the bound allows (2K + 1) u64.
- ``biased_products``: float16 / bfloat16 operands whose exact products a_k b_k all round
  (to the half type) in the negative direction by at least ``BIAS`` of u_half |a_k b_k|,
  with signs chosen greedily so the sum nearly cancels (|C| small: the one output rounding
  the bound allows, u_half |C|, then hides nothing). Rows of A and columns of B are
  power-of-two multiples of one vector, so every (i, j) product has the same rounding.
"""

from __future__ import annotations

import numpy as np

from conformance.harness.tensors import rounded

PRECISION = {"float32": 24, "float64": 53}  # significand bits, the implicit one included
SIGNIFICAND_SPREAD = 6  # significands m in [1, 1 + 2^-6): the relative loss stays ~2^-(p-1)
BIAS = 0.6  # half-type products: rounding error <= -BIAS u_half |a b|


def below_half(rng: np.random.Generator, shape: tuple[int, ...], dtype: str, p: int,
               exponents: tuple[int, int] = (-3, 3)) -> np.ndarray:
    """Positive ``dtype`` values whose bits below the p-bit half-ulp are 0111...1."""
    big_p = PRECISION[dtype]
    assert 2 <= p < big_p - 1, (p, dtype)
    top = max(1, 2 ** (p - 1 - SIGNIFICAND_SPREAD))  # j 2^-(p-1) < 2^-SPREAD
    j = rng.integers(0, top, shape)
    m = 1 + j * 2.0 ** -(p - 1) + 2.0**-p - 2.0 ** -(big_p - 1)
    return np.ldexp(m, rng.integers(exponents[0], exponents[1] + 1, shape))


def f32_pair_residual(rng: np.random.Generator, shape: tuple[int, ...],
                      exponents: tuple[int, int] = (-3, 3)) -> np.ndarray:
    """Positive float64 values x = 2^e (hi + lo + r): hi = 1 + j 2^-23 (float32, j small),
    lo = 2^-25 (1 + i 2^-23) near its top (so lo < 2^-24: hi = f32(x)), r = 2^-49 - 2^-52
    just below half an ulp of lo (so lo = f32(x - hi), rounded down by r)."""
    j = rng.integers(0, 2 ** (23 - SIGNIFICAND_SPREAD), shape)
    i = rng.integers(2**23 - 2**20, 2**23, shape)
    m = (1 + j * 2.0**-23) + 2.0**-25 * (1 + i * 2.0**-23) + (2.0**-49 - 2.0**-52)
    return np.ldexp(m, rng.integers(exponents[0], exponents[1] + 1, shape))


def _biased_pairs(rng: np.random.Generator, dtype: str, sign: float, count: int
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``count`` pairs (a, b) of ``dtype`` values, a b of sign ``sign`` and |a b| in [1, 4),
    whose product rounds to ``dtype`` with error <= -BIAS u |a b| (toward -inf)."""
    u = {"float16": 2.0**-11, "bfloat16": 2.0**-8}[dtype]
    got_a: list[np.ndarray] = []
    got_b: list[np.ndarray] = []
    have = 0
    while have < count:
        a = rounded(rng.uniform(1, 2, 8 * count + 64), dtype)
        b = rounded(rng.uniform(1, 2, 8 * count + 64), dtype)
        prod = sign * a * b  # exact: 2 x 11 significand bits fit a float64
        err = rounded(prod, dtype) - prod
        keep = err <= -BIAS * u * np.abs(prod)
        got_a.append(sign * a[keep])
        got_b.append(b[keep])
        have += int(keep.sum())
    return np.concatenate(got_a)[:count], np.concatenate(got_b)[:count]


def biased_products(rng: np.random.Generator, m: int, k: int, n: int, dtype: str
                    ) -> tuple[np.ndarray, np.ndarray]:
    """A (m, k) and B (k, n) in ``dtype`` (float16 / bfloat16, k >= 2): k - 1 products
    a_ik b_kj that round to ``dtype`` toward -inf by >= BIAS u |a_ik b_kj|, signs chosen
    greedily (each term opposite to the running sum, which stays within 4), and one last
    term, exact in ``dtype``, that cancels the sum to within one rounding of it."""
    pos_a, pos_b = _biased_pairs(rng, dtype, 1.0, k)
    neg_a, neg_b = _biased_pairs(rng, dtype, -1.0, k)
    a = np.empty(k)
    b = np.empty(k)
    total, ip, ineg = 0.0, 0, 0
    for t in range(k - 1):
        if total <= 0:
            a[t], b[t] = pos_a[ip], pos_b[ip]
            ip += 1
        else:
            a[t], b[t] = neg_a[ineg], neg_b[ineg]
            ineg += 1
        total += a[t] * b[t]  # exact: multiples of 2^-20 of magnitude < 8
    a[k - 1] = -1.0 if total > 0 else 1.0
    b[k - 1] = rounded(np.array([abs(total)]), dtype)[0]  # a b = -+b: exact in dtype
    order = rng.permutation(k)  # the sum and each term's rounding do not depend on order
    a, b = a[order], b[order]
    rows = np.ldexp(1.0, rng.integers(-2, 3, (m, 1)))  # power-of-two scales keep every
    cols = np.ldexp(1.0, rng.integers(-2, 3, (1, n)))  # product's relative rounding error
    return rows * a[None, :], b[:, None] * cols


# dtype -> (shortcut, K values) for test_reduced_precision; at every K the shortcut's error
# is >= 1.65 times the bound (docs/areas/gemm.md gives the arithmetic). Shortcuts:
#   tf32 / bfloat16 (float32 operands rounded to 11 / 8 significand bits),
#   float32 / float32x2 (float64 operands in float32, or in two float32 pieces, ~48 bits),
#   half_products (float16 / bfloat16 products rounded to the input type before the sum).
SHORTCUTS: dict[str, tuple[tuple[str, tuple[int, ...]], ...]] = {
    "float32": (("tf32", (16, 256, 2048, 4096, 8192)), ("bfloat16", (16, 256, 4096))),
    "float64": (("float32", (16, 256)), ("float32x2", (8, 16))),
    "float16": (("half_products", (16, 256, 2048)),),
    "bfloat16": (("half_products", (16, 256, 2048, 8192)),),
}
SHORTCUT_BITS = {"tf32": 11, "bfloat16": 8, "float32": 24}


def operands(rng: np.random.Generator, shortcut: str, dtype: str, m: int, k: int, n: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """A (m, k) and B (k, n), float64 arrays of ``dtype`` values, biased against
    ``shortcut``."""
    if shortcut == "half_products":
        return biased_products(rng, m, k, n, dtype)
    if shortcut == "float32x2":
        return f32_pair_residual(rng, (m, k)), f32_pair_residual(rng, (k, n))
    p = SHORTCUT_BITS[shortcut]
    return below_half(rng, (m, k), dtype, p), below_half(rng, (k, n), dtype, p)
