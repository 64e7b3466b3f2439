"""JAX as an outside implementation (tests/planted/outside_jax_indexing.py): with its
out-of-bounds indices routed to an error it passes; with JAX's own behaviour (NaN fill,
clip) it is flagged, and the failure says what came back. Needs jax (not a CI
dependency: run where it is installed)."""

from __future__ import annotations

import pytest

from tests.conftest import SUITE

jax = pytest.importorskip("jax")

from tests.planted.outside_jax_indexing import CHECKED, SILENT  # noqa: E402

MODULE = "tests.planted.outside_jax_indexing"


def test_jax_checked_passes_and_silent_is_flagged_with_what_came_back(suite):
    impls = [f"--impl=indexing.{a}={MODULE}:{x}" for a, x in CHECKED]
    impls += [f"--impl=indexing.{a}={MODULE}:{x}" for a, x, _ in SILENT]
    run = suite(str(SUITE / "indexing"), "-n", "2", "-q", "-p", "no:randomly",
                "--no-builtins", "-k", "test_invalid or test_valid", *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for _, name in CHECKED:
        rows = results.get(f"{MODULE}:{name}", [])
        bad = [(r["nodeid"], r.get("reason")) for r in rows
               if r["outcome"] not in ("passed", "unsupported")]
        assert rows and not bad, (name, bad[:3])
    for _, name, came_back in SILENT:
        rows = [r for r in results.get(f"{MODULE}:{name}", [])  # (integers: no NaN)
                if "test_invalid[n-" in r["nodeid"] and r["dtype"] == "float32"]
        assert rows and all(r["outcome"] == "failed" and came_back in (r.get("reason") or "")
                            for r in rows), [(r["outcome"], r.get("reason")) for r in rows][:2]
