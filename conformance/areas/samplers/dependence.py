"""Sampler checks beyond the marginal law: far tails, dependent draws, overlapping streams.

- ``tail_checks``: exact binomial tests on the counts at or beyond representable
  thresholds near the law's 1e-4 and 1e-5 quantiles, each side, in the sample's dtype
  (16-bit laws include overflow to ±inf), valid for any probability within 2^-24 (one cell
  of torch's grid) of the law's. A tail missing beyond a threshold gives a count
  of 0 against an expected n q: with n = TAIL_N that is certain detection.
- ``magnitude_serial``: lag-1 autocorrelation of |u - 1/2| (u the null CDF of the draws):
  sees consecutive draws that share a magnitude (a radius), which the signed lag-1 cannot.
- ``pair_chisquare``: chi-square of non-overlapping consecutive pairs over an 8 x 8 grid of
  the law's (exact, rounded) cells against the product law.
- ``stream_overlap``: windows of L consecutive values shared between streams that should
  be independent (a call and the next, two seeds); L is chosen from the law's collision
  probability so that one shared window is a rejection at ALPHA.
- ``resolution_test``: how many float64 (float32) draws are representable in float32 (in
  float16 or bfloat16), against at most one in 2^20 (one in 2^8): a law computed in the
  narrower type and cast, or built on too few random bits, is representable far more often.
- ``collision_test``: how many draws repeat an earlier one, against a law with at least 40
  (float64) or 23 (float32) bits of resolution: a law built on 32 (20) random bits repeats
  about 75 (240,000) values at RESOLUTION_N even where its values are not those of a
  narrower format (``-log`` of a 32-bit uniform), which ``resolution_test`` cannot see.
- ``call_overlaps``: for large consecutive calls, windows of the next call (at a few
  anchors) searched in the whole previous call on the device: a generator whose counter
  advances less than a call consumes repeats the previous call's values.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from numpy.lib.stride_tricks import sliding_window_view
from scipy import stats as sps

from conformance.stats.gof import ALPHA, FloatFormat, TestResult, chisquare_test, serial_test
from conformance.stats.tails import binomial_test
from oracles.sampler_tails import (
    GRID_COLLISION,
    collision_probability,
    marginal_cells,
    tail_thresholds,
)
from oracles.samplers import Oracle

TAIL_QUANTILES = (1e-4, 1e-5)
# torch's samplers draw from (at most) a 2^-24 grid: the probability beyond a threshold may
# differ from the law's by one grid cell, so the tail tests hold for that whole interval
TAIL_SLACK = GRID_COLLISION
PAIR_CELLS = 8


def tail_checks(o: Oracle, x: np.ndarray, fmt: FloatFormat | None, label: str
                ) -> list[TestResult]:
    """One exact binomial test per (side, far quantile) the law has in this dtype."""
    out = []
    n = x.size
    for side, t, prob in tail_thresholds(o, fmt, TAIL_QUANTILES):
        count = int(np.sum(x <= t) if side == "lower" else np.sum(x >= t))
        rel = "<=" if side == "lower" else ">="
        out.append(TestResult(f"{side} tail, x {rel} {t:.6g} ({label})", count,
                              binomial_test(count, n, prob, TAIL_SLACK), n,
                              f"observed {count}, expected {n * prob:.1f} (P = {prob:.3g})"))
    return out


def magnitude_serial(u: np.ndarray, label: str) -> TestResult:
    return serial_test(np.abs(np.asarray(u) - 0.5), f"lag-1 autocorrelation of |u - 1/2| "
                                                    f"({label})")


def pair_chisquare(o: Oracle, x: np.ndarray, fmt: FloatFormat | None, label: str
                   ) -> TestResult:
    edges, probs = marginal_cells(o, fmt, PAIR_CELLS)
    idx = np.searchsorted(edges, x, side="right")
    m = idx.size // 2
    k = edges.size + 1
    pairs = idx[0:2 * m:2] * k + idx[1:2 * m:2]
    counts = np.bincount(pairs, minlength=k * k)
    return chisquare_test(counts, np.outer(probs, probs).ravel(),
                          f"consecutive pairs, {k} x {k} cells ({label})")


def window_length(o: Oracle, fmt: FloatFormat | None, n: int, pairs: int = 3) -> int:
    """The shortest L with pairs * n^2 * collision^L <= ALPHA / 10."""
    q = collision_probability(o, fmt)
    return max(2, math.ceil(math.log(ALPHA / 10 / (pairs * n * n)) / math.log(q)))


def _windows(bits: np.ndarray, length: int) -> set[bytes]:
    w = np.ascontiguousarray(sliding_window_view(bits, length))
    return {row.tobytes() for row in w}


def stream_overlap(streams: dict[str, np.ndarray], o: Oracle, fmt: FloatFormat | None,
                   label: str) -> TestResult:
    """Shared windows between every pair of ``streams`` (raw bit patterns, equal sizes);
    the p-value bound is E[shared windows] under independence (Markov)."""
    names = list(streams)
    n = min(s.size for s in streams.values())
    length = window_length(o, fmt, n, pairs=len(names) * (len(names) - 1) // 2)
    wins = {k: _windows(v, length) for k, v in streams.items()}
    shared, found = 0, []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            common = len(wins[a] & wins[b])
            if common:
                found.append(f"{a} and {b} share {common} windows")
            shared += common
    q = collision_probability(o, fmt)
    bound = len(names) * (len(names) - 1) / 2 * n * n * q**length
    p = min(1.0, bound) if shared else 1.0
    return TestResult(f"no shared runs of {length} values between streams ({label})",
                      float(shared), p, n, "; ".join(found) or
                      f"none shared (collision probability {q:.3g} per value)")


ANCHORS = (0, 4096, 65_536)  # offsets of the next call's windows searched in the previous


def find_window(hay: torch.Tensor, needle: torch.Tensor) -> list[int]:
    """Every position where ``needle`` (1-D) occurs in ``hay`` (1-D, same dtype), on the
    tensors' device: candidates for the first value, narrowed value by value."""
    span = hay.numel() - needle.numel() + 1
    if span <= 0:
        return []
    cand = (hay[:span] == needle[0]).nonzero().reshape(-1)
    for j in range(1, needle.numel()):
        if cand.numel() == 0:
            break
        cand = cand[hay[cand + j] == needle[j]]
    return cand.tolist()


def call_overlaps(calls: list[torch.Tensor], o: Oracle, fmt: FloatFormat | None,
                  label: str) -> TestResult:
    """No window of L values of a call (at the ANCHORS) occurs anywhere in the call before
    it (``calls``: raw bit patterns, 1-D, in call order). L makes the expected number of
    chance occurrences under independence at most ALPHA / 10; the p-value bound is that
    expectation (Markov)."""
    q = collision_probability(o, fmt)
    n = max(c.numel() for c in calls)
    searches = len(ANCHORS) * (len(calls) - 1)
    length = max(2, math.ceil(math.log(ALPHA / 10 / (searches * n)) / math.log(q)))
    found = []
    for k in range(1, len(calls)):
        prev, nxt = calls[k - 1], calls[k]
        for at in ANCHORS:
            if at + length > nxt.numel():
                continue
            for pos in find_window(prev, nxt[at:at + length])[:3]:
                found.append(f"call {k + 1} at {at} repeats call {k} at {pos}")
    bound = searches * n * q**length
    return TestResult(f"no run of {length} values of a call repeated from the call before "
                      f"({label})", float(len(found)), min(1.0, bound) if found else 1.0, n,
                      "; ".join(found[:6]) or f"none ({len(calls)} calls of {n} values)")


# dtype -> (narrower formats, the most draws per draw the null allows representable in them).
# A float64 law at float64 resolution lands on a float32-representable value with
# probability ~2^-29 (one float64 value in 2^29 is a float32 one, where the density is
# smooth); samplers build values from uniforms on a grid (torch: 2^-53), which concentrates
# them near a few points (uniform_(-1, 3): 2^-28 of its draws). 2^-20 leaves a factor 2^8.
# float32 from 24-bit uniforms: up to ~2^-11 of the draws are float16- or bfloat16-
# representable (uniform_ near 0); 2^-8 leaves a factor 8.
RESOLUTION = {torch.float64: ((torch.float32,), 2.0**-20),
              torch.float32: ((torch.float16, torch.bfloat16), 2.0**-8)}


# The most probability two independent draws may have of being equal, sum_v p(v)^2, per
# dtype. torch builds float64 draws from 53-bit uniforms (2^-53 for uniform_; the transforms
# of the other laws merge grid points only where they compress, in the far tails): 2^-40
# asks for 40 bits of resolution, a factor 2^13 from torch's. float32 draws come from 24-bit
# uniforms: torch's uniform_ repeats at 0.97 of the 2^-24 grid's rate, its other laws at
# 0.14-0.38 of it; 2^-23 asks for 23 bits, which the [1, 2) - 1 mantissa fill meets (at
# the bound) and a 22-bit one does not (the blind round's lost-bit exponential).
# Measured on torch 2.11.0, 2.14.1, 2.15.0 at n = 800,013: no float64
# law repeats a value in 2^20 draws (a 32-bit uniform: 119-146); float32 as above.
COLLISION_RATE = {torch.float64: 2.0**-40, torch.float32: 2 * GRID_COLLISION}
COLLISION_BITS = {torch.float64: 32, torch.float32: 20}  # what the detail line compares


def collision_test(t: torch.Tensor, label: str) -> TestResult:
    """A one-sided exact Poisson test on the number of draws equal to an earlier draw
    (counted on the device, sorted): at most n(n-1)/2 * COLLISION_RATE[dtype] expected.
    A law with too few random bits repeats values whatever the values look like."""
    flat = t.reshape(-1)
    with torch.no_grad():
        ordered = torch.sort(flat).values
        count = int((ordered[1:] == ordered[:-1]).sum())
    n, rate, bits = flat.numel(), COLLISION_RATE[t.dtype], COLLISION_BITS[t.dtype]
    lam = n * (n - 1) / 2 * rate
    few = n + 2.0**bits * math.expm1(-n / 2.0**bits)  # n less the expected distinct values
    p = float(sps.poisson.sf(count - 1, lam)) if count else 1.0
    return TestResult(f"resolution: draws that repeat an earlier draw ({label})", count, p, n,
                      f"observed {count}, at most {lam:.3g} expected ({-math.log2(rate):.0f} "
                      f"bits of resolution; {bits} random bits would give about {few:.0f})")


def resolution_test(t: torch.Tensor, label: str) -> TestResult:
    """A one-sided exact Poisson test on the count of draws representable in a narrower
    format (counted on the device); the null's rate is RESOLUTION's bound."""
    narrower, rate = RESOLUTION[t.dtype]
    flat = t.reshape(-1)
    hit = torch.zeros_like(flat, dtype=torch.bool)
    for fmt in narrower:
        with torch.no_grad():
            hit |= flat.to(fmt).to(t.dtype) == flat
    count, n = int(hit.sum()), flat.numel()
    lam = n * rate
    p = float(sps.poisson.sf(count - 1, lam)) if count else 1.0
    names = " or ".join(str(f).removeprefix("torch.") for f in narrower)
    return TestResult(f"resolution: draws representable in {names} ({label})", count, p, n,
                      f"observed {count}, at most {lam:.3g} expected (rate 2^"
                      f"{math.log2(rate):.0f})")
