"""The rank pool (conformance.processes.ranks): warm reuse, every rank's state when a collective
hangs or a rank dies, restart, no orphans, and two pools (two xdist workers) running
collectives at the same time."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.processes.ranks import run_ranks, shutdown

pytestmark = pytest.mark.harness_only
CASES = "tests.planted.rank_cases"
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module", autouse=True)
def _pools():
    yield
    shutdown()


def _pids(outcome) -> list[int]:
    return [o.pid for o in outcome.outcomes]


def test_warm_pool_is_reused():
    first = run_ranks(f"{CASES}:rank_sum", world=3)
    assert first.ok, first.describe()
    assert [v["sum"] for v in first.values] == [6.0] * 3
    assert [v["rank"] for v in first.values] == [0, 1, 2]
    start = time.monotonic()
    again = run_ranks(f"{CASES}:rank_sum", world=3)
    assert again.ok and _pids(again) == _pids(first)  # the same processes
    assert time.monotonic() - start < 1.0
    assert first.info["backend"] == "gloo" and first.info["start_seconds"] > 0


def test_a_rank_that_never_joins_fails_within_the_timeout():
    before = run_ranks(f"{CASES}:rank_sum", world=3)
    start = time.monotonic()
    hung = run_ranks(f"{CASES}:skip_on_rank", 1, world=3, timeout=2)
    assert time.monotonic() - start < 8
    assert not hung.ok and hung.restarted == "a rank hung or died"
    kinds = [o.kind for o in hung.outcomes]
    assert kinds == ["timeout", "returned", "timeout"], hung.describe()
    text = hung.describe()
    assert "rank 0" in text and "rank 1" in text and "hung" in text
    for pid in _pids(before):  # the old ranks are gone (no orphans)
        assert not Path(f"/proc/{pid}").exists() or _zombie(pid)
    after = run_ranks(f"{CASES}:rank_sum", world=3)
    assert after.ok and set(_pids(after)).isdisjoint(_pids(before))


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


def test_a_dying_rank_and_mismatched_shapes():
    died = run_ranks(f"{CASES}:die_on_rank", 2, world=3, timeout=20)
    assert not died.ok and died.outcomes[2].kind == "signal"
    assert died.outcomes[2].signal == "SIGSEGV"
    assert died.seconds < 10  # the others get a grace period, not the whole timeout
    mismatched = run_ranks(f"{CASES}:mismatched_shapes", world=3, timeout=5)
    assert not mismatched.ok and mismatched.restarted
    assert run_ranks(f"{CASES}:rank_sum", world=3).ok


def test_ranks_left_out_of_step_are_named_and_join_a_new_group():
    """Every rank returned, but one ran a collective the others did not: the outcome says
    so with each rank's count, and the same ranks join a new group, so the next case runs
    instead of hanging (the old group's next collective would pair different calls)."""
    before = run_ranks(f"{CASES}:rank_sum", world=3)
    skewed = run_ranks(f"{CASES}:extra_empty_collective", 1, world=3, timeout=20)
    assert skewed.ok, skewed.describe()  # every rank returned
    counts = [int(c) for c in re.findall(r"rank \d: (\d+)", skewed.out_of_step)]
    assert len(counts) == 3 and counts[1] == counts[0] + 1 == counts[2] + 1, skewed.describe()
    assert not skewed.restarted and "joined a new group" in skewed.describe()
    start = time.monotonic()
    after = run_ranks(f"{CASES}:rank_sum", world=3, timeout=20)
    assert after.ok and [v["sum"] for v in after.values] == [6.0] * 3, after.describe()
    assert _pids(after) == _pids(before)  # the same processes, a new group
    assert time.monotonic() - start < 5  # no hang on the old group
    assert not after.out_of_step and not after.restarted
    again = run_ranks(f"{CASES}:extra_empty_collective", 2, world=3, timeout=20)
    counts = [int(c) for c in re.findall(r"rank \d: (\d+)", again.out_of_step)]
    assert counts[2] == counts[0] + 1 and not again.restarted, again.describe()  # again
    assert run_ranks(f"{CASES}:rank_sum", world=3, timeout=20).ok


def test_out_of_step_reads_the_counts():
    from conformance.processes.ranks import _out_of_step

    assert _out_of_step([4, 4, 4]) == ""
    assert _out_of_step([None, None]) == ""  # a backend that counts nothing
    assert _out_of_step([4, None, 4]) == ""
    text = _out_of_step([4, 5, 4])
    assert "rank 0: 4, rank 1: 5, rank 2: 4" in text


def test_a_raising_rank_keeps_the_pool():
    before = run_ranks(f"{CASES}:rank_sum", world=2)
    raised = run_ranks(f"{CASES}:raise_on_rank", 0, world=2)
    assert raised.outcomes[0].raised("ValueError") and raised.outcomes[1].kind == "returned"
    assert raised.restarted == ""  # the probe collective found the group healthy
    assert _pids(run_ranks(f"{CASES}:rank_sum", world=2)) == _pids(before)


def test_a_raising_rank_that_leaves_the_others_waiting_ends_the_case_early():
    start = time.monotonic()
    out = run_ranks(f"{CASES}:raise_then_block", 0, world=3, timeout=60)
    assert time.monotonic() - start < 20  # the grace period, not the 60 s timeout
    assert out.outcomes[0].raised("ValueError")
    assert [o.kind for o in out.outcomes[1:]] == ["timeout", "timeout"], out.describe()
    assert all("of rank 0 raising" in o.retire_reason for o in out.outcomes[1:])
    assert out.restarted
    assert run_ranks(f"{CASES}:rank_sum", world=3).ok


def test_a_lockstep_case_gives_the_others_a_grace_after_the_first_reply():
    start = time.monotonic()
    out = run_ranks(f"{CASES}:return_then_block", 1, world=2, timeout=60, lockstep=True)
    assert time.monotonic() - start < 20  # the grace period, not the 60 s timeout
    assert [o.kind for o in out.outcomes] == ["timeout", "returned"], out.describe()
    assert "of rank 1 replying (a lockstep case)" in out.outcomes[0].retire_reason
    assert run_ranks(f"{CASES}:rank_sum", world=2).ok


def test_two_workers_run_collectives_at_the_same_time(tmp_path: Path):
    """Two pytest-xdist workers, each with its own pool, hold a barrier at the same time
    (FileStore rendezvous in per-pool directories: no port is fixed)."""
    test = tmp_path / "test_two.py"
    test.write_text(
        "import json, os\n"
        "import pytest\n"
        "from conformance.processes.ranks import run_ranks\n"
        "@pytest.mark.parametrize('n', [0, 1])\n"
        "def test_barrier(n):\n"
        f"    out = run_ranks('{CASES}:sleep_then_barrier', 3.0, world=2, timeout=60)\n"
        "    assert out.ok, out.describe()\n"
        "    path = os.path.join(os.environ['SPANS'], f'{n}.json')\n"
        "    json.dump(out.values, open(path, 'w'))\n")
    env = {**os.environ, "SPANS": str(tmp_path), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "pytest", str(test), "-n", "2", "-q",
                           "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir",
                           str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    import json

    spans = [json.loads((tmp_path / f"{n}.json").read_text()) for n in (0, 1)]
    (a0, a1), (b0, b1) = [(min(v["start"] for v in s), max(v["end"] for v in s))
                          for s in spans]
    assert a0 < b1 and b0 < a1, f"the barriers did not overlap: {spans}"
