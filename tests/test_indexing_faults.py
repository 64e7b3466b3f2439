"""The issue's indexing faults, plugged in through ``--impl indexing.<op>=...``, are flagged
with a clear message; their correct twins pass the same tests (one child run, builtins off).
Also: the invalid-index cases run in the isolation runner give the same verdicts."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import SUITE

# (area, planted implementation, its correct twin, the check that must flag it, test kind)
FAULTS = [
    ("index_select", "clamping_index_select", "correct_index_select",
     "error raised no later than the next sync point", "test_invalid"),
    ("gather", "wrapping_gather", "correct_gather",
     "error raised no later than the next sync point", "test_invalid[n-"),
    ("embedding", "embedding_reads_next_row", "correct_embedding",
     "error raised no later than the next sync point", "test_invalid[n-"),
    ("scatter_", "scatter_one_past", "correct_scatter",
     "no write outside the", "test_"),
    ("index_select", "index_select_accepts_negative", "correct_index_select",
     "error raised no later than the next sync point", "test_invalid[-1-"),
    ("take", "late_take", "correct_take",
     "error raised no later than the next sync point", "test_invalid"),
]


def test_planted_indexing_faults_are_flagged(suite):
    impls = sorted({f"--impl=indexing.{a}=planted.indexing_faults:{x}"
                    for a, fault, twin, _, _ in FAULTS for x in (fault, twin)})
    run = suite(str(SUITE / "indexing"), "-n", "0", "-q", "-p", "no:randomly",
                "--no-builtins", *impls)
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    for area, fault, twin, check, where in FAULTS:
        rows = [r for r in results.get(f"planted.{fault}", []) if where in r["nodeid"]]
        failed = [r for r in rows if r["outcome"] == "failed"]
        assert failed, f"planted.{fault} was not flagged by {where}"
        assert all(check in (r.get("reason") or "") + str(r.get("checks")) for r in failed), \
            (fault, [r.get("reason") for r in failed][:3])
        assert f"--impl=indexing.{area}=planted.indexing_faults:{fault}" in run.stdout
        twins = results.get(f"planted.{twin}", [])
        # expected-fail: the twin under torch.compile meets Inductor's bug (the matrix)
        bad = [r["nodeid"] for r in twins
               if r["outcome"] not in ("passed", "unsupported", "expected-fail")]
        assert twins and not bad, (twin, bad)
    assert "silent out-of-bounds" in run.stdout
    assert "reproduce: PYTHONPATH=" in run.stdout


def test_invalid_cases_in_the_isolation_runner(suite, tmp_path: Path):
    """The CPU's invalid cases run in a warm child (its matrix entry says
    ``errors: {isolate: true}``): a clamping fault flagged, torch's own op passing, and
    each outcome with its foreground command in the report."""
    run = suite(str(SUITE / "indexing"), "-n", "0", "-q", "-p", "no:randomly", "--tb=short",
                "-k", "TestIndexSelect and test_invalid",
                "--impl=indexing.index_select=planted.indexing_faults:clamping_index_select")
    assert run.returncode == 1, run.output[-3000:]
    results = run.by_impl()
    assert all(r["outcome"] == "passed" for r in results["torch.index_select"])
    # on a size-0 dim the clamp gives index -1, which torch's own index_select rejects
    assert all(r["outcome"] == "failed" for r in results["planted.clamping_index_select"]
               if "empty_dim" not in r["nodeid"])
    notes = [r for r in results["torch.index_select"] if (r.get("notes") or {}).get("isolated")]
    assert notes, "no isolated outcome recorded"
    first = notes[0]["notes"]["isolated"][0]
    assert first["kind"] == "returned" and "torch-conformance isolate" in first["foreground"]
    assert "rerun in the foreground: torch-conformance isolate" in run.stdout


def test_poisoning_device_declaration(suite, tmp_path: Path):
    """A device declared ``errors: {after: poisoned}`` runs its invalid cases isolated, in
    float32 and int64 only (each would need a fresh child there), and accepts a device that
    raises afterwards, never a wrong result."""
    matrix = (SUITE.parent / "device_matrix.yaml").read_text()
    flipped = matrix.replace("errors: {after: keeps_working, isolate: true}",
                             "errors: {after: poisoned, isolate: true}", 1)
    assert flipped != matrix
    path = tmp_path / "matrix.yaml"
    path.write_text(flipped)
    run = suite(str(SUITE / "indexing"), "-n", "0", "-q", "-p", "no:randomly",
                f"--device-matrix={path}", "-k", "TestGather and test_invalid and (n- or -1-)")
    assert run.returncode == 0, run.output[-3000:]
    rows = run.report["results"]
    ran = [r for r in rows if r["outcome"] == "passed"]
    skipped = [r for r in rows if r["outcome"] == "unsupported"]
    assert ran and all(r["dtype"] in ("float32", "int64") for r in ran), \
        [r["nodeid"] for r in ran]
    assert skipped and all("time budget" in r["reason"] for r in skipped)


def test_crash_is_contained_and_its_writes_seen(suite):
    """A fault that writes past the view and then aborts its process: the test fails on the
    crash AND on the write (the guards live in an arena the parent reads after the child
    died), the cases after the crash are not run, and the run goes on to the next test."""
    run = suite(str(SUITE / "indexing"), "-n", "0", "-q", "-p", "no:randomly", "--no-builtins",
                "-k", "TestIndexSelect and test_invalid and (huge or late) and float32",
                "--impl=indexing.index_select=planted.indexing_faults:"
                "index_select_writes_then_aborts")
    assert run.returncode == 1, run.output[-3000:]
    rows = run.by_impl()["planted.index_select_writes_then_aborts"]
    assert len(rows) == 2 and all(r["outcome"] == "failed" for r in rows), \
        [(r["nodeid"], r["outcome"]) for r in rows]
    for r in rows:
        reason = (r.get("reason") or "") + str(r.get("checks"))
        assert "no write outside the destination" in reason and "SIGABRT" in reason, \
            reason[:600]
        assert "outside the view were written" in reason, reason[:600]
        assert "later case(s) not run after" in str(r.get("notes")), r.get("notes")
