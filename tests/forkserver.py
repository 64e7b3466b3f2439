"""A fork server for the project tests' child suite runs (``tests/conftest.py::run_suite``).

Every child run used to start Python and import torch, numpy, scipy, hypothesis, pytest and
the suite's plugin again: about 4.5 s of a 5-6 s run on this project's 2-core machines, paid
hundreds of times by the kill tables. The server imports those once (per xdist worker, on
first use), then forks a child per run: the child takes the run's working directory,
environment, ``sys.path`` and ``sys.argv``, writes its output to two files, and runs
``python -m pytest`` as a fresh process would from there (its own process group; SIGKILL
when the server dies; the server dies with the test process).

A run is forked only where the difference cannot show: the same interpreter, and the
environment the server started with (only ``PYTHONPATH`` and ``PYTEST_CURRENT_TEST`` may
differ: an import already done may have read anything else). Every other run, and every run
with ``CONFORMANCE_NO_FORKSERVER=1``, starts a process as before.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

OFF_ENV = "CONFORMANCE_NO_FORKSERVER"
MAY_DIFFER = frozenset({"PYTHONPATH", "PYTEST_CURRENT_TEST"})
PRELOAD = ("torch", "numpy", "scipy.special", "scipy.stats", "hypothesis", "pytest",
           "_pytest.pytester", "xdist", "xdist.plugin", "filelock", "yaml",
           "conformance.plugin")
ROOT = Path(__file__).resolve().parents[1]


def _same(a: dict[str, str], b: dict[str, str]) -> bool:
    keys = (set(a) | set(b)) - MAY_DIFFER
    return all(a.get(k) == b.get(k) for k in keys)


class ForkServer:
    """The client side: one server process, one run at a time."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = dict(env)
        self.lock = threading.Lock()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.forkserver"], cwd=ROOT, env=self.env, text=True,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.proc.stdout is not None
        self.ready = self.proc.stdout.readline().strip() == "ready"

    def serves(self, env: dict[str, str]) -> bool:
        return self.ready and self.proc.poll() is None and _same(env, self.env)

    def run(self, args: list[str], cwd: Path, env: dict[str, str],
            timeout: float) -> subprocess.CompletedProcess:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self.lock, tempfile.TemporaryDirectory(prefix="conformance-fork-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            self.proc.stdin.write(json.dumps({"args": args, "cwd": str(cwd), "env": env,
                                              "stdout": str(out), "stderr": str(err),
                                              "timeout": timeout}) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            if not line:
                self.ready = False
                raise RuntimeError("the fork server died")
            reply = json.loads(line)
            stdout = out.read_text(errors="replace") if out.exists() else ""
            stderr = err.read_text(errors="replace") if err.exists() else ""
        cmd = [sys.executable, "-m", "pytest", *args]
        if reply["timeout"]:
            raise subprocess.TimeoutExpired(cmd, timeout, output=stdout, stderr=stderr)
        return subprocess.CompletedProcess(cmd, reply["returncode"], stdout, stderr)

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


_SERVER: ForkServer | None = None


def run_pytest(args: list[str], cwd: Path, env: dict[str, str],
               timeout: float) -> subprocess.CompletedProcess:
    """``python -m pytest ARGS`` in ``cwd`` with ``env``: forked where that cannot differ
    from a new process, otherwise a new process."""
    global _SERVER
    if os.environ.get(OFF_ENV) != "1" and sys.platform.startswith("linux"):
        if _SERVER is None:
            import atexit

            _SERVER = ForkServer(env)
            atexit.register(_SERVER.close)
        if _SERVER.serves(env):
            return _SERVER.run(args, cwd, env, timeout)
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


# ---- the server -----------------------------------------------------------------------------

def _child(req: dict, base_path: list[str]) -> None:  # pragma: no cover - the forked child
    os.setpgid(0, 0)
    from conformance.harness.lifetime import die_with_parent

    die_with_parent(exit_if_orphaned=False)
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY),
                            (1, req["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, req["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)):
        new = os.open(path, flags, 0o644)
        os.dup2(new, fd)
        os.close(new)
    sys.stdin = open(os.devnull)  # noqa: SIM115 - the protocol's reader may hold read-ahead
    # a new Python process's dispositions (it ignores SIGPIPE)
    for sig, how in ((signal.SIGINT, signal.default_int_handler),
                     (signal.SIGTERM, signal.SIG_DFL), (signal.SIGPIPE, signal.SIG_IGN)):
        signal.signal(sig, how)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    extra = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [req["cwd"], *extra, *base_path]
    importlib.invalidate_caches()
    for name in [m for m in sys.modules if m == "tests" or m.startswith("tests.")]:
        del sys.modules[name]  # the server's own package: a new process has not imported it
    import runpy

    sys.argv = ["-m", *req["args"]]  # runpy puts pytest/__main__.py's path first
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)  # raises SystemExit
    sys.exit(0)


def _wait(pid: int, timeout: float) -> tuple[int, bool]:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            return os.waitstatus_to_exitcode(status), True
        time.sleep(0.02)


def serve() -> None:
    from conformance.harness.lifetime import die_with_parent

    die_with_parent()
    own = {p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    base_path = [p for p in sys.path[1:] if p not in own]
    for name in PRELOAD:
        importlib.import_module(name)
    print("ready", flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(req, base_path)  # exits with pytest's status
        returncode, timed_out = _wait(pid, float(req["timeout"]))
        print(json.dumps({"returncode": returncode, "timeout": timed_out}), flush=True)


if __name__ == "__main__":
    serve()
