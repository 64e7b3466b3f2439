"""The kernel compile cache (impls/attention/fa4/compile_cache.py): a hit only for identical
inputs, any source change misses, failures are never stored, and it can be turned off."""

from __future__ import annotations

import pytest

from impls.attention.fa4 import compile_cache

pytestmark = pytest.mark.harness_only


@pytest.fixture
def calls(tmp_path, monkeypatch):
    monkeypatch.setenv("FA4_COMPILE_CACHE", str(tmp_path / "cache"))
    compile_cache.sources_digest.cache_clear()
    made: list[str] = []

    def compile_fn(name: str):
        def run():
            made.append(name)
            return {"name": name, "registers": 128}
        return run

    yield made, compile_fn
    compile_cache.sources_digest.cache_clear()


def test_second_identical_compile_is_a_hit(calls):
    made, fn = calls
    first = compile_cache.cached_compile("sm_100a", "fwd", "v", fn("v"))
    second = compile_cache.cached_compile("sm_100a", "fwd", "v", fn("v"))
    assert made == ["v"]
    assert (first["cached"], second["cached"]) == (False, True)
    assert second["registers"] == 128


def test_arch_kernel_and_variant_are_part_of_the_key(calls):
    made, fn = calls
    for arch, kernel, name in (("sm_100a", "fwd", "v"), ("sm_90a", "fwd", "v"),
                               ("sm_100a", "bwd", "v"), ("sm_100a", "fwd", "w")):
        compile_cache.cached_compile(arch, kernel, name, fn(name))
    assert len(made) == 4


def test_a_source_change_misses(calls, monkeypatch):
    made, fn = calls
    compile_cache.cached_compile("sm_100a", "fwd", "v", fn("v"))
    compile_cache.sources_digest.cache_clear()
    real = compile_cache.FA4

    class Edited(type(real)):  # the same tree with one more file: another digest
        def rglob(self, pattern):
            yield from real.rglob(pattern)
            yield real / "spec.py"

    monkeypatch.setattr(compile_cache, "FA4", Edited(real))
    compile_cache.cached_compile("sm_100a", "fwd", "v", fn("v"))
    assert made == ["v", "v"]


def test_failures_are_not_stored_and_off_disables(calls, monkeypatch):
    made, fn = calls

    def broken():
        raise RuntimeError("ptxas error")

    with pytest.raises(RuntimeError):
        compile_cache.cached_compile("sm_100a", "fwd", "x", broken)
    assert compile_cache.cached_compile("sm_100a", "fwd", "x", fn("x"))["cached"] is False
    monkeypatch.setenv("FA4_COMPILE_CACHE", "off")
    compile_cache.cached_compile("sm_100a", "fwd", "x", fn("x"))
    assert made == ["x", "x"]
