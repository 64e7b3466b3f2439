"""What a silent out-of-bounds call gave back, in words: the failure message says which
reading of the bad indices the result matches (clamped, wrapped, truncated to 32 bits,
the guard value read from outside the operand, NaN or zero filled), not just "no error"."""

from __future__ import annotations

from typing import Any

import numpy as np

from conformance.areas.indexing.cases import Case
from conformance.areas.indexing.memory import GUARD


def _bad_mask(case: Case, bounds: tuple[float, float]) -> np.ndarray:
    index = case.values(case.index)
    return (index < bounds[0]) | (index >= bounds[1])


def _readings(index: np.ndarray, bad: np.ndarray, n: int) -> list[tuple[str, np.ndarray]]:
    """Each way a kernel may have read the bad entries, as an index array."""
    out = []
    for label, value in (("clamped into [0, n)", np.clip(index, 0, n - 1)),
                         ("wrapped modulo n", np.mod(index, n))):
        out.append((label, np.where(bad, value, index)))
    low32 = index.astype(np.int64) & 0xFFFFFFFF
    low32 = np.where(low32 >= 2**31, low32 - 2**32, low32)
    if bool(((low32 != index) & bad).any()):
        truncated = np.where(bad, low32, index)
        if bool((np.abs(truncated) < n).all()):
            out.append(("truncated to 32 bits", np.mod(truncated, n)))
    return out


def _close(got: np.ndarray, want: Any) -> bool:
    want = np.asarray(want)
    if got.shape != want.shape:
        return False
    with np.errstate(invalid="ignore"):
        return bool(np.allclose(got, want, rtol=1e-2, atol=1e-2, equal_nan=True))


def what_came_back(oracle: Any, case: Case, bounds: tuple[float, float], got: np.ndarray,
                   integral: bool) -> str:
    """One phrase for the result ``got`` of the invalid ``case`` (the destination after
    an in-place op): the reading it matches, or what it holds."""
    got = np.asarray(got)
    got = got.astype(np.complex128 if np.iscomplexobj(got) else np.float64)
    bad = _bad_mask(case, bounds)
    if case.n > 0 and bad.any():
        index = case.values(case.index)
        for label, reading in _readings(index, bad, case.n):
            arrays = {k: v for k, (_, v) in case.arrays.items()}
            arrays[case.index] = reading
            try:
                want = oracle(arrays, case.scalars, integral).value
            except Exception:
                continue
            if _close(got, want):
                return f"the result of the bad indices {label}"
    words = [f"shape {tuple(got.shape)}"]
    if got.size and (got == GUARD).any():
        words.append(f"{int((got == GUARD).sum())} element(s) equal to the guard value "
                     f"{GUARD} (read from outside the operand)")
    if got.size and np.isnan(got).any():
        words.append(f"{int(np.isnan(got).sum())} NaN(s) (NaN fill?)")
    if got.size and (got == 0).any():
        words.append(f"{int((got == 0).sum())} zero(s) (zero fill?)")
    return "a result matching no reading of the bad indices: " + ", ".join(words)
