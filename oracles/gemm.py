"""Matrix-product reference and a rigorous forward-error bound, in numpy float64.

For C = A B with inner dimension k, computed with products and sums in a format of unit
roundoff ``u_acc`` (any summation order, with or without FMA) and rounded once to an output
format of unit roundoff ``u_out``, the standard bound (Higham, *Accuracy and Stability of
Numerical Algorithms*, 2nd ed., section 3.5) gives, elementwise and with P = |A| |B|:

    |S_hat - S|   <= gamma_k(u_acc) P                 accumulation
    |C_hat - S_hat| <= u_out |S_hat| + eta_out         output rounding (eta: underflow)

The reference R = A B is itself computed in float64, |R - S| <= gamma_k(2^-53) P. Hence

    |C_hat - R| <= (1 + u_out)(gamma_k(u_acc) + gamma_k(u64)) P + u_out |R|
                   + eta_out + k eta_acc,

which ``error_bound`` returns (with a final relative slack of 4 u64 k for evaluating the
bound itself in float64). gamma_k(u) = k u / (1 - k u).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

U64 = 2.0**-53


@dataclass(frozen=True)
class Format:
    """A floating-point format: unit roundoff, smallest subnormal, largest finite."""

    name: str
    unit_roundoff: float
    min_subnormal: float
    max_finite: float

    @property
    def eta(self) -> float:
        """Largest absolute rounding error in the subnormal range (half a subnormal step)."""
        return self.min_subnormal / 2


FORMATS = {
    "float16": Format("float16", 2.0**-11, 2.0**-24, 65504.0),
    "bfloat16": Format("bfloat16", 2.0**-8, 2.0**-133, 3.3895313892515355e38),
    "float32": Format("float32", 2.0**-24, 2.0**-149, 3.4028234663852886e38),
    "float64": Format("float64", 2.0**-53, 2.0**-1074, 1.7976931348623157e308),
}


def gamma(k: int, u: float) -> float:
    ku = k * u
    if ku >= 1:
        return float("inf")
    return ku / (1 - ku)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """float64 product with torch.matmul's (= numpy.matmul's) broadcasting rules."""
    return np.matmul(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


def abs_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """P = |A| |B| (elementwise absolute values, then the product)."""
    return np.matmul(np.abs(np.asarray(a, np.float64)), np.abs(np.asarray(b, np.float64)))


def error_bound(
    a: np.ndarray, b: np.ndarray, ref: np.ndarray, *, accumulate: str, output: str
) -> np.ndarray:
    """Elementwise bound on |C_hat - ref| for a product accumulated in ``accumulate`` and
    rounded to ``output`` (format names as in FORMATS)."""
    acc, out = FORMATS[accumulate], FORMATS[output]
    k = np.asarray(a).shape[-1] if np.asarray(a).ndim else 1
    p = abs_product(a, b)
    coeff = (1 + out.unit_roundoff) * (gamma(k, acc.unit_roundoff) + gamma(k, U64))
    bound = coeff * p + out.unit_roundoff * np.abs(ref) + out.eta + k * acc.eta
    return bound * (1 + 4 * k * U64)
