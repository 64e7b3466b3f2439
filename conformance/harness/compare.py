"""Comparison helpers. Each returns a Measurement (measured, bound), never a bare bool.

``Record.require`` turns a Measurement into a pass or a uniform failure message; keeping
the two apart lets the report show margins (measured / bound) for passing checks too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Measurement:
    """One check: ``measured <= bound`` passes. ``exact`` checks count mismatches (bound 0)."""

    name: str
    measured: float
    bound: float
    detail: str = ""
    exact: bool = False
    # (actual, reference, bound) of an elementwise check, for --repro-dir's scripts
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(
        default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return bool(self.measured <= self.bound)

    @property
    def ratio(self) -> float:
        """measured / bound: the margin used (< 1 passes); 0/0 counts as 0."""
        if self.bound > 0:
            return float(self.measured / self.bound)
        return 0.0 if self.measured == 0 else float("inf")

    def scaled(self, factor: float) -> Measurement:
        """The same check under a bound loosened by ``factor`` (exact checks never loosen)."""
        if self.exact or factor == 1.0:
            return self
        arrays = None if self.arrays is None else (*self.arrays[:2], self.arrays[2] * factor)
        return Measurement(self.name, self.measured, self.bound * factor, self.detail,
                           self.exact, arrays)


def _fmt_index(index: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(int(i)) for i in index) + ")"


def elementwise_bound(
    name: str, actual: np.ndarray, ref: np.ndarray, bound: np.ndarray
) -> Measurement:
    """``|actual - ref| <= bound`` per element, all float64 arrays of one shape.

    Reported at the element with the largest err/bound ratio. Non-finite values must match
    the reference exactly (same infinity, NaN where NaN); a NaN or infinity where the
    reference is finite is an unbounded error.
    """
    actual = np.asarray(actual, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    bound = np.broadcast_to(np.asarray(bound, dtype=np.float64), ref.shape)
    if actual.shape != ref.shape:
        return Measurement(name, float("inf"), 0.0, f"shape {actual.shape} != {ref.shape}")
    if ref.size == 0:
        return Measurement(name, 0.0, 0.0, "empty")
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(actual - ref)
    same_nonfinite = (~np.isfinite(ref)) & ((actual == ref) | (np.isnan(actual) & np.isnan(ref)))
    err = np.where(same_nonfinite, 0.0, err)
    err = np.where(np.isnan(err), np.inf, err)
    # an exact element holds under any bound, a NaN one too (a NaN reference's bound is moot)
    bound = np.where((err == 0) & np.isnan(bound), np.inf, bound)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(err == 0, 0.0, err / bound)
    flat = int(np.argmax(ratio))
    index = np.unravel_index(flat, ref.shape)
    detail = (
        f"worst element at {_fmt_index(index)}: got {float(actual[index])!r}, "
        f"expected {float(ref[index])!r}, |error| {err[index]:.3g} vs bound {bound[index]:.3g}; "
        f"{int(np.count_nonzero(err > bound))} of {ref.size} elements out of bound"
    )
    return Measurement(name, float(err[index]), float(bound[index]), detail,
                       arrays=(actual, ref, bound))


def exact(name: str, mismatches: int, total: int, detail: str = "") -> Measurement:
    """An exact check: ``mismatches`` of ``total`` items differ (0 passes)."""
    text = f"{mismatches} of {total} differ" + (f"; {detail}" if detail else "")
    return Measurement(name, float(mismatches), 0.0, text if mismatches else "", exact=True)
