"""The profiles make a run's draws a function of the seed and the test alone: Hypothesis's
pool of constants from loaded local modules stays empty (conformance/harness/profiles.py), so a
failure's one-test reproduce line draws the cases the whole run drew."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.harness.profiles import apply_profile


def local_constants() -> object | None:
    """The pool Hypothesis draws local constants from (None where it has none)."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:
        return None
    getter = getattr(providers, "_get_local_constants", None)
    return getter() if getter is not None else None

pytestmark = pytest.mark.harness_only

MAGIC = 918273645


def _draws(seed: int) -> list[int]:
    seen: list[int] = []

    @given(st.integers(0, 2**31 - 1))
    def collect(x: int) -> None:
        seen.append(x)

    apply_profile("ci", seed)
    collect()
    return seen


def test_loaded_modules_change_no_draw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = _draws(7)
    (tmp_path / "constants_mod.py").write_text(
        "".join(f"C{i} = {MAGIC + i}\n" for i in range(200)))
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("constants_mod")
    try:
        after = _draws(7)
        pool = local_constants()
        assert pool is None or len(pool) == 0, "local constants were collected"
        assert after == before
        assert not any(MAGIC <= x < MAGIC + 200 for x in after)
    finally:
        sys.modules.pop("constants_mod", None)
        apply_profile("ci", 0)
