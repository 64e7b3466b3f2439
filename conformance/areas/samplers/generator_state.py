"""The stream is a function of the generator's state, and of nothing else.

A sampler that keeps its own stream position on the side (a counter per generator object,
a seed read once at first use) draws the right law in every call and reproduces a freshly
seeded generator, yet breaks what torch's generator API promises: restoring a saved state
replays the calls that followed it (``get_state``/``set_state``, ``torch.random.fork_rng``),
reseeding a used generator restarts its stream, a cloned state (``clone_state``, what CUDA
graphs and ``torch.compile`` use to replay random ops) continues the same stream, and, where
the generator counts a Philox offset (CUDA), ``set_offset(o)`` on a generator of the same seed
resumes exactly where ``get_offset()`` was read. A call without a generator draws from
torch's default one, so ``torch.manual_seed`` reproduces it. And a generator used for many
calls never repeats one: a stream keyed by a position in a cycle (mt19937's state holds a
624-word cycle) comes back to the same values (``repeated_calls``).
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator

import numpy as np
import torch

from conformance.stats.gof import ALPHA, FloatFormat, TestResult
from oracles.sampler_tails import collision_probability
from oracles.samplers import Oracle

HIGH_SEED_BITS = (32, 40, 48, 63)
MANY_CALLS = 1000  # more than mt19937's 624-word cycle

Call = Callable[[torch.Generator], torch.Tensor]  # one draw from the generator, as bits


@functools.lru_cache(maxsize=8)
def generator_drops_high_bits(device: torch.device) -> list[int]:
    """The bits of HIGH_SEED_BITS the device's torch.Generator ignores (torch.rand)."""
    def first(s: int) -> torch.Tensor:
        gen = torch.Generator(device=device).manual_seed(s)
        return torch.rand(64, generator=gen, device=device).cpu()

    base = first(12345)
    return [bit for bit in HIGH_SEED_BITS if torch.equal(base, first(12345 | (1 << bit)))]


def has_offset(gen: torch.Generator) -> bool:
    """Whether the generator counts a Philox offset (CUDA; the CPU's mt19937 raises)."""
    try:
        gen.get_offset()
    except (RuntimeError, AttributeError):
        return False
    return True


def state_problems(fresh: Callable[[], torch.Generator], seed: int, call: Call
                   ) -> tuple[list[str], int]:
    """Problems found and the number of properties checked. ``fresh()``: a new generator
    seeded ``seed`` on the device; ``call(gen)``: one sampler call's output (bits, any
    device), drawn from ``gen``."""
    problems: list[str] = []

    def same(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
        if not torch.equal(a.cpu(), b.cpu()):
            differ = int((a.cpu() != b.cpu()).sum())
            problems.append(f"{what} ({differ} of {a.numel()} values differ)")

    gen = fresh()
    first = call(gen)
    saved = gen.get_state()
    clone = gen.clone_state()
    second = call(gen)
    same(call(clone), second, "clone_state() taken after call 1 did not continue with call 2")
    gen.set_state(saved)
    same(call(gen), second, "set_state(get_state() read after call 1) did not replay call 2")
    gen.manual_seed(seed)
    same(call(gen), first, "manual_seed(seed) on a used generator did not restart its stream")
    checked = 3
    if not has_offset(gen):
        return problems, checked
    gen = fresh()
    o0 = gen.get_offset()
    first = call(gen)
    o1 = gen.get_offset()
    second = call(gen)
    if o1 <= o0:
        problems.append(f"a call did not advance the generator's offset ({o0} -> {o1})")
    other = fresh()
    other.set_offset(o1)
    same(call(other), second, f"set_offset({o1}) (get_offset() after call 1) on a new "
         "generator of the same seed did not resume at call 2")
    other.set_offset(o0)
    same(call(other), first, f"set_offset({o0}) did not replay call 1")
    return problems, checked + 3


@contextlib.contextmanager
def global_rng_kept(device: torch.device) -> Iterator[None]:
    """Reseed torch's default generators inside; their states are restored after."""
    mod = torch.get_device_module(device.type)
    index = device.index if device.index is not None else (
        mod.current_device() if hasattr(mod, "current_device") else 0)  # MPS has one device
    devices = [] if device.type == "cpu" else [index]
    with torch.random.fork_rng(devices=devices, device_type=device.type):
        yield


def default_generator_problems(call: Callable[[], torch.Tensor], seed: int,
                               device: torch.device) -> tuple[list[str], int]:
    """A call without a generator draws from torch's default one: ``torch.manual_seed``
    reproduces two successive calls, another seed or the next call gives other values.
    ``call()``: one call without a generator (bits). The global state is restored after."""
    with global_rng_kept(device):
        torch.manual_seed(seed)
        a, a_next = call().cpu(), call().cpu()
        torch.manual_seed(seed)
        b, b_next = call().cpu(), call().cpu()
        torch.manual_seed(seed + 1)
        c = call().cpu()
    problems = []
    if not (torch.equal(a, b) and torch.equal(a_next, b_next)):
        problems.append("torch.manual_seed(seed) did not reproduce two calls made without a "
                        "generator")
    if torch.equal(a, a_next):
        problems.append("two calls without a generator gave the same values")
    if torch.equal(a, c):
        problems.append("without a generator, torch.manual_seed(seed + 1) gave seed's values")
    return problems, 3


def call_length(o: Oracle, fmt: FloatFormat | None, calls: int = MANY_CALLS) -> int:
    """Values per call so that, among ``calls`` independent calls, the expected number of
    equal pairs is at most ALPHA / 10 (and at least 16 values)."""
    q = collision_probability(o, fmt)
    pairs = calls * (calls - 1) / 2
    return max(16, math.ceil(math.log(ALPHA / 10 / pairs) / math.log(q)))


def repeated_calls(calls: list[np.ndarray], o: Oracle, fmt: FloatFormat | None,
                   label: str) -> TestResult:
    """No two of ``calls`` (raw bit patterns of successive calls on one generator, equal
    sizes) are equal. The p-value bound is the expected number of equal pairs under
    independence (Markov)."""
    seen: dict[bytes, int] = {}
    repeats: list[tuple[int, int]] = []
    for k, bits in enumerate(calls):
        first = seen.setdefault(bits.tobytes(), k)
        if first != k:
            repeats.append((first, k))
    size = calls[0].size
    q = collision_probability(o, fmt)
    bound = len(calls) * (len(calls) - 1) / 2 * q**size
    shown = ", ".join(f"call {k} = call {j}" for j, k in repeats[:3])
    return TestResult(f"no call of {size} values repeats another among {len(calls)} calls "
                      f"on one generator ({label})", float(len(repeats)),
                      min(1.0, bound) if repeats else 1.0, size * len(calls),
                      f"{len(repeats)} repeated: {shown}" if repeats else
                      f"none repeated (collision probability {q:.3g} per value)")
