"""The committed fault list (``tests/data/fault_list.json``) holds: every planted fault and
twin a module declares in ``SELFTEST``, judged in one child run per group (path and args,
each implementation stopped at its first failure), has the verdict the list gives. A kill
listed that survives, a twin that fails or stops running a listed dtype, or a kill credited
to another implementation's test fails its group's test. Record the list again with
``torch-conformance selftest --record tests/data/fault_list.json`` (from the clone's root)."""

from __future__ import annotations

import json
import sys

import pytest

from conformance.cli import faultlist, selftest
from tests.conftest import TESTS, SuiteRun, shared_run

LIST = TESTS / "data" / "fault_list.json"


def _entries() -> list[selftest.Entry]:
    return selftest.load_entries(selftest.planted_modules())


def _groups() -> dict[str, list[selftest.Entry]]:
    out: dict[str, list[selftest.Entry]] = {}
    for e in _entries():
        out.setdefault(" ".join((e.path, *e.args)), []).append(e)
    return out


def test_list_holds_every_declaration():
    """The list and the modules' SELFTEST declarations name the same entries, each fault
    listed as killed (with the test and dtype) and each twin as passing (with its dtypes)."""
    listed = faultlist.load(LIST)
    declared = {faultlist.key({"area": e.area, "spec": e.spec, "path": e.path,
                               "select": e.select, "expect": e.expect}) for e in _entries()}
    assert {faultlist.key(r) for r in listed} == declared
    for r in listed:
        if r["expect"] == "killed":
            assert r["verdict"] == "killed" and r["killed_by"], r
        else:
            assert r["verdict"] == "passes" and r["dtypes"], r


def group_run(factory: pytest.TempPathFactory, group: str) -> SuiteRun:
    """The one child run of ``group`` in this session, shared with the tests that read its
    messages (tests/test_planted_faults.py, tests/test_sampler_faults.py)."""
    name = "faultlist-" + "".join(c if c.isalnum() else "_" for c in group)
    return shared_run(factory, name, selftest.group_args(_groups()[group]))


@pytest.mark.parametrize("group", sorted(_groups()))
def test_group_as_listed(tmp_path_factory, group):
    entries = _groups()[group]
    run = group_run(tmp_path_factory, group)
    results = (run.report or {}).get("results", [])
    selftest.tally(entries, results, 0.0, run.output)
    problems = faultlist.compare(entries, faultlist.load(LIST), partial=True)
    kills = [f"{e.spec}: {e.verdict} {e.killed_by}" for e in entries]
    print(*kills, sep="\n")
    assert results and not problems, (problems, run.output[-2000:])


def _entry(expect: str, outcome: str, impl: str = "planted.x", nodeid_impl: str = "") -> tuple:
    e = selftest.Entry("planted.m", "topk", "x", "topk", "sel", expect)
    r = {"nodeid": f"t.py::test_values[{nodeid_impl or impl}-float32]", "outcome": outcome,
         "impl": impl, "area": "topk", "dtype": "float32", "reason": "why",
         "reproduce": "PYTHONPATH=. pytest --impl=topk=planted.m:x"}
    selftest.tally([e], [r], 0.0, "")
    row = {**faultlist.rows([e])[0], "verdict": "killed" if expect == "killed" else "passes",
           "killed_by": "test_values[float32]" if expect == "killed" else None,
           "dtypes": ["float32"]}
    return e, row


@pytest.mark.harness_only
@pytest.mark.parametrize("expect,outcome,nodeid_impl,words", [
    ("killed", "passed", "", "now survived"),
    ("passes", "failed", "", "a correct twin, now FAILS"),
    ("killed", "failed", "builtin.topk", "credited to a test of another implementation"),
    ("passes", "skipped", "", "a correct twin, now no test ran"),
])
def test_compare_fails_what_the_list_forbids(expect, outcome, nodeid_impl, words):
    """Without a suite run: each way a run can break the list is named."""
    e, row = _entry(expect, outcome, nodeid_impl=nodeid_impl)
    problems = faultlist.compare([e], [row])
    assert any(words in p for p in problems), problems
    good, row = _entry(expect, "failed" if expect == "killed" else "passed")
    assert faultlist.compare([good], [row]) == []
    assert any("listed but no module declares it" in p
               for p in faultlist.compare([], [row]))
    assert any("declared but not in the list" in p for p in faultlist.compare([good], []))


@pytest.mark.harness_only
def test_record_of_some_areas_keeps_the_other_rows(tmp_path):
    """--record with --area rewrites the rows of those areas only."""
    e, _ = _entry("killed", "failed")  # area topk
    other = {"area": "special.erfcx", "spec": "m:f", "path": "p", "select": "s",
             "expect": "killed", "verdict": "killed", "killed_by": "t", "dtypes": []}
    stale = {**other, "area": "topk", "spec": "m:gone"}
    path = tmp_path / "list.json"
    path.write_text(json.dumps({"entries": [other, stale]}))
    faultlist.write(path, [e], areas=["topk"])
    assert [r["spec"] for r in faultlist.load(path)] == ["m:f", "planted.m:x"]
    faultlist.write(path, [e])  # a whole run: the run's rows only
    assert [r["spec"] for r in faultlist.load(path)] == ["planted.m:x"]


@pytest.mark.harness_only
def test_cli_against_a_list_that_forbids_a_survivor(tmp_path):
    """selftest --against exits 1 naming the listed kill that survived (a user's module whose
    'fault' is correct, listed as killed), and --record refuses to record it."""
    import subprocess

    (tmp_path / "my_faults.py").write_text(
        "import torch\n"
        "def not_a_fault(x):\n    return torch.special.erfcx(x)\n"
        "not_a_fault.conformance_name = 'mine'\n"
        "not_a_fault.conformance_dtypes = ['float32']\n"
        "SELFTEST = [{'area': 'special.erfcx', 'impl': 'not_a_fault', 'expect': 'killed',\n"
        "             'path': 'special/test_erfcx.py',\n"
        "             'select': 'mine and test_forward and not huge'}]\n")
    row = {"area": "special.erfcx", "spec": "my_faults:not_a_fault",
           "path": "special/test_erfcx.py", "select": "mine and test_forward and not huge",
           "expect": "killed", "verdict": "killed", "killed_by": "test_forward[float32]",
           "dtypes": ["float32"]}
    (tmp_path / "list.json").write_text(json.dumps({"entries": [row]}))
    env = {**selftest.child_env(), "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "conformance.cli", "selftest", "--no-planted",
                           "--module", "my_faults", "--against", "list.json",
                           "--record", "new.json"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stdout + proc.stderr[-2000:]
    assert ("FAULT LIST: my_faults:not_a_fault: killed by test_forward[float32] when the list "
            "was recorded, now survived") in proc.stdout, proc.stdout
    assert "not recorded" in proc.stderr and not (tmp_path / "new.json").exists()
