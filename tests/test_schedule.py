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
