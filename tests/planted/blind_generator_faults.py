"""Blind generator-state sampler faults
(``--impl sampler.<method>=planted.blind_generator_faults:<attr>``).

Written WITHOUT reading how the suite checks samplers: only from the plug-in contract
(``docs/contracts.md``, ``sampler.<method>`` and **Samplers.**), the helpers in
``blind_sampler_common``, the correct ``outside_samplers``, torch's ``torch.Generator``
documentation and upstream reports. Every call draws the right law (numpy, float64, cast
to ``t``'s dtype); what is wrong is only how the stream relates to the state of the
``torch.Generator`` it is given:

- ``<m>_counter_per_generator``: ``initial_seed()`` plus a call counter kept on the side
  per generator object (``set_state`` / ``manual_seed`` on a used generator do not replay);
- ``<m>_rng_cached_per_generator``: a library generator seeded from the torch generator at
  first use and kept per generator object (a persistent curandState array);
- ``<m>_advance_by_reseed``: the stream keyed by ``initial_seed()``, the generator
  "advanced" by ``manual_seed(seed + 1)`` (call k of seed s is call 0 of seed s + k);
- ``<m>_advance_by_generator_seed``: the same, "advanced" by ``generator.seed()`` (which
  reseeds non-deterministically): only the first call after a seed reproduces;
- ``<m>_state_head_as_seed_offset``: reads ``get_state()[:16]`` as CUDA's (seed, offset);
  on the CPU those bytes are the seed and MT19937's position within its 624-word block;
- ``<m>_default_unseeded``: without a generator, an unseeded library generator instead of
  torch's default one.

Each ``<fault>`` has a ``<fault>_twin``: the same code path with the mistake fixed (must
pass everything). Methods ``<m>``: normal, uniform, exponential. ``FAULTS`` maps each
attribute to its area.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any
from weakref import WeakKeyDictionary

import numpy as np
import torch

from .blind_sampler_common import Gen, _check, _gen, _uniform_from
from .outside_samplers import _DRAW, _put

RngOf = Callable[[torch.Tensor, Gen], np.random.Generator]
METHODS = ("normal", "uniform", "exponential")


def _draw_key(gen: torch.Generator) -> int:
    """The contract's recipe: one 63-bit integer drawn from (and advancing) ``gen``."""
    return int(torch.randint(0, 2**63 - 1, (), generator=gen, device=gen.device))


def _philox(key: int, counter: int) -> np.random.Generator:
    words = np.array([0, 0, counter % 2**64, 0], dtype=np.uint64)
    return np.random.Generator(np.random.Philox(key=key % 2**64, counter=words))


# ------------------------------------------------------------ 1. counter per generator

_CALLS: WeakKeyDictionary[torch.Generator, int] = WeakKeyDictionary()


def _counter_per_generator(t: torch.Tensor, generator: Gen) -> np.random.Generator:
    """Philox keyed by ``initial_seed()``, counter = calls made so far on this generator
    object, kept in a WeakKeyDictionary (the generator is still advanced by one draw, so
    its state moves). ``set_state(saved)`` does not replay the call that followed
    ``saved`` (``torch.utils.checkpoint``'s ``preserve_rng_state`` recomputes dropout
    with different masks), ``manual_seed(s)`` on a used generator does not restart.

    Imitates oneflow issue #5425 (manual_seed on a used generator does not reset its
    state) and Python-side seed/offset bookkeeping of fused dropout kernels, the case of
    pytorch PR #162505 ("rewinding the RNG to a previous state ... done by
    torch.utils.checkpoint")."""
    gen = _gen(t, generator)
    counter = _CALLS.get(gen, 0)
    _CALLS[gen] = counter + 1
    _draw_key(gen)
    return _philox(gen.initial_seed(), counter)


def _counter_per_generator_twin(t: torch.Tensor, generator: Gen) -> np.random.Generator:
    """CORRECT: the same Philox keyed by ``initial_seed()``; the counter drawn from the
    generator instead of kept on the side."""
    gen = _gen(t, generator)
    return _philox(gen.initial_seed(), _draw_key(gen))


# ------------------------------------------------------ 2. library generator cached

_CACHED: WeakKeyDictionary[torch.Generator, np.random.Generator] = WeakKeyDictionary()


def _rng_cached_per_generator(t: torch.Tensor, generator: Gen) -> np.random.Generator:
    """A PCG64 seeded from the torch generator at its first use and kept per generator
    object, continuing from call to call; later calls neither read nor advance the torch
    generator, so ``set_state`` / ``manual_seed`` after the first call change nothing.

    Imitates per-device curandState arrays initialised once (caffe2 PR #1418: "states
    should be initialized once only", then overwritten between fprop and bprop; cutorch
    issue #54: the cuRAND host generator's state cannot be saved and restored)."""
    gen = _gen(t, generator)
    if gen not in _CACHED:
        _CACHED[gen] = np.random.Generator(np.random.PCG64(_draw_key(gen)))
    return _CACHED[gen]


def _rng_cached_per_generator_twin(t: torch.Tensor, generator: Gen) -> np.random.Generator:
    """CORRECT: the same PCG64, seeded from the torch generator on every call."""
    return np.random.Generator(np.random.PCG64(_draw_key(_gen(t, generator))))


# ---------------------------------------------- 3-4. stream keyed by the seed, reseeded

def _reseeding(advance: str) -> RngOf:
    def rng_of(t: torch.Tensor, generator: Gen) -> np.random.Generator:
        gen = _gen(t, generator)
        if advance == "draw":                       # the twin: key from the state
            return _philox(_draw_key(gen), 0)
        seed = gen.initial_seed()
        if advance == "seed+1":
            gen.manual_seed((seed + 1) % 2**64)
        else:
            gen.seed()
        return _philox(seed, 0)
    return rng_of


_advance_by_reseed = _reseeding("seed+1")
_advance_by_reseed.__doc__ = (
    """Philox keyed by ``initial_seed()``; the generator is "advanced" by
    ``manual_seed(seed + 1)``: calls on one generator differ and a seed replays, but call
    k after ``manual_seed(s)`` equals call 0 after ``manual_seed(s + k)`` (the streams of
    nearby seeds overlap), and a state restored by ``set_state`` carries its seed.

    Imitates consecutive integers as stream seeds (DataLoader's ``base_seed + worker_id``,
    openmc PR #235 "each stream has a different starting seed (which are just consecutive
    integers)").""")
_advance_by_generator_seed = _reseeding("seed()")
_advance_by_generator_seed.__doc__ = (
    """Philox keyed by ``initial_seed()``; the generator is "advanced" by
    ``generator.seed()``, which (torch docs) "gets a non-deterministic random number from
    std::random_device or the current time and uses it to seed a Generator": the first
    call after ``manual_seed`` reproduces, every later call is irreproducible.

    Imitates the ``seed()`` / ``manual_seed()`` confusion of pytorch issue #25070 ("the
    usual .seed(seed=None) method seeds to specific value") and enigma-dev issue #1324
    ("the next seed chosen ... is not based on the current seed").""")
_advance_twin = _reseeding("draw")
_advance_twin.__doc__ = "CORRECT: the same Philox, keyed by a draw from the generator."


# ------------------------------------------------ 5. CUDA's state layout read on the CPU

def _state_head_as_seed_offset(t: torch.Tensor, generator: Gen) -> np.random.Generator:
    """Philox keyed by the first 16 bytes of ``get_state()`` read as CUDA's layout
    (uint64 seed, uint64 Philox offset), then one draw to move the offset. On a CUDA
    generator this is right; on the CPU the second word is MT19937's ``left`` and
    ``seeded`` fields: the key cycles every 624 32-bit draws, and states reached by
    different histories at the same position share a stream.

    Imitates pytorch PR #98965 (``torch.cuda.get_rng_state()`` prints the seed in bytes
    0-7 and the offset in bytes 8-15) ported to a device whose state is laid out
    otherwise."""
    gen = _gen(t, generator)
    head = gen.get_state()[:16].numpy().tobytes()
    seed, offset = (int(w) for w in np.frombuffer(head, dtype=np.uint64))
    torch.randint(0, 2, (1,), generator=gen, device=gen.device)
    return _philox(seed, offset)


def _state_head_as_seed_offset_twin(t: torch.Tensor, generator: Gen
                                    ) -> np.random.Generator:
    """CORRECT: the same Philox, the offset word a digest of the whole state."""
    gen = _gen(t, generator)
    state = gen.get_state().numpy().tobytes()
    offset = int.from_bytes(hashlib.blake2b(state, digest_size=8).digest(), "little")
    torch.randint(0, 2, (1,), generator=gen, device=gen.device)
    return _philox(gen.initial_seed(), offset)


# ------------------------------------------------------ 6. no generator: unseeded

def _default_unseeded(t: torch.Tensor, generator: Gen) -> np.random.Generator:
    """With a generator, PCG64 keyed by a draw from it (right); without one, numpy's
    ``default_rng()`` (fresh OS entropy) instead of torch's default generator:
    ``torch.manual_seed`` does not reproduce a call made without ``generator``.

    Imitates facebook/Ax PR #1498 ("built in random uses a different random stream,
    which we do not control" under ``manual_seed``) and the contract's "without a
    generator torch's global one is used"."""
    if generator is None:
        return np.random.default_rng()
    return np.random.Generator(np.random.PCG64(_draw_key(generator)))


def _default_unseeded_twin(t: torch.Tensor, generator: Gen) -> np.random.Generator:
    """CORRECT: the same PCG64, keyed by a draw from ``_gen`` (the default generator)."""
    return np.random.Generator(np.random.PCG64(_draw_key(_gen(t, generator))))


# ------------------------------------------------------------------------ the samplers

def _sampler(method: str, rng_of: RngOf, doc: str | None) -> Callable[..., torch.Tensor]:
    def sampler(t: torch.Tensor, *params: Any, generator: Gen = None) -> torch.Tensor:
        _check(method + "_", t, *params)
        rng = rng_of(t, generator)
        if method == "uniform":
            return _uniform_from(t, float(params[0]), float(params[1]), rng)
        return _put(t, _DRAW[method](rng, t.numel(), *params))
    sampler.__doc__ = doc
    return sampler


_FAULT_RNG: dict[str, tuple[RngOf, RngOf]] = {
    "counter_per_generator": (_counter_per_generator, _counter_per_generator_twin),
    "rng_cached_per_generator": (_rng_cached_per_generator, _rng_cached_per_generator_twin),
    "advance_by_reseed": (_advance_by_reseed, _advance_twin),
    "advance_by_generator_seed": (_advance_by_generator_seed, _advance_twin),
    "state_head_as_seed_offset": (_state_head_as_seed_offset,
                                  _state_head_as_seed_offset_twin),
    "default_unseeded": (_default_unseeded, _default_unseeded_twin),
}

FAULTS: dict[str, str] = {}  # attribute -> area (twins included)
for _fault, (_bad, _good) in _FAULT_RNG.items():
    for _method in METHODS:
        for _name, _rng_of in ((f"{_method}_{_fault}", _bad),
                               (f"{_method}_{_fault}_twin", _good)):
            _fn = _sampler(_method, _rng_of, _rng_of.__doc__)
            _fn.__name__ = _fn.__qualname__ = _name
            _fn.conformance_name = f"blind.{_name}"  # type: ignore[attr-defined]
            globals()[_name] = _fn
            FAULTS[_name] = _method


def impl_args() -> list[str]:
    """The ``--impl`` options that plug every fault and twin in."""
    return [f"--impl=sampler.{area}=planted.blind_generator_faults:{name}"
            for name, area in FAULTS.items()]
