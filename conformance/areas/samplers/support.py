"""The support check: no sample the law cannot produce, on every element the suite draws.

A value is impossible when it is NaN, outside the law's support (not an integer, for a
discrete law), a rounding cell of negligible probability in a 16-bit format, or ±inf where
the law's mass beyond the format's overflow threshold is negligible. *Negligible* is at most
``NEGLIGIBLE`` = ALPHA / 1e10: seeing one in a sample of <= 1e7 has probability below
ALPHA / 1000, so all the support checks of a run together false-alarm below ALPHA. (An
exponential whose kernel can return +inf, a Box-Muller normal whose uniform can be 0, a
kernel that leaves part of a large tensor unwritten: the prefilled NaN shows.)

``count_impossible`` counts on the tensor's device; only the count, the first bad value and,
in float32, the few elements beyond the law's 1e-12 quantiles (whose rounding cells are
checked one by one) come back to the host.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch

from conformance.harness.compare import exact
from conformance.harness.record import Record
from conformance.harness.tensors import dtype_name
from conformance.stats.gof import ALPHA, FORMATS, FloatFormat, rounding_cells
from oracles.formats import pattern_values
from oracles.samplers import Oracle, oracle

NEGLIGIBLE = ALPHA / 1e10
TAIL_Q = 1e-12  # beyond these quantiles a float32 cell may have no mass (checked on the host)
HALF = ("float16", "bfloat16")


@functools.lru_cache(maxsize=64)
def rounded_law(method: str, params: tuple[float, ...], fmt_name: str
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Values, probabilities, and which values are 'impossible': among the least likely
    cells, together at most NEGLIGIBLE of the mass, those beyond the law's 1e-12 and
    1 - 1e-12 quantiles. Interior cells are never impossible: samplers draw from a grid
    (torch: 24-bit uniforms), which puts mass up to 2^-24 on values whose rounding cell is
    far narrower (0 in uniform_(-1, 3), bfloat16)."""
    o = oracle(method, params)
    values, probs = o.rounded_pmf(FORMATS[fmt_name])
    order = np.argsort(probs, kind="stable")
    mass = np.cumsum(probs[order])
    negligible = np.zeros(values.size, dtype=bool)
    negligible[order[mass <= NEGLIGIBLE]] = True
    tail = (values < o.dist.ppf(TAIL_Q)) | (values > o.dist.isf(TAIL_Q))
    return values, probs, negligible & tail


@functools.lru_cache(maxsize=256)
def infinities(method: str, params: tuple[float, ...], fmt_name: str | None
               ) -> tuple[bool, bool]:
    """Whether +inf and -inf are possible values: the law's mass at or beyond the format's
    overflow threshold is not negligible (no format: never)."""
    fmt = FORMATS.get(fmt_name) if fmt_name else None
    if fmt is None:
        return False, False
    o = oracle(method, params)
    try:
        edge = fmt.overflow_threshold
    except OverflowError:  # float64: past the largest double, nothing the oracle gives
        edge = fmt.max_finite
    with np.errstate(all="ignore"):
        up = float(o.dist.sf(edge - 1) if o.discrete else o.dist.sf(edge))
        down = float(o.dist.cdf(-edge))
    return up > NEGLIGIBLE, down > NEGLIGIBLE


@functools.lru_cache(maxsize=256)
def discrete_range(method: str, params: tuple[float, ...]) -> tuple[float, float]:
    """A discrete law's possible values lie in [lo, hi]: beyond, the mass is negligible."""
    o = oracle(method, params)
    lo, top = (float(v) for v in o.dist.support())  # the laws here: mass at lo not negligible
    if math.isfinite(top):  # bounded (bernoulli, random_): the whole support
        return lo, top
    hi = 1
    with np.errstate(all="ignore"):  # sf is accurate in the tail (isf, via ppf, is not)
        while o.dist.sf(hi) > NEGLIGIBLE and hi < 2**80:
            hi *= 2
        below = hi // 2
        while hi - below > 1:  # the least integer k with P(X > k) <= NEGLIGIBLE
            mid = (below + hi) // 2
            if o.dist.sf(mid) > NEGLIGIBLE:
                below = mid
            else:
                hi = mid
    return lo, float(max(hi, lo))


def impossible_mask(o: Oracle, x: np.ndarray, fmt: FloatFormat | None) -> np.ndarray:
    """Per sample (float64 values): True where the oracle cannot produce it."""
    x = np.asarray(x, dtype=np.float64)
    bad = np.isnan(x)
    up, down = infinities(o.method, o.params, fmt.name if fmt is not None else None)
    if fmt is None or fmt.name not in HALF or o.discrete:
        bad |= (np.isposinf(x) & (not up)) | (np.isneginf(x) & (not down))
    if o.discrete:
        lo, hi = discrete_range(o.method, o.params)
        finite = np.isfinite(x)
        with np.errstate(invalid="ignore"):
            bad |= finite & ((x != np.floor(x)) | (x < lo) | (x > hi))
    elif fmt is not None and fmt.name in HALF:
        values, _, imp = rounded_law(o.method, o.params, fmt.name)
        idx = pattern_index(fmt.name)[bits16(x, fmt)]
        bad |= (idx < 0) | (values[idx] != x) | imp[idx]
    else:
        lo, hi = o.dist.support()
        finite = np.isfinite(x)
        bad |= finite & ((x < lo) | (x > hi))
        if fmt is not None and fmt.name == "float32":  # rounding to 0 is possible
            with np.errstate(invalid="ignore"):
                f = o.cdf(x)
            tail = finite & ((f < TAIL_Q) | (f > 1 - TAIL_Q))  # elsewhere every cell has mass
            clo, chi = rounding_cells(x[tail], fmt)
            bad[tail] |= o.cell_probs(clo, chi) <= 0
        elif o.strict_lower:
            bad |= x == lo
    if o.fold is not None:
        bad |= x == o.fold[0]
    return bad


def impossible_values(o: Oracle, x: np.ndarray, fmt: FloatFormat | None) -> tuple[int, str]:
    """How many samples the oracle cannot produce, and the first one."""
    bad = impossible_mask(o, x, fmt)
    count = int(bad.sum())
    first = f"first: {x[np.argmax(bad)]!r}" if count else ""
    return count, first


def bits16(x: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """The 16-bit patterns of float64 values that are representable in ``fmt``."""
    with np.errstate(over="ignore", invalid="ignore"):
        if fmt.name == "float16":
            return x.astype(np.float16).view(np.uint16)
        return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


@functools.lru_cache(maxsize=4)
def pattern_index(fmt_name: str) -> np.ndarray:
    """For each of the 65536 bit patterns, its index among the format's sorted values (one
    zero), or -1 for NaN."""
    from conformance.stats.gof import representable

    fmt = FORMATS[fmt_name]
    v = pattern_values(fmt)
    idx = np.searchsorted(representable(fmt), np.where(np.isnan(v), 0.0, v))  # ±inf kept
    return np.where(np.isnan(v), -1, idx)


@functools.lru_cache(maxsize=128)
def _pattern_table(method: str, params: tuple[float, ...], fmt_name: str) -> np.ndarray:
    """For a 16-bit format: impossible or not, for each of the 65536 bit patterns."""
    fmt = FORMATS[fmt_name]
    return impossible_mask(oracle(method, params), pattern_values(fmt), fmt)


def _first(t: torch.Tensor, bad: torch.Tensor) -> str:
    i = int(torch.argmax(bad.to(torch.uint8)))
    return f"first: {float(t.reshape(-1)[i].item())!r} at flat index {i}"


def count_impossible(o: Oracle, t: torch.Tensor) -> tuple[int, str]:
    """``impossible_values`` counted on ``t``'s device (flattened, any layout)."""
    flat = t.reshape(-1)
    name = dtype_name(t.dtype)
    fmt = FORMATS.get(name) if t.dtype.is_floating_point else None
    if fmt is not None and fmt.name in HALF and not o.discrete:
        table = torch.from_numpy(_pattern_table(o.method, o.params, fmt.name)).to(t.device)
        bad = table[flat.view(torch.int16).to(torch.int32) & 0xFFFF]
    elif not t.dtype.is_floating_point:  # an integer dtype: a discrete law
        lo, hi = discrete_range(o.method, o.params)
        bad = torch.zeros_like(flat, dtype=torch.bool)
        info = torch.iinfo(t.dtype)
        if lo > info.min:
            bad |= flat < math.ceil(lo)
        if hi < info.max:
            bad |= flat > math.floor(hi)
    else:
        up, down = infinities(o.method, o.params, fmt.name if fmt else None)
        lo, hi = discrete_range(o.method, o.params) if o.discrete else o.dist.support()
        bad = torch.isnan(flat)
        if not up:
            bad |= torch.isposinf(flat)
        if not down:
            bad |= torch.isneginf(flat)
        finite = torch.isfinite(flat)
        bad |= finite & ((flat < lo) | (flat > hi))
        if o.discrete:
            bad |= finite & (flat != torch.floor(flat))
        elif fmt is not None and fmt.name == "float32":
            q_lo, q_hi = float(o.dist.ppf(TAIL_Q)), float(o.dist.isf(TAIL_Q))
            tail = finite & ((flat < q_lo) | (flat > q_hi))
            if bool(tail.any()):  # rare: each tail value's rounding cell, on the host
                where = tail.nonzero().reshape(-1)
                x = flat[where].double().cpu().numpy()
                bad[where] |= torch.from_numpy(impossible_mask(o, x, fmt)).to(t.device)
        elif o.strict_lower:
            bad |= flat == lo
        if o.fold is not None:
            bad |= flat == float(o.fold[0])
    count = int(bad.sum())
    return count, (_first(flat, bad) if count else "")


def require_support(record: Record, o: Oracle, x: np.ndarray | torch.Tensor,
                    fmt: FloatFormat | None, what: str = "") -> None:
    """The exact check: no impossible value among the samples ``x`` (a tensor: counted on
    its device)."""
    __tracebackhide__ = True
    if isinstance(x, torch.Tensor):
        count, first = count_impossible(o, x)
        size = x.numel()
    else:
        count, first = impossible_values(o, x, fmt)
        size = x.size
    record.require(exact(f"support of {o.method}_{o.params}{', ' + what if what else ''} "
                         "(no NaN, no impossible value)", count, size, first))
