"""Thread pools of a qualification process (conformance/harness/threads.py): on an
accelerator host each xdist worker's Inductor compile pool gets its share of the cores."""

from __future__ import annotations

import pytest

from conformance.harness import threads

pytestmark = pytest.mark.harness_only


def test_inductor_compile_pool_is_shared_among_workers_on_a_gpu_host(monkeypatch):
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)  # configure sets it
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(threads, "limit_oracle_blas", lambda n: n)
    done = threads.configure("cuda", 8)
    assert done["inductor_compile"] == 2
    assert threads.os.environ["TORCHINDUCTOR_COMPILE_THREADS"] == "2"


def test_a_users_own_setting_is_kept(monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "5")
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "limit_oracle_blas", lambda n: n)
    assert threads.configure("cuda", 8)["inductor_compile"] == 5
