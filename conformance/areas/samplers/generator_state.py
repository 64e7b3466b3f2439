"""The stream is a function of the generator's state, and of nothing else.

A sampler that keeps its own stream position on the side (a counter per generator object,
a seed read once at first use) draws the right law in every call and reproduces a freshly
seeded generator, yet breaks what torch's generator API promises: restoring a saved state
replays the calls that followed it (``get_state``/``set_state``, ``torch.random.fork_rng``),
reseeding a used generator restarts its stream, a cloned state (``clone_state``, what CUDA
graphs and ``torch.compile`` use to replay random ops) continues the same stream, and, where
the generator counts a Philox offset (CUDA), ``set_offset(o)`` on a generator of the same seed
resumes exactly where ``get_offset()`` was read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch

HIGH_SEED_BITS = (32, 40, 48, 63)

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
