"""conformance/run/schedule.py: which tests share a worker under ``-n N``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conformance.run.schedule import queue_order, scopes


def _ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}::test_x[{i}]" for i in range(n)]


def test_a_full_run_pins_the_per_process_areas_and_chunks_the_rest():
    ids = (_ids("conformance/areas/attention/test_attention.py", 400)
           + ["conformance/areas/attention/test_attention.py::test_f[flex.compiled-float32-a]"] * 1
           + _ids("conformance/areas/collectives/test_collectives.py", 60)
           + _ids("conformance/areas/export/test_export.py", 30)
           + _ids("conformance/areas/topk/t.py", 100))
    got = scopes(ids, workers=2)
    assert {got[i] for i in ids if "collectives" in i} == {"collectives"}
    assert {got[i] for i in ids if "export" in i} == {"export"}
    assert got[ids[400]] == "flex.compiled"
    free = [got[i] for i in ids if got[i].startswith("chunk-")]
    assert len(free) == 500 and max(free.count(c) for c in set(free)) == 8
    units = sorted(set(got.values()), key=lambda s: queue_order(s, list(got.values()).count(s)))
    assert units[:3] == ["collectives", "export", "flex.compiled"]
    assert units[3:6] == ["chunk-0", "chunk-1", "chunk-2"]


def test_a_run_of_one_area_is_shared_among_the_workers():
    ids = _ids("conformance/areas/collectives/test_collectives.py", 40)
    got = scopes(ids, workers=2)
    assert len(set(got.values())) == 8  # units of 40 // 8 = 5 tests, none pinned
    assert scopes(ids[:2], workers=2) == {ids[0]: "chunk-0", ids[1]: "chunk-1"}


def test_an_explicit_dist_keeps_xdists_own_scheduler(tmp_path: Path):
    (tmp_path / "test_w.py").write_text(
        "import os\n"
        "def test_a(): print(os.environ['PYTEST_XDIST_WORKER'])\n"
        "def test_b(): print(os.environ['PYTEST_XDIST_WORKER'])\n")
    for extra in ([], ["--dist", "load"]):
        proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p",
                               "no:cacheprovider", "-rA", *extra, str(tmp_path)],
                              capture_output=True, text=True, timeout=240, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout[-2000:]
        assert "2 passed" in proc.stdout
        assert "gw0" in proc.stdout and "gw1" in proc.stdout  # one test on each worker


class _Node:
    """What xdist's scheduler needs of a worker: a gateway id, work sent, shut down."""

    def __init__(self, name: str) -> None:
        self.gateway = type("G", (), {"id": name})()
        self.shutting_down = False
        self.sent: list[list[int]] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent.append(list(indices))

    def shutdown(self) -> None:
        self.shutting_down = True

    def __repr__(self) -> str:
        return self.gateway.id


def test_a_second_crash_while_a_replacement_collects_keeps_the_run_going():
    """Two workers die close together: the first one's replacement is still collecting when
    the second dies, and gets its work only once its collection is in (xdist's scope
    scheduler asked it for work at once and failed the run with a KeyError)."""
    from conformance.run.schedule import make_scheduler

    class Config:  # what the schedulers read of pytest's config
        option = type("O", (), {"dist": "load", "loadscopereorder": True})()
        invocation_params = type("P", (), {"args": ("-n", "2")})()

        def getvalue(self, name: str) -> list[str]:
            assert name == "tx"
            return ["2*popen"]

    sched = make_scheduler(Config(), None)
    ids = [f"conformance/areas/topk/test_topk.py::test_{i}" for i in range(12)] + \
          [f"conformance/areas/gemm/test_gemm.py::test_{i}" for i in range(12)]
    gw0, gw1, gw2, gw3 = (_Node(f"gw{i}") for i in range(4))
    for node in (gw0, gw1):
        sched.add_node(node)
    for node in (gw0, gw1):
        sched.add_node_collection(node, ids)
    sched.schedule()
    assert gw0.sent and gw1.sent
    assert sched.remove_node(gw0) is not None  # gw0 crashed in its first test
    sched.add_node(gw2)  # its replacement starts collecting
    assert sched.remove_node(gw1) is not None  # gw1 crashes meanwhile: no KeyError
    assert not gw2.sent
    sched.add_node(gw3)
    for node in (gw2, gw3):
        sched.add_node_collection(node, ids)
        sched.schedule()
    assert gw2.sent and gw3.sent  # the rest of the run goes on
    assert not (gw2.shutting_down or gw3.shutting_down)
