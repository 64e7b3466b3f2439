"""conformance.processes.isolate: every Outcome kind, the warm pool, the CLI, and the isolated
fixture end to end in a child pytest (with no process left behind)."""

from __future__ import annotations

import ast
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from conformance.processes import isolate
from conformance.processes.isolate import Outcome, foreground_command, run_isolated, shutdown
from conformance.run.isolation import Isolated
from tests.conftest import TESTS
from tests.planted import crashers

pytestmark = pytest.mark.harness_only
ROOT = TESTS.parent
DEMO = TESTS / "demo"
NAME = "tests.planted.crashers"


def _gone(pid: int, wait: float = 5.0) -> bool:
    """Whether ``pid`` no longer runs (absent, or a zombie waiting to be reaped)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            os.kill(pid, 0)
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            threads = len(list(Path(f"/proc/{pid}/task").iterdir()))
        except (ProcessLookupError, FileNotFoundError):
            return True
        if state in ("Z", "X") and threads <= 1:
            return True  # a zombie leader whose threads are still exiting is not gone yet
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


def _tagged(token: str) -> list[str]:
    """Command lines of the processes that mention ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if token in cmdline:
            found.append(f"{entry.name}: {cmdline}")
    return found


def test_returned_and_warm_reuse():
    out = run_isolated(crashers.add, 1, b=2)
    assert (out.kind, out.value, out.retired) == ("returned", 3, False)
    assert out.pid != os.getpid() and out.describe().startswith("returned 3 after ")
    again = run_isolated(crashers.pid)
    assert again.value == again.pid == out.pid  # the same warm child
    assert run_isolated(f"{NAME}:tensor_sum", [1.5, 2.5]).value == 4.0


def test_raised_with_exact_fields():
    out = run_isolated(crashers.index_error, 3)
    assert out.kind == "raised" and not out.retired
    assert out.exc_type == "builtins.IndexError"
    assert out.exc_mro == ("builtins.IndexError", "builtins.LookupError",
                           "builtins.Exception", "builtins.BaseException")
    assert out.message == "list index out of range"
    assert out.where.endswith("crashers.py:38 in index_error"), out.where
    assert "IndexError: list index out of range" in out.traceback
    assert out.raised("IndexError") and out.raised("builtins.LookupError")
    assert not out.raised("KeyError") and not out.raised("builtins.Index")
    assert out.describe() == f"raised builtins.IndexError: list index out of range " \
                             f"(at {out.where})"
    assert not run_isolated(crashers.add, 1).raised("Exception")


def test_abort_retires_the_child():
    warm = run_isolated(crashers.pid).value
    out = run_isolated(crashers.abort)
    assert (out.kind, out.signal, out.pid) == ("signal", "SIGABRT", warm)
    assert out.retired and out.retire_reason == "died by SIGABRT"
    # faulthandler (in the child) adds the Python stack of the abort
    assert out.stderr_tail.startswith("about to abort\n") and \
        "Fatal Python error: Aborted" in out.stderr_tail and "in abort" in out.stderr_tail
    assert out.describe().startswith("died by SIGABRT after ")
    assert _gone(warm)
    assert run_isolated(crashers.pid).value != warm  # a fresh child


def test_segfault_and_exits():
    out = run_isolated(crashers.segfault)
    assert (out.kind, out.signal, out.exit_code, out.retired) == ("signal", "SIGSEGV", None,
                                                                  True)
    out = run_isolated(crashers.exit3)
    assert (out.kind, out.exit_code, out.signal) == ("exited", 3, "")
    assert out.describe().startswith("exited with status 3 after ")
    assert run_isolated(crashers.sys_exit, 5).exit_code == 5


def test_timeout_kills_the_process_group(tmp_path):
    pid_file, marker = tmp_path / "grandchild.pid", f"grandchild-{uuid.uuid4().hex}"
    out = run_isolated(crashers.grandchild_then_hang, str(pid_file), marker, timeout=1.5)
    assert out.kind == "timeout" and out.retired
    assert 1.5 <= out.seconds < 10
    assert out.describe() == f"hung: killed after {out.seconds:.1f} s (process group " \
                             f"{out.pid})"
    assert _gone(out.pid) and _gone(int(pid_file.read_text()))
    assert not _tagged(marker)
    out = run_isolated(crashers.spin, timeout=0.5)
    assert out.kind == "timeout" and out.seconds >= 0.5


def test_cpu_assert_async_raises():
    out = run_isolated(crashers.failed_assert_async)
    assert out.kind == "raised" and out.exc_type == "builtins.RuntimeError"
    assert "nonzero" in out.message and not out.retired


def test_unpicklable_exception_and_result():
    out = run_isolated(crashers.raise_unpicklable)
    assert (out.kind, out.exc_type, out.message) == (
        "raised", f"{NAME}.Unpicklable", "planted: holds a lock")
    assert "builtins.Exception" in out.exc_mro and out.where.endswith("in raise_unpicklable")
    out = run_isolated(crashers.return_unpicklable)
    assert (out.kind, out.exc_type, out.where) == ("raised", "builtins.TypeError",
                                                   "returning the result")
    assert "pickle" in out.message


def test_stderr_tail_is_the_cases_own():
    out = run_isolated(crashers.noisy, "hello")
    assert (out.value, out.stderr_tail) == ("hello", "out: hello\nerr: hello\n")
    assert run_isolated(crashers.noisy, "again").stderr_tail == "out: again\nerr: again\n"
    assert run_isolated(crashers.add, 1).stderr_tail == ""
    long = run_isolated(crashers.noisy, "x" * 10_000).stderr_tail
    assert len(long.encode()) == isolate.TAIL_BYTES and long.endswith("x\n")


def test_env_reaches_its_own_pool():
    plain = run_isolated(crashers.getenv, "ISOLATE_TEST_FLAG")
    flagged = run_isolated(crashers.getenv, "ISOLATE_TEST_FLAG", env={"ISOLATE_TEST_FLAG": "1"})
    assert (plain.value, flagged.value) == (None, "1")
    assert plain.pid != flagged.pid


def test_device_errors_retire_on_a_non_cpu_device():
    """"meta" stands in for an accelerator: the retire rules apply to any non-CPU device."""
    assert not run_isolated(crashers.device_error).retired  # on the CPU: no retirement
    plain = run_isolated(crashers.index_error, 1, device="meta")
    assert plain.kind == "raised" and not plain.retired  # the probe passed
    out = run_isolated(crashers.device_error, device="meta")
    assert out.pid == plain.pid and out.retired
    assert out.retire_reason == "device error: builtins.RuntimeError: CUDA error: an illegal " \
                                "memory access was encountered"
    poisoned = run_isolated(crashers.poison_device, device="meta")
    assert poisoned.exc_type == "builtins.ValueError" and poisoned.retired
    assert poisoned.retire_reason == "device probe on meta failed: RuntimeError: planted: " \
                                     "the context is gone"
    assert poisoned.describe().endswith(f"; child retired: {poisoned.retire_reason}")
    assert run_isolated(crashers.pid, device="meta").value != poisoned.pid


def test_a_child_that_dies_starting():
    out = run_isolated(crashers.add, 1, device="nosuchdevice:0")
    assert (out.kind, out.exit_code, out.where) == ("exited", 1, "starting the child")
    assert "Traceback" in out.stderr_tail and "nosuchdevice" in out.stderr_tail
    assert out.describe().endswith("while starting the child")


def test_cases_must_be_importable():
    with pytest.raises(ValueError, match="lambda"):
        run_isolated(lambda: 1)

    def local() -> None:
        pass

    with pytest.raises(ValueError, match="local"):
        run_isolated(local)
    with pytest.raises(ValueError, match="module:qualname"):
        run_isolated("no_colon")
    out = run_isolated("tests.planted.crashers:no_such_case")
    assert out.raised("AttributeError")


def test_to_json():
    data = run_isolated(crashers.return_unpicklable).to_json()
    assert data["kind"] == "raised" and data["exc_mro"][0] == "builtins.TypeError"
    assert json.loads(json.dumps(data)) == data
    assert Outcome("returned", value=object()).to_json()["value"].startswith("<object")


def test_foreground_command_round_trip():
    cmd = foreground_command(crashers.add, (1,), {"b": 2}, "cuda:0",
                             {"CUDA_LAUNCH_BLOCKING": "1"})
    words = shlex.split(cmd)
    assert words[:5] == ["torch-conformance", "isolate", "--device=cuda:0",
                         "--env=CUDA_LAUNCH_BLOCKING=1", f"{NAME}:add"]
    assert ast.literal_eval(words[5]) == ((1,), {"b": 2})
    assert foreground_command(crashers.add, (object(),), {}, "cpu", None) is None
    assert foreground_command(crashers.add, (float("nan"),), {}, "cpu", None) is None
    assert foreground_command(lambda: 0, (), {}, "cpu", None) is None


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance.cli", "isolate", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


def test_cli_foreground_runs_in_this_process():
    cmd = shlex.split(foreground_command(crashers.pid, (), {}, "cpu", {"K": "v"}))
    assert cmd[:2] == ["torch-conformance", "isolate"]
    proc = subprocess.Popen([sys.executable, "-m", "conformance.cli", *cmd[1:]], cwd=ROOT,
                            stdout=subprocess.PIPE,
                            text=True)
    stdout, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0
    assert stdout.splitlines()[-1] == f"value: {proc.pid}"  # no child: the CLI's own pid
    run = _cli(f"{NAME}:getenv", "(('K',), {})", "--env=K=v")
    assert run.returncode == 0 and run.stdout.splitlines()[-1] == "value: 'v'"
    run = _cli(f"{NAME}:index_error", "((2,), {})")
    assert run.returncode == 1 and "raised builtins.IndexError" in run.stdout
    assert "Traceback" in run.stderr


def test_cli_isolated_prints_the_outcome():
    run = _cli("--isolated", f"{NAME}:abort")
    assert run.returncode == 1, run.stderr
    assert run.stdout.splitlines()[-1].startswith("died by SIGABRT after ")
    data = json.loads(run.stdout[:run.stdout.rindex("}") + 1])
    assert (data["kind"], data["signal"]) == ("signal", "SIGABRT")


@pytest.mark.parametrize("args", [
    ["no_colon"], [f"{NAME}:add", "((1,), {"], [f"{NAME}:add", "[1, 2]"],
    ["tests.planted.no_such_module:f"], [f"{NAME}:add", "--env=NOEQUALS"], ["--bogus", "x:y"],
    [],
])
def test_cli_bad_usage(args):
    run = _cli(*args)
    assert run.returncode == 4
    assert len(run.stderr.splitlines()) == 1 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.startswith("torch-conformance isolate: error: ")


def test_shutdown_stops_every_child():
    pids = {run_isolated(crashers.pid).value, run_isolated(crashers.pid, device="meta").value}
    shutdown()
    assert all(_gone(p) for p in pids)
    assert run_isolated(crashers.pid).value not in pids  # the pool starts afresh


def test_a_child_killed_while_idle_is_replaced():
    idle = run_isolated(crashers.pid).value
    os.kill(idle, signal.SIGKILL)
    assert _gone(idle)
    out = run_isolated(crashers.pid)
    assert out.kind == "returned" and out.value != idle, (out, idle)


def test_fixture_helper_modes():
    notes: list = []
    child = Isolated("cpu", "child", 30.0, {"K": "v"}, notes.append)
    out = child(crashers.abort)
    assert notes[-1][0]["foreground"] == child.command(out) == \
        f"torch-conformance isolate --device=cpu --env=K=v {NAME}:abort '((), {{}})'"
    lines = child.explain().splitlines()
    assert lines[0] == out.describe() and lines[1].startswith("stderr (last ")
    assert lines[2] == "  about to abort" and "  Fatal Python error: Aborted" in lines
    assert lines[-1] == f"rerun in the foreground: {child.command(out)}"
    here = Isolated("cpu", "inprocess", 30.0, {}, notes.append)
    first, second = here(crashers.pid), here(crashers.index_error, 2)
    assert (first.kind, first.value, first.pid) == ("returned", os.getpid(), os.getpid())
    assert second.raised("IndexError") and len(notes[-1]) == 2
    assert here.explain(first).endswith(f"{NAME}:pid '((), {{}})'")


@pytest.mark.parametrize("workers", ["0", "2"])
def test_isolated_fixture_in_a_session(suite, monkeypatch, workers):
    tag = f"isolate-session-{uuid.uuid4().hex}"
    monkeypatch.setenv(isolate.TAG_ENV, tag)
    run = suite(str(DEMO / "demo_isolated.py"), "--device=cpu", "-p", "no:randomly",
                "-n", workers, f"--device-matrix={DEMO / 'demo_isolated_matrix.yaml'}")
    assert run.returncode == 0, run.output[-4000:]
    assert run.report["summary"]["passed"] == 12, run.report["summary"]
    assert {r["outcome"] for r in run.report["results"]} == {"passed"}
    assert not _tagged(tag)  # neither a child nor the grandchild survived
    notes = {r["nodeid"].split("::")[-1]: r["notes"] for r in run.report["results"]}
    (abort,) = notes["test_abort"]["isolated"]
    assert (abort["kind"], abort["signal"], abort["retired"]) == ("signal", "SIGABRT", True)
    assert abort["foreground"] == "torch-conformance isolate --device=cpu " \
                                  "planted.crashers:abort '((), {})'"
    assert notes["test_returns"]["isolated"][0]["value"] == 3


def test_prestarted_spares_take_over_after_each_crash():
    """prestart(count=2): every crash retires its child, the next case takes a spare
    that was started beforehand, and the pool refills to two."""
    from conformance.processes import isolate

    isolate.shutdown()
    isolate.prestart("cpu", {"SPARES": "2"}, count=2)
    run_isolated(crashers.pid, env={"SPARES": "2"})  # both warm by now
    pids = set()
    for _ in range(3):
        out = run_isolated(crashers.abort, env={"SPARES": "2"})
        assert out.kind == "signal" and out.pid not in pids
        pids.add(out.pid)
        fast = run_isolated(crashers.pid, env={"SPARES": "2"})
        assert fast.kind == "returned"
    key = ("cpu", (("SPARES", "2"),))
    assert len(isolate._pool[key]) == 2
    isolate.shutdown()
