"""Blind sampler faults (``--impl sampler.<name>=planted.blind_sampler_faults:<attr>``).

Written WITHOUT reading how the suite checks samplers: only from the plug-in contract
(``docs/contracts.md``, ``sampler.<method>``), the shipped adapters (``impls/samplers.py``),
the already planted faults (``tests/planted/sampler_faults.py``, not duplicated here), torch's
documentation and upstream bug reports. Each fault imitates a bug that a kernel author or a
backend vendor could really ship, at the rate at which it would really happen (no
caricatures); each docstring cites what it imitates. The results of running the suite on
them are in ``docs/results/blind-sampler-faults-2026-12-05.md``.

Families:

1. values nobody checked (large calls only): ``normal_grid_tail_unwritten``,
   ``uniform_nan_lane_past_2_20``;
2. infinities: ``exponential_curand_inf``, ``normal_box_muller_24bit_inf``,
   ``cauchy_fast_tan_inf``, ``normal_half_uniform_rounds_to_one``;
3. streams across calls: ``normal_offset_capped_65536``, ``uniform_seed_int31``;
4. float64 resolution: ``log_normal_float64_via_float32``, ``uniform_float64_32bit``;
5. parameter precision: ``bernoulli_p_bfloat16``, ``geometric_log1mp_float32``,
   ``exponential_lambd_float16``, ``normal_std_bfloat16_half_outputs``;
6. others from upstream reports: ``uniform_half_returns_to``, ``random_no_bounds_32bit``,
   ``random_top_off_by_one``, ``bernoulli_p_tensor_memory_order``,
   ``normal_ziggurat_wedge_bug``.

The correct outside samplers that go with them are in ``outside_samplers``; the helpers
both use in ``blind_sampler_common``. ``FAULTS`` maps each attribute to its area and
family.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .blind_sampler_common import (
    Gen,
    _bits,
    _check,
    _CountedPhilox,
    _fill,
    _gen,
    _memory_order,
    _uniform_from,
    _ziggurat,
)
from .outside_samplers import OUTSIDE

LARGE = 1 << 20          # the "large tensor" launch path of families 1
_HALF = (torch.float16, torch.bfloat16)


# ================================================================ 1. values nobody checked

TILE = 4096  # 256 threads x unroll 4 x float4 stores


def normal_grid_tail_unwritten(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
                               generator: Gen = None) -> torch.Tensor:
    """The large-tensor launch (numel > 2**20, 64-bit indexing) sizes its grid as
    ``numel // TILE`` instead of ``ceil(numel / TILE)``: the last ``numel % TILE`` elements
    (2,560 of 1,600,000; 2,317 of 4,000,013) are never written and keep whatever the buffer
    held. The stream still advances by numel. Small calls take the 32-bit path and are
    right.

    Imitates: FlagGems PR #134 "Fix rand/randn/rand_like grid and seed error" (the grid
    did not match the elements each program wrote,
    https://github.com/flagos-ai/FlagGems/pull/134) and torch's own split of large tensors
    into 32-bit-indexable launches (Paddle PR #79667 discussion of that path,
    https://github.com/PaddlePaddle/Paddle/pull/79667)."""
    n = t.numel()
    if n <= LARGE:
        return t.normal_(mean, std, generator=generator)
    _check("normal_", t, mean, std)
    drawn = torch.empty(n, dtype=t.dtype, device=t.device).normal_(mean, std,
                                                                   generator=generator)
    merged = t.reshape(-1).clone()          # what the buffer held
    covered = n - n % TILE
    merged[:covered] = drawn[:covered]
    return _fill(t, merged)


def uniform_nan_lane_past_2_20(t: torch.Tensor, low: float = 0.0, high: float = 1.0, *,
                               generator: Gen = None) -> torch.Tensor:
    """Past element 2**20 a second launch writes the tensor; its first lane of every
    65,536-element block stores an uninitialised register (a NaN bit pattern): about 9 NaNs
    in 1,600,000 values, none in calls of up to 2**20 elements.

    Imitates the class of "second chunk of a large tensor is wrong" bugs: torch's
    large-tensor split into 32-bit-indexable launches (see Paddle PR #79667,
    https://github.com/PaddlePaddle/Paddle/pull/79667, which ports that path) and tinygrad
    PR #15329 "fix: rand supports large tensors"
    (https://github.com/tinygrad/tinygrad/pull/15329)."""
    t.uniform_(low, high, generator=generator)
    n = t.numel()
    if n > LARGE and t.dtype.is_floating_point:
        flat = t.reshape(-1).clone()
        flat[torch.arange(LARGE, n, 65536, device=t.device)] = float("nan")
        _fill(t, flat)
    return t


# ======================================================================== 2. infinities

def exponential_curand_inf(t: torch.Tensor, lambd: float = 1.0, *,
                           generator: Gen = None) -> torch.Tensor:
    """``(-1 / lambd) * log(1 - u)`` in float32 with ``u`` a curand-style uniform on
    (0, 1] with 24 bits: ``u == 1`` (probability 2**-24, ~0.1 per 1.6M-element call) gives
    +inf. float64 outputs use a 53-bit uniform and are right.

    Imitates pytorch issue #2561 "exponential_() samples infinity on GPU"
    (https://github.com/pytorch/pytorch/issues/2561): "curand_uniform() can return between
    0.0 (exclusive) and 1.0 (inclusive)"; 3 in 100M samples were inf."""
    if t.dtype == torch.float64:
        return t.exponential_(lambd, generator=generator)
    _check("exponential_", t, lambd)
    gen = _gen(t, generator)
    u = (_bits(t.numel(), 24, gen, t.device) + 1).to(torch.float32) / 2**24  # (0, 1]
    return _fill(t, -torch.log(1 - u) / lambd)


def normal_box_muller_24bit_inf(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
                                generator: Gen = None) -> torch.Tensor:
    """Box-Muller in float32 on 24-bit uniforms on [0, 1): ``r = sqrt(-2 log u1)`` is +inf
    when ``u1 == 0`` (probability 2**-24 per pair): both outputs of the pair are ±inf.
    float64 outputs use 53-bit uniforms and are right.

    Imitates pytorch issue #16706 "Very poor Uniform() sampling near floating 0.0"
    (https://github.com/pytorch/pytorch/issues/16706: "it is actually possible to generate
    an exact 0.0 using the float32 uniform_(), with probability 2**-24") feeding a
    Box-Muller transform (tinygrad issue #3611, https://github.com/tinygrad/tinygrad/issues/3611,
    randn went to -inf through log(0))."""
    if t.dtype == torch.float64:
        return t.normal_(mean, std, generator=generator)
    _check("normal_", t, mean, std)
    gen = _gen(t, generator)
    n = t.numel()
    pairs = (n + 1) // 2
    u1 = _bits(pairs, 24, gen, t.device).to(torch.float32) / 2**24          # [0, 1)
    u2 = _bits(pairs, 24, gen, t.device).to(torch.float32) / 2**24
    r = torch.sqrt(-2 * torch.log(u1))
    theta = 2 * math.pi * u2
    z = torch.stack((r * torch.cos(theta), r * torch.sin(theta)), dim=1).reshape(-1)[:n]
    return _fill(t, z * std + mean)


def cauchy_fast_tan_inf(t: torch.Tensor, median: float = 0.0, sigma: float = 1.0, *,
                        generator: Gen = None) -> torch.Tensor:
    """``median + sigma * tan(pi * (u - 0.5))`` in float32 with ``u`` a 24-bit uniform on
    [0, 1) and the fast tangent (``__tanf``), which returns -inf at -pi/2: ``u == 0``
    (probability 2**-24) gives -inf. float64 outputs are right.

    Imitates pytorch PR #60186 "[fix] cauchy sampling inf on cuda"
    (https://github.com/pytorch/pytorch/pull/60186, issue #59144: "this issue stems from
    the use of __tanf faster approximation") and jax PR #987 "Avoid generating non-finite
    values from cauchy" (https://github.com/jax-ml/jax/pull/987: "If uniform generates 0,
    -pi/2 will be sent to tan")."""
    if t.dtype == torch.float64:
        return t.cauchy_(median, sigma, generator=generator)
    _check("cauchy_", t, median, sigma)
    gen = _gen(t, generator)
    u = _bits(t.numel(), 24, gen, t.device).to(torch.float32) / 2**24
    x = torch.tan(math.pi * (u - 0.5))
    x = torch.where(u == 0, torch.full_like(x, -math.inf), x)  # __tanf(-pi/2)
    return _fill(t, median + sigma * x)


def normal_half_uniform_rounds_to_one(t: torch.Tensor, mean: float = 0.0, std: float = 1.0,
                                      *, generator: Gen = None) -> torch.Tensor:
    """float16 outputs: the Box-Muller uniforms are generated in the output dtype, so a
    float32 uniform in [1 - 2**-12, 1) rounds to 1.0 and ``log(1 - u)`` is -inf: about one
    pair in 4,096 comes out ±inf (and the radius is quantised). Other dtypes are right.

    Imitates tinygrad issue #3611 "Tensor.rand goes to -inf with default half"
    (https://github.com/tinygrad/tinygrad/issues/3611) and PR #3654: "the data distribution
    ... isnt correctly in the interval ]0, 1[, but instead in the interval ]0, 1], which
    causes the Tensor.randn to incorrectly generate values of infinity"."""
    if t.dtype != torch.float16:
        return t.normal_(mean, std, generator=generator)
    _check("normal_", t, mean, std)
    gen = _gen(t, generator)
    n = t.numel()
    pairs = (n + 1) // 2
    u1 = torch.rand(pairs, generator=gen, device=t.device).half().float()
    u2 = torch.rand(pairs, generator=gen, device=t.device).half().float()
    r = torch.sqrt(-2 * torch.log(1 - u1))
    theta = 2 * math.pi * u2
    z = torch.stack((r * torch.cos(theta), r * torch.sin(theta)), dim=1).reshape(-1)[:n]
    return _fill(t, z * std + mean)


# =========================================================== 3. streams across calls

CAP = 65536


def normal_offset_capped_65536(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
                               generator: Gen = None) -> torch.Tensor:
    """The generator's offset advances by at most 65,536 values per call (the increment is
    computed from a capped grid, not from numel): after a call of n > 65,536 values the
    next call starts 65,536 values in, so it repeats the previous call's values from index
    65,536 on. Calls of up to 65,536 values are right.

    Imitates pytorch PR #9795 (https://github.com/pytorch/pytorch/pull/9795:
    ``philox_seed_offset.fetch_add(20)``, "10 or 20 is a rough estimate ... the number of
    times an inner loop will run in a fusion kernel is dependent on the size of the
    tensors") and the Philox-offset accounting discussed in Paddle PR #79667."""
    _check("normal_", t, mean, std)
    gen = _gen(t, generator)
    n = t.numel()
    flat = torch.empty(n, dtype=t.dtype, device=t.device)
    state = gen.get_state()
    flat.normal_(mean, std, generator=gen)
    if n > CAP:
        gen.set_state(state)
        torch.empty(CAP, dtype=t.dtype, device=t.device).normal_(mean, std, generator=gen)
    return _fill(t, flat)


_INT31 = _CountedPhilox(0x7FFF_FFFF, "zero")


def uniform_seed_int31(t: torch.Tensor, low: float = 0.0, high: float = 1.0, *,
                       generator: Gen = None) -> torch.Tensor:
    """A Philox uniform (otherwise exactly ``philox_uniform``) whose seed reaches the
    kernel as a non-negative int32: ``seed & 0x7fffffff``. Seeds that differ only in bit 31
    or above give the same stream (e.g. 7 and 7 + 2**31). (torch's own CPU generator keeps
    32 bits: seeds 1 and 1 + 2**32 give the same CPU stream.)

    Imitates tensorflow PR #2495 "Truncate random seed to fit into int"
    (https://github.com/tensorflow/tensorflow/pull/2495, ``seed % 2147483647``), golang
    issue #15788 (https://github.com/golang/go/issues/15788, "only uses 31 bit of the
    seed") and numpy PR #4676 "reject too large seeds" (silent truncation: "the same random
    stream for two different seeds, e.g. 1 and 1 + 2**40")."""
    _check("uniform_", t, low, high)
    return _uniform_from(t, low, high, _INT31.rng(t, generator))


# ============================================================= 4. float64 resolution

def log_normal_float64_via_float32(t: torch.Tensor, mean: float = 1.0, std: float = 2.0, *,
                                   generator: Gen = None) -> torch.Tensor:
    """float64 outputs are computed by the float32 kernel and widened: every value has a
    24-bit mantissa (thousands of exact duplicates in 800,000 draws, where float64 gives
    none). Other dtypes are right.

    Imitates pytorch PR #3541 "Fix float uniform generation in TH"
    (https://github.com/pytorch/pytorch/pull/3541: "This also changes the uniform double
    generation to use more bits of randomness") and chainer PR #6709 / cuRAND's float-only
    paths (https://github.com/chainer/chainer/pull/6709)."""
    if t.dtype != torch.float64:
        return t.log_normal_(mean, std, generator=generator)
    _check("log_normal_", t, mean, std)
    tmp = torch.empty(t.numel(), dtype=torch.float32, device=t.device)
    tmp.log_normal_(mean, std, generator=_gen(t, generator))
    return _fill(t, tmp.double())


def uniform_float64_32bit(t: torch.Tensor, low: float = 0.0, high: float = 1.0, *,
                          generator: Gen = None) -> torch.Tensor:
    """float64 uniforms from one 32-bit random word: ``u = k / 2**32``. Right law up to
    2**-32, but only 2**32 distinct values: ~75 duplicate pairs in 800,000 draws (53 bits:
    none). Other dtypes are right.

    Imitates NVIDIA/Fuser PR #2355 (https://github.com/NVIDIA/Fuser/pull/2355: "For
    uniformf, we use a scale factor of 2^(-32)") and pytorch PR #3541 (double uniforms
    built from too few random bits before the fix)."""
    if t.dtype != torch.float64:
        return t.uniform_(low, high, generator=generator)
    _check("uniform_", t, low, high)
    k = _bits(t.numel(), 32, _gen(t, generator), t.device).double()
    x = low + (high - low) * (k / 2**32)
    x = torch.where(x == high, torch.full_like(x, low), x)
    return _fill(t, x)


# ============================================================= 5. parameter precision

def bernoulli_p_bfloat16(t: torch.Tensor, p: Any = 0.5, *, generator: Gen = None
                         ) -> torch.Tensor:
    """p reaches the kernel as a bfloat16 kernel argument (or a bfloat16 copy of the p
    tensor): p = 0.3 acts as 0.30078 (+0.26 %), p = 0.999 as 1.0.

    Imitates the reduced-precision parameter paths reported in pytorch issue #94388
    (https://github.com/pytorch/pytorch/issues/94388: bernoulli with a float p does not
    draw like ``rand < p``) and ROCm/pytorch PR #506 (bernoulli's p dispatched with the
    output's reduced-precision type, https://github.com/ROCm/pytorch/pull/506)."""
    _check("bernoulli_", t, p)
    if isinstance(p, torch.Tensor):
        pb = p.to(torch.bfloat16).to(p.dtype)
    else:
        pb = float(torch.tensor(float(p)).to(torch.bfloat16))
    return t.bernoulli_(pb, generator=generator)


def geometric_log1mp_float32(t: torch.Tensor, p: float, *, generator: Gen = None
                             ) -> torch.Tensor:
    """``ceil(log(u) / log(1 - p))`` with ``log(1 - p)`` formed in float32 (``1 - p``
    rounded to float32 first): p = 1e-6 acts as 1.0133e-6 (+1.3 %); p >= 0.01 is off by
    less than 1e-5. u is a 53-bit uniform on (0, 1).

    Imitates the CUDA kernel quoted in pytorch PR #3042
    (https://github.com/pytorch/pytorch/pull/3042: ``ceilf(logf(x) / log(1-p))``) and numpy
    issue #17007 (https://github.com/numpy/numpy/issues/17007: "Cause by the use of
    log(1 - p) when we should be using log1p(-p)")."""
    _check("geometric_", t, p)
    gen = _gen(t, generator)
    u = 1 - torch.rand(t.numel(), dtype=torch.float64, generator=gen, device=t.device)
    lp = float(torch.log(torch.tensor(1.0, dtype=torch.float32)
                         - torch.tensor(p, dtype=torch.float32)))
    k = torch.ceil(torch.log(u) / lp).clamp_(min=1)
    return _fill(t, k)


def exponential_lambd_float16(t: torch.Tensor, lambd: float = 1.0, *,
                              generator: Gen = None) -> torch.Tensor:
    """The rate reaches the kernel as a float16 argument: relative error up to 2**-12
    (lambd = 0.1 acts as 0.099976, -0.024 %; 1e-6, a float16 subnormal, as 1.00136e-6,
    +0.14 %). A rate that does not fit a float16 (1e6) is passed exactly (the kernel
    falls back to float32), so this fault is only the rounding, never a zero or inf rate.

    Imitates parameters packed in the output's half type, as in NVIDIA/cccl PR #11481's
    implicit fp16 conversions review rule (https://github.com/NVIDIA/cccl/pull/11481) and
    pytorch PR #175046 (trunc_normal_ computed in the tensor's half dtype,
    https://github.com/pytorch/pytorch/pull/175046)."""
    _check("exponential_", t, lambd)
    lh = float(torch.tensor(float(lambd)).half())
    if not lh > 0 or math.isinf(lh):
        lh = lambd
    return t.exponential_(lh, generator=generator)


def normal_std_bfloat16_half_outputs(t: torch.Tensor, mean: float = 0.0, std: float = 1.0,
                                     *, generator: Gen = None) -> torch.Tensor:
    """float16/bfloat16 outputs: mean and std are rounded to bfloat16 (the kernel's
    "opmath" for reduced-precision outputs): std = 0.3 acts as 0.30078 (+0.26 %). float32
    and float64 outputs are right.

    Imitates pytorch PR #175046 "Fix trunc_normal_ for bfloat16/float16 tensors"
    (https://github.com/pytorch/pytorch/pull/175046: "the intermediate ... computation
    happen[s] in the tensor's native dtype") and pytorch issue #166853 "torch.randn on CPU
    is not accurate with dtype=bfloat16" (https://github.com/pytorch/pytorch/issues/166853)."""
    if t.dtype not in _HALF:
        return t.normal_(mean, std, generator=generator)
    _check("normal_", t, mean, std)
    mb = float(torch.tensor(float(mean)).bfloat16())
    sb = float(torch.tensor(float(std)).bfloat16())
    return t.normal_(mb, sb, generator=generator)


# ================================================== 6. others from upstream bug reports

def uniform_half_returns_to(t: torch.Tensor, low: float = 0.0, high: float = 1.0, *,
                            generator: Gen = None) -> torch.Tensor:
    """float16/bfloat16 outputs: ``from + (to - from) * u`` in float32, rounded to the
    output dtype, without the ``value == to ? from : value`` fix-up: about 2**-9 of bfloat16
    values (2**-12 of float16 ones) equal ``to``. float32/float64 outputs are right.

    Imitates pytorch issue #96947 "torch.rand can sample the upper bound for lower
    precision floating point dtypes on CUDA" (https://github.com/pytorch/pytorch/issues/96947)
    and pytorch PR #197081 "[MPS] fix rand and uniform_ upper-bound rounding"
    (https://github.com/pytorch/pytorch/pull/197081)."""
    if t.dtype not in _HALF:
        return t.uniform_(low, high, generator=generator)
    _check("uniform_", t, low, high)
    u = torch.rand(t.numel(), dtype=torch.float32, generator=_gen(t, generator),
                   device=t.device)
    x = torch.tensor(low, dtype=torch.float32) + torch.tensor(high - low,
                                                              dtype=torch.float32) * u
    return _fill(t, x.to(t.dtype))


def random_no_bounds_32bit(t: torch.Tensor, *bounds: int, generator: Gen = None
                           ) -> torch.Tensor:
    """Draws from one 32-bit word where a 64-bit one is due: ``random_()`` on int64 or
    float64, or any range of 2**32 or more, gives ``from + (r32 % range)``, i.e. nothing at
    or above ``from + 2**32``. Smaller ranges are right.

    Imitates pytorch PR #3042 "Add random_ for cuda, fix random_ for cpu"
    (https://github.com/pytorch/pytorch/pull/3042: "CPU random_() has the bug of having
    max value 2^32. This is a problem for DoubleTensor and LongTensor.")."""
    _check("random_", t, *bounds)
    gen = _gen(t, generator)
    if not bounds:
        if t.dtype not in (torch.int64, torch.float64):
            return t.random_(generator=generator)
        low, span = 0, (2**63 if t.dtype == torch.int64 else 2**53 + 1)
    else:
        low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
        span = high - low
        if span < 2**32:
            return t.random_(*bounds, generator=generator)
    r = _bits(t.numel(), 32, gen, t.device) + low  # r32 % span == r32: span >= 2**32
    return _fill(t, r)


def random_top_off_by_one(t: torch.Tensor, *bounds: int, generator: Gen = None
                          ) -> torch.Tensor:
    """``random_(from, to)`` (and ``random_(to)``) converts the exclusive ``to`` into an
    inclusive bound twice: ``to - 1`` is never drawn. ``random_()`` is right.

    Imitates off-by-one range bugs such as AutoFixture issue #148
    (https://github.com/AutoFixture/AutoFixture/issues/148), OpenTTD issue #6892
    (https://github.com/OpenTTD/OpenTTD/issues/6892, "Replace max_value to max_value + 1")
    and just PR #400 (https://github.com/angus-c/just/pull/400: "never returned the upper
    limit")."""
    _check("random_", t, *bounds)
    if not bounds:
        return t.random_(generator=generator)
    low, high = (0, bounds[0]) if len(bounds) == 1 else bounds
    if high - low < 2:
        return t.random_(*bounds, generator=generator)
    return t.random_(low, high - 1, generator=generator)


def bernoulli_p_tensor_memory_order(t: torch.Tensor, p: Any = 0.5, *,
                                    generator: Gen = None) -> torch.Tensor:
    """With a tensor p and a non-contiguous ``t`` (transposed, strided, offset view), the
    kernel walks ``t``'s storage in memory order and reads p by that position as if p were
    laid out like ``t``: element (i, j) of a transposed view gets p[j, i]. Contiguous ``t``
    and float p are right.

    Imitates pytorch PR #125231 "Fix random_mps_impl to accept non-contiguous tensors"
    (https://github.com/pytorch/pytorch/pull/125231, bernoulli on MPS goes through it) and
    torch/cutorch issue #39 "copy gives wrong results with non-contiguous tensors"
    (https://github.com/torch/cutorch/issues/39)."""
    if not isinstance(p, torch.Tensor) or t.is_contiguous():
        return t.bernoulli_(p, generator=generator)
    _check("bernoulli_", t, p)
    n = t.numel()
    u = torch.rand(n, dtype=torch.float64, generator=_gen(t, generator), device=t.device)
    in_memory_order = (u < p.reshape(-1).to(torch.float64)).to(torch.float64)
    out = torch.empty(n, dtype=torch.float64, device=t.device)
    out[_memory_order(t).to(t.device)] = in_memory_order
    return _fill(t, out)


def normal_ziggurat_wedge_bug(t: torch.Tensor, mean: float = 0.0, std: float = 1.0, *,
                              generator: Gen = None) -> torch.Tensor:
    """A 128-layer ziggurat whose wedge acceptance test has a misplaced parenthesis,
    ``f1 + (f0 - f1 * U) < 1`` for ``f1 + (f0 - f1) * U < 1``: wedge points are accepted
    ~30x too rarely, so ~0.6 % of the probability mass (the wedges between the rectangles
    and the curve, at every layer) is under-weighted. Mean, variance, skewness and kurtosis
    are essentially right.

    Imitates QuantLib PR #2722 "Fix wedge acceptance test in ZigguratGaussianRng"
    (https://github.com/lballabio/QuantLib/pull/2722: "checks mean, variance, skewness and
    kurtosis over 10,000,000 draws and passes both before and after this change. A
    Kolmogorov-Smirnov test ... does not separate them either at practical sample
    sizes"). ``ziggurat_normal`` is the same code without the bug."""
    _check("normal_", t, mean, std)
    z = _ziggurat(t.numel(), _gen(t, generator), t.device, wedge_bug=True)
    return _fill(t, z * std + mean)


FAULTS = {  # attribute -> (area, family)
    "normal_grid_tail_unwritten": ("normal", 1),
    "uniform_nan_lane_past_2_20": ("uniform", 1),
    "exponential_curand_inf": ("exponential", 2),
    "normal_box_muller_24bit_inf": ("normal", 2),
    "cauchy_fast_tan_inf": ("cauchy", 2),
    "normal_half_uniform_rounds_to_one": ("normal", 2),
    "normal_offset_capped_65536": ("normal", 3),
    "uniform_seed_int31": ("uniform", 3),
    "log_normal_float64_via_float32": ("log_normal", 4),
    "uniform_float64_32bit": ("uniform", 4),
    "bernoulli_p_bfloat16": ("bernoulli", 5),
    "geometric_log1mp_float32": ("geometric", 5),
    "exponential_lambd_float16": ("exponential", 5),
    "normal_std_bfloat16_half_outputs": ("normal", 5),
    "uniform_half_returns_to": ("uniform", 6),
    "random_no_bounds_32bit": ("random", 6),
    "random_top_off_by_one": ("random", 6),
    "bernoulli_p_tensor_memory_order": ("bernoulli", 6),
    "normal_ziggurat_wedge_bug": ("normal", 6),
}

for _name in FAULTS:
    globals()[_name].conformance_name = f"blind.{_name}"


def impl_args() -> list[str]:
    """The ``--impl`` options that plug every fault and outside sampler in."""
    return [*(f"--impl=sampler.{area}=planted.blind_sampler_faults:{name}"
              for name, (area, _) in FAULTS.items()),
            *(f"--impl=sampler.{area}=planted.outside_samplers:{name}"
              for name, area in OUTSIDE.items())]
