"""Hypothesis strategies shared by areas. Every draw is labelled, so a failing example
prints as a readable case."""

from __future__ import annotations

from hypothesis import strategies as st

# Awkward sizes: 0/1, primes, and both sides of powers of two and common tile sizes.
AWKWARD_SIZES = (0, 1, 2, 3, 5, 7, 16, 17, 31, 32, 33, 63, 64, 65, 113, 127, 128, 129, 203,
                 239, 255, 256, 257)


def sizes(min_size: int = 0, max_size: int = 257) -> st.SearchStrategy[int]:
    """Mostly awkward sizes, sometimes any size in range."""
    picks = [s for s in AWKWARD_SIZES if min_size <= s <= max_size]
    return st.one_of(st.sampled_from(picks), st.integers(min_size, max_size))


def shapes(ndim_min: int, ndim_max: int, *, max_numel: int, min_size: int = 0,
           max_size: int = 257) -> st.SearchStrategy[tuple[int, ...]]:
    """Shapes whose element count stays under ``max_numel``."""

    @st.composite
    def build(draw: st.DrawFn) -> tuple[int, ...]:
        ndim = draw(st.integers(ndim_min, ndim_max), label="ndim")
        shape: list[int] = []
        for i in range(ndim):
            room = max_numel
            for s in shape:
                room //= max(s, 1)
            shape.append(draw(sizes(min_size, max(min(max_size, room), min_size)),
                              label=f"size[{i}]"))
        return tuple(shape)

    return build()


def seeds() -> st.SearchStrategy[int]:
    """A seed for numpy-generated data (Hypothesis picks, and shrinks, the seed only)."""
    return st.integers(0, 2**32 - 1)
