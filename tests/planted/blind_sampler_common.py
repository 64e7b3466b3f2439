"""Helpers shared by the blind sampler faults (``blind_sampler_faults``) and the correct
outside samplers (``outside_samplers``): the generator a call draws from, parameter
validation delegated to torch, writing a flat vector into any layout, a Philox stream kept
per generator state, and the ziggurat (with or without a planted wedge bug)."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import torch

Gen = torch.Generator | None


def _gen(t: torch.Tensor, generator: Gen) -> torch.Generator:
    """The generator a call draws from: the given one, else the device's default one."""
    if generator is not None:
        return generator
    if t.device.type == "cuda":
        index = t.device.index if t.device.index is not None else torch.cuda.current_device()
        return torch.cuda.default_generators[index]
    return torch.default_generator


def _check(method: str, t: torch.Tensor, *params: Any) -> None:
    """Parameter validation delegated to torch's own method on a one-element probe (the
    faults below are wrong in their sampling, not in their validation)."""
    if method == "bernoulli_" and isinstance(params[0], torch.Tensor):
        p = params[0]
        if bool(((p < 0) | (p > 1) | p.isnan()).any()):
            raise RuntimeError("bernoulli_ expects p to be in [0, 1]")
        return
    probe = torch.empty(1, dtype=t.dtype)
    getattr(probe, method)(*params, generator=torch.Generator())


def _fill(t: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Writes a flat vector (logical order, any dtype) into ``t`` (any layout)."""
    t.copy_(values.reshape(t.shape).to(device=t.device, dtype=t.dtype))
    return t


def _bits(n: int, bits: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    """n integers uniform on [0, 2**bits) drawn from ``gen`` (int64)."""
    return torch.randint(0, 2**bits, (n,), dtype=torch.int64, generator=gen, device=device)


def _memory_order(t: torch.Tensor) -> torch.Tensor:
    """Logical flat indices of ``t``'s elements sorted by their storage offset."""
    offsets = torch.zeros((), dtype=torch.int64)
    for dim, (size, stride) in enumerate(zip(t.shape, t.stride(), strict=True)):
        shape = [1] * t.dim()
        shape[dim] = size
        offsets = offsets + (torch.arange(size, dtype=torch.int64) * stride).view(shape)
    return torch.argsort(offsets.expand(t.shape).reshape(-1), stable=True)


def _uniform_from(t: torch.Tensor, low: float, high: float, rng: np.random.Generator
                  ) -> torch.Tensor:
    x = torch.from_numpy(low + (high - low) * rng.random(t.numel()))
    x = x.to(t.dtype)
    x = torch.where(x == high, torch.tensor(low, dtype=t.dtype), x)  # contract: to -> from
    return _fill(t, x)


class _CountedPhilox:
    """A numpy Philox stream keyed by ``generator.initial_seed() & mask`` and a per-call
    counter. The counter is kept on the side, keyed by the generator's state: after each
    call the generator is advanced by one draw and its new state is remembered with the next
    counter, so successive calls differ, reseeding (or restoring a state) replays, and the
    global RNG plays no part. A state never seen (a fresh seed, or one reached by other
    draws) starts at counter 0 (``fresh="zero"``) or at a counter hashed from the state
    (``fresh="hash"``)."""

    def __init__(self, mask: int, fresh: str) -> None:
        self.mask = mask
        self.fresh = fresh
        self.known: dict[bytes, int] = {}

    @staticmethod
    def _key(gen: torch.Generator) -> bytes:
        return hashlib.blake2b(gen.get_state().numpy().tobytes(), digest_size=16).digest()

    def rng(self, t: torch.Tensor, generator: Gen) -> np.random.Generator:
        gen = _gen(t, generator)
        key = self._key(gen)
        if key in self.known:
            counter = self.known[key]
        elif self.fresh == "hash":
            counter = int.from_bytes(key[:8], "little") | (1 << 63)
        else:
            counter = 0
        seed = gen.initial_seed() & self.mask
        torch.randint(0, 2, (1,), generator=gen, device=gen.device)  # advance
        self.known[self._key(gen)] = (counter + 1) % 2**64
        words = np.array([0, 0, counter, 0], dtype=np.uint64)  # a list goes through float64
        return np.random.Generator(np.random.Philox(key=seed, counter=words))


# -- the ziggurat (Marsaglia & Tsang 2000, Doornik's ZIGNOR layout: 128 layers)

_ZIG_C, _ZIG_R, _ZIG_V = 128, 3.442619855899, 9.91256303526217e-3


def _zig_tables() -> tuple[torch.Tensor, torch.Tensor]:
    def f(x: float) -> float:
        return math.exp(-0.5 * x * x)
    x = [0.0] * (_ZIG_C + 1)
    x[0], x[1] = _ZIG_V / f(_ZIG_R), _ZIG_R
    for i in range(2, _ZIG_C):
        x[i] = math.sqrt(-2 * math.log(_ZIG_V / x[i - 1] + f(x[i - 1])))
    ratio = [x[i + 1] / x[i] for i in range(_ZIG_C)]
    return torch.tensor(x, dtype=torch.float64), torch.tensor(ratio, dtype=torch.float64)


_ZIG_X, _ZIG_RATIO = _zig_tables()


def _ziggurat(n: int, gen: torch.Generator, device: torch.device, wedge_bug: bool
              ) -> torch.Tensor:
    """n standard normals (float64) by the ziggurat, all randomness from ``gen``."""
    X, ratio = _ZIG_X.to(device), _ZIG_RATIO.to(device)
    out = torch.empty(n, dtype=torch.float64, device=device)
    pending = torch.arange(n, device=device)
    while pending.numel():
        m = pending.numel()
        u = 2 * torch.rand(m, dtype=torch.float64, generator=gen, device=device) - 1
        i = torch.randint(0, _ZIG_C, (m,), generator=gen, device=device)
        x = u * X[i]
        done = u.abs() < ratio[i]                                    # the rectangle
        val = x.clone()
        tail = ~done & (i == 0)
        if bool(tail.any()):                                         # Marsaglia's tail
            k = int(tail.sum())
            excess = torch.empty(k, dtype=torch.float64, device=device)
            todo = torch.arange(k, device=device)
            while todo.numel():
                a = torch.rand(todo.numel(), dtype=torch.float64, generator=gen,
                               device=device)
                b = torch.rand(todo.numel(), dtype=torch.float64, generator=gen,
                               device=device)
                xx = -torch.log1p(-a) / _ZIG_R
                yy = -torch.log1p(-b)
                ok = 2 * yy > xx * xx
                excess[todo[ok]] = xx[ok]
                todo = todo[~ok]
            val[tail] = torch.where(u[tail] < 0, -1.0, 1.0) * (_ZIG_R + excess)
        wedge = ~done & (i > 0)
        w = torch.rand(m, dtype=torch.float64, generator=gen, device=device)
        xi, xi1 = X[i], X[(i + 1).clamp(max=_ZIG_C)]
        f0 = torch.exp(-0.5 * (xi * xi - x * x))     # f(x_i) / f(x)  <= 1
        f1 = torch.exp(-0.5 * (xi1 * xi1 - x * x))   # f(x_i+1) / f(x) >= 1
        # the bug: a misplaced parenthesis; right: y uniform between f0 and f1
        y = f1 + (f0 - f1 * w) if wedge_bug else f1 + w * (f0 - f1)
        done = done | tail | (wedge & (y < 1))
        out[pending[done]] = val[done]
        pending = pending[~done]
    return out
