"""Demo tests of the isolated fixture, run by tests/test_isolate.py in a child pytest: each
crasher is one test asserting its exact outcome, between ordinary passing tests."""

import os
import sys

import pytest

pytestmark = pytest.mark.area("demo")

TAG = os.environ.get("CONFORMANCE_ISOLATE_TAG", "untagged")


def test_ordinary_before():
    assert sum(range(4)) == 6


def test_returns(isolated, record):
    first = isolated("planted.crashers:add", 1, b=2)
    second = isolated("planted.crashers:pid")
    assert (first.kind, first.value) == ("returned", 3), isolated.explain(first)
    assert second.value == second.pid == first.pid != os.getpid()


def test_raises(isolated, record):
    out = isolated("planted.crashers:index_error", 3)
    assert out.raised("IndexError") and out.message == "list index out of range", \
        isolated.explain(out)
    assert not out.retired


def test_abort(isolated, record):
    out = isolated("planted.crashers:abort")
    assert (out.kind, out.signal, out.retired) == ("signal", "SIGABRT", True), \
        isolated.explain(out)
    assert "about to abort" in out.stderr_tail
    assert "rerun in the foreground: torch-conformance isolate --device=cpu " \
           "planted.crashers:abort '((), {})'" in isolated.explain(out)


def test_segfault(isolated):
    out = isolated("planted.crashers:segfault")
    assert (out.kind, out.signal) == ("signal", "SIGSEGV"), isolated.explain(out)


def test_exit3(isolated):
    out = isolated("planted.crashers:exit3")
    assert (out.kind, out.exit_code) == ("exited", 3), isolated.explain(out)


@pytest.mark.isolated(timeout=2)
def test_hang_with_grandchild(isolated, tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    out = isolated("planted.crashers:grandchild_then_hang", str(pid_file), f"grandchild-{TAG}")
    assert out.kind == "timeout" and out.retired and out.seconds >= 2, isolated.explain(out)
    assert out.describe().startswith("hung: killed after 2.")
    assert pid_file.read_text().strip().isdigit()


def test_assert_async(isolated):
    out = isolated("planted.crashers:failed_assert_async")
    assert out.exc_type == "builtins.RuntimeError", isolated.explain(out)
    assert "nonzero" in out.message


def test_unpicklable_exception(isolated):
    out = isolated("planted.crashers:raise_unpicklable")
    assert (out.exc_type, out.message) == ("planted.crashers.Unpicklable",
                                           "planted: holds a lock"), isolated.explain(out)


def test_unpicklable_result(isolated):
    out = isolated("planted.crashers:return_unpicklable")
    assert out.raised("TypeError") and out.where == "returning the result", \
        isolated.explain(out)


@pytest.mark.isolated(env={"DEMO_ISOLATE_ENV": "on"})
def test_noisy_and_env(isolated):
    out = isolated("planted.crashers:noisy", "hello")
    assert out.stderr_tail == "out: hello\nerr: hello\n", isolated.explain(out)
    assert isolated("planted.crashers:getenv", "DEMO_ISOLATE_ENV").value == "on"


def test_ordinary_after(isolated):
    assert isolated("planted.crashers:tensor_sum", [1.0, 2.0]).value == 3.0
    assert sys.platform
