"""The blind graph runtimes (tests/planted/blind_graph_runtimes.py, written without reading
the checks) are each killed by the test that ``AFTER`` names, with the check that says so,
and their correct twins (plain and staged inputs) pass every killing test (one child run,
builtins off, float32: only the killing tests, the reference's full sweep is
tests/test_graph_faults.py's)."""

from __future__ import annotations

import pytest

from tests.conftest import SUITE
from tests.planted.blind_graph_runtimes import AFTER, KILLED_BY
from tests.test_graph_faults import _keyword

# CI's oldest leg runs it too: the graph runtimes' capture and replay APIs change between releases
pytestmark = pytest.mark.torch_release

TWINS = ("correct", "correct_staged")


def test_blind_graph_faults_are_killed(suite):
    impls = [f"--impl=graphs=planted.blind_graph_runtimes:{x}" for x in (*KILLED_BY, *TWINS)]
    named = " or ".join(t for t, _ in KILLED_BY.values())
    tests = " or ".join(sorted({t.split("[")[0] for t, _ in KILLED_BY.values()}))
    run = suite(str(SUITE / "graphs" / "test_graphs.py"), str(SUITE / "graphs" /
                "test_regressions.py"), str(SUITE / "graphs" / "test_pitfalls.py"), "-n", "0",
                "-q", "-p", "no:randomly", "--no-builtins", "-k",
                f"(blind_correct and ({tests}) and not bfloat16) or {_keyword(named)}", *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for fault, (name, check) in KILLED_BY.items():
        rows = {r["nodeid"].split("::")[-1]: r for r in results.get(fault, [])}
        row = rows.get(name)
        assert row is not None and row["outcome"] == "failed", (fault, name, row)
        assert check in (row.get("reason") or ""), (fault, name, row.get("reason"))
        assert AFTER[fault].startswith("killed by"), (fault, AFTER[fault])
    for twin in ("blind_correct", "blind_correct_staged"):
        rows = results.get(twin, [])
        ran = [r for r in rows if r["outcome"] not in ("skipped", "unsupported")]
        assert len(ran) >= len({t.split("[")[0] for t, _ in KILLED_BY.values()}), (twin, rows)
        assert all(r["outcome"] == "passed" for r in ran), \
            [(r["nodeid"], r["outcome"], r.get("reason")) for r in rows]
