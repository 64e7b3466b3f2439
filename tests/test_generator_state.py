"""The generator-state check (conformance/areas/samplers/generator_state.py) on a stand-in
for a Philox generator with offsets (CUDA's, which this machine lacks): a sampler drawing
from the generator's (seed, offset) passes; one that keeps its stream position on the side,
or ignores set_offset, fails with the property named."""

from __future__ import annotations

import weakref

import pytest
import torch

from conformance.areas.samplers.generator_state import has_offset, state_problems

pytestmark = pytest.mark.harness_only  # a stand-in generator: newest torch only in CI


class Philox:
    """(seed, offset), advanced by 4 per value drawn, as CUDA's generator counts."""

    def __init__(self, seed: int = 0, offset: int = 0) -> None:
        self.seed, self.offset = seed, offset

    def manual_seed(self, seed: int) -> Philox:
        self.seed, self.offset = seed, 0
        return self

    def get_state(self) -> torch.Tensor:
        return torch.tensor([self.seed, self.offset])

    def set_state(self, state: torch.Tensor) -> None:
        self.seed, self.offset = (int(v) for v in state)

    def clone_state(self) -> Philox:
        return Philox(self.seed, self.offset)

    def get_offset(self) -> int:
        return self.offset

    def set_offset(self, offset: int) -> None:
        self.offset = offset


def _values(seed: int, offset: int, n: int = 8) -> torch.Tensor:
    return torch.randint(0, 2**30, (n,), generator=torch.Generator().manual_seed(
        seed * 1_000_003 + offset))


def correct(gen: Philox) -> torch.Tensor:
    out = _values(gen.seed, gen.offset)
    gen.offset += 4 * out.numel()
    return out


_private: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def private_position(gen: Philox) -> torch.Tensor:
    """Its own call count per generator object; advances the generator's offset too."""
    k = _private.get(gen, 0)
    _private[gen] = k + 1
    gen.offset += 32
    return _values(gen.seed, k)


def _run(call) -> tuple[list[str], int]:
    return state_problems(lambda: Philox().manual_seed(7), 7, call)


def test_correct_sampler_passes_all_six():
    assert has_offset(Philox())
    assert _run(correct) == ([], 6)


def test_private_stream_position_fails():
    problems, checked = _run(private_position)
    assert checked == 6
    text = "; ".join(problems)
    for what in ("clone_state()", "set_state(", "set_offset("):
        assert what in text, text


def test_cpu_generator_has_no_offset_three_properties():
    assert not has_offset(torch.Generator())
    problems, checked = state_problems(
        lambda: torch.Generator().manual_seed(3), 3,
        lambda g: torch.rand(16, generator=g))
    assert (problems, checked) == ([], 3)


def test_offset_not_advanced_fails():
    def frozen(gen: Philox) -> torch.Tensor:
        return _values(gen.seed, gen.offset)

    problems, _ = _run(frozen)
    assert any("did not advance the generator's offset" in p for p in problems), problems
