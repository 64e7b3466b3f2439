"""Crash isolation: run a case (a module-level function and picklable arguments) in a warm
child Python process and report what happened as an ``Outcome``: it returned, raised, died
by a signal, exited, or hung (then its whole process group is killed).

Children are pooled per parent process and per (device, env); a child that may be poisoned
(a signal, an exit, a timeout, a device error, a failed device probe) is retired and a
replacement starts in the background. ``torch-conformance isolate`` (``foreground.py``)
reruns a case in the foreground (no child), for a debugger.
"""

from __future__ import annotations

import ast
import atexit
import contextlib
import json
import os
import pickle
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from conformance.processes._case import case_name, exception_fields, probe_device, run_case

__all__ = ["Outcome", "case_name", "foreground_command", "prestart", "probe_device",
           "run_inprocess", "run_isolated", "shutdown"]

STARTUP_TIMEOUT = 120.0
REAP_TIMEOUT = 10.0  # seconds to wait for a SIGKILLed child before reaping it in the background
TAIL_BYTES = 4096
TAG_ENV = "CONFORMANCE_ISOLATE_TAG"  # copied into the children's argv (to find them in /proc)
DEVICE_ERROR = re.compile(r"CUDA error|HIP error|XPU error|MPS error|device-side assert|"
                          r"hipError|cudaError|CUDA_ERROR|illegal memory access", re.IGNORECASE)
_POLL = 0.05


@dataclass(frozen=True)
class Outcome:
    """What one isolated case did."""

    kind: str  # "returned" | "raised" | "signal" | "exited" | "timeout" | "stalled"
    value: Any = None
    exc_type: str = ""
    exc_mro: tuple[str, ...] = ()
    message: str = ""
    where: str = ""
    traceback: str = ""
    signal: str = ""
    exit_code: int | None = None
    stderr_tail: str = ""
    seconds: float = 0.0
    retired: bool = False
    retire_reason: str = ""
    pid: int = 0

    def raised(self, *names: str) -> bool:
        """Whether the case raised one of ``names`` (``RuntimeError`` or a qualified name)."""
        if self.kind != "raised":
            return False
        return any(entry == name or ("." not in name and entry.rsplit(".", 1)[-1] == name)
                   for name in names for entry in self.exc_mro)

    def describe(self) -> str:
        """One line: what happened."""
        after = f"after {self.seconds:.2g} s"
        if self.kind == "returned":
            text = repr(self.value)
            text = text if len(text) <= 80 else text[:77] + "..."
            line = f"returned {text} {after}"
        elif self.kind == "raised":
            first = self.message.splitlines()[0] if self.message else ""
            first = first if len(first) <= 200 else first[:197] + "..."
            line = f"raised {self.exc_type}: {first} (at {self.where})"
        elif self.kind == "signal":
            line = f"died by {self.signal} {after}"
        elif self.kind == "exited":
            line = f"exited with status {self.exit_code} {after}"
        elif self.kind == "stalled":  # a torchrun rank: not ours to kill
            line = self.message or f"stalled: no reply in {self.seconds:.1f} s"
        else:
            line = f"hung: killed after {self.seconds:.1f} s (process group {self.pid})"
        if self.where == "starting the child" and self.kind != "raised":
            line += " while starting the child"
        if self.retired and self.kind == "raised":
            line += f"; child retired: {self.retire_reason}"
        return line

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (``value`` by repr when it is not JSON-able)."""
        data = asdict(self)
        data["exc_mro"] = list(self.exc_mro)
        try:
            json.dumps(self.value)
        except (TypeError, ValueError):
            data["value"] = repr(self.value)
        return data


def _reply_outcome(reply: dict[str, Any]) -> Outcome:
    fields = {k: reply[k] for k in ("kind", "value", "exc_type", "message", "where",
                                    "traceback") if k in reply}
    return Outcome(**fields, exc_mro=tuple(reply.get("exc_mro", ())))


def _death(rc: int) -> dict[str, Any]:
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return {"kind": "signal", "signal": name, "retire_reason": f"died by {name}"}
    return {"kind": "exited", "exit_code": rc, "retire_reason": f"exited with status {rc}"}


def _child_env(env: dict[str, str]) -> dict[str, str]:
    """The child's environment: the parent's, ``env``, and the parent's share of the cores
    (xdist workers split them: a child must not take them all, nor its Inductor compile
    spawn a pool of compile workers)."""
    full = {**os.environ, **env}
    torch = sys.modules.get("torch")
    if torch is not None and "OMP_NUM_THREADS" not in full:
        full["OMP_NUM_THREADS"] = str(torch.get_num_threads())
    full.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    root = str(Path(__file__).resolve().parents[2])
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [root, full.get("PYTHONPATH")]))
    full["PYTHONUNBUFFERED"] = "1"
    return full


class _Child:
    """One warm child process: its pipes, its output file and its process group."""

    def __init__(self, device: str, env: dict[str, str],
                 extra_args: tuple[str, ...] = ()) -> None:
        self.device, self.env = device, env
        self.log = tempfile.TemporaryFile(prefix="conformance-isolate-")  # noqa: SIM115
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        cmd = [sys.executable, "-u", "-m", "conformance.processes._child",
               f"--fds={p2c_r},{c2p_w}", f"--device={device}",
               f"--tag={os.environ.get(TAG_ENV, '')}", *extra_args]
        try:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                pass_fds=(p2c_r, c2p_w), start_new_session=True, env=_child_env(env))
        finally:
            os.close(p2c_r)
            os.close(c2p_w)
        self.pid = self.proc.pid
        self.outbox = Connection(p2c_w, readable=False)
        self.inbox = Connection(c2p_r, writable=False)
        self.ready = False
        self.dead = False
        with contextlib.suppress(OSError):
            self.outbox.send(list(sys.path))

    def size(self) -> int:
        return os.fstat(self.log.fileno()).st_size

    def tail(self, offset: int) -> str:
        end = self.size()
        start = max(offset, end - TAIL_BYTES)
        data = os.pread(self.log.fileno(), end - start, start) if end > start else b""
        return data.decode("utf-8", errors="replace")

    def _exited(self) -> bool:
        """Whether the child has exited (left unreaped, so its group id stays its own)."""
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) \
                is not None
        except ChildProcessError:
            return True

    def receive(self, timeout: float) -> dict[str, Any] | None:
        """The next reply; None on a timeout or when the child died (see ``self.dead``)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                if self.inbox.poll(max(0.0, min(_POLL, left))):
                    return self.inbox.recv()
            except (EOFError, OSError):
                self.dead = True
                return None
            if self._exited():
                self.dead = True
                return None
            if left <= 0:
                return None

    def kill(self) -> int:
        """SIGKILL the whole process group and reap the child, waiting at most
        ``REAP_TIMEOUT`` (a process stuck in the device driver may not die at once: a
        daemon thread reaps it later); its return code (-9 while it is still unreaped)."""
        if self.proc.returncode is None:
            if self.dead:  # a dying child: let it finish exiting, keep it unreaped
                deadline = time.monotonic() + 5.0
                while not self._exited() and time.monotonic() < deadline:
                    time.sleep(0.005)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            try:
                self.proc.wait(timeout=REAP_TIMEOUT)
            except subprocess.TimeoutExpired:
                threading.Thread(target=self.proc.wait, daemon=True,
                                 name=f"reap-{self.pid}").start()
                return -int(signal.SIGKILL)
        return self.proc.returncode

    def close(self) -> None:
        """Kill the child (if it runs) and release its pipes and output file."""
        self.kill()
        for conn in (self.inbox, self.outbox):
            with contextlib.suppress(OSError):
                conn.close()
        with contextlib.suppress(OSError):
            self.log.close()


_Key = tuple[str, tuple[tuple[str, str], ...]]
_pool: dict[_Key, list[_Child]] = {}  # idle warm children per (device, env), oldest first
_target: dict[_Key, int] = {}  # how many to keep warm per key (prestart's count; else 1)
_busy: set[_Child] = set()
_lock = threading.Lock()


def _device_trouble(outcome: Outcome, probe: str) -> str:
    if probe:
        return probe
    if outcome.kind != "raised":
        return ""
    if any(e == "torch.AcceleratorError" for e in outcome.exc_mro) or \
            DEVICE_ERROR.search(outcome.message):
        first = outcome.message.splitlines()[0] if outcome.message else ""
        return f"device error: {outcome.exc_type}: {first}"
    return ""


def _retire(key: Any, child: _Child) -> None:
    """Close a poisoned child and start its replacement in the background."""
    child.close()
    with _lock:
        idle = _pool.setdefault(key, [])
        while len(idle) < _target.get(key, 1):
            idle.append(_Child(child.device, child.env))


def run_isolated(fn: Callable[..., Any] | str, *args: Any, device: str = "cpu",
                 timeout: float = 30.0, env: dict[str, str] | None = None,
                 **kwargs: Any) -> Outcome:
    """Run ``fn(*args, **kwargs)`` in a warm child on ``device``; never raises for what the
    case does (a ValueError for a function a child cannot import)."""
    name = case_name(fn)
    env = {str(k): str(v) for k, v in (env or {}).items()}
    key = (str(device), tuple(sorted(env.items())))
    payload = pickle.dumps({"fn": name, "args": args, "kwargs": kwargs})
    with _lock:
        idle = _pool.get(key, [])
        child = idle.pop(0) if idle else None
        if child is not None and child.ready and child._exited():  # died while idle
            child.dead = True
            child.close()
            child = None
        if child is None:
            child = _Child(str(device), env)
        _busy.add(child)
    try:
        return _serve(key, child, payload, timeout)
    finally:
        with _lock:
            _busy.discard(child)


def prestart(device: str = "cpu", env: dict[str, str] | None = None, count: int = 1) -> None:
    """Start ``count`` warm children for (device, env) now, in parallel, without waiting
    for them, and keep that many warm from now on: their start-up (importing torch, a
    device context) overlaps whatever runs until they are needed. Where every error case
    retires its child (a poisoned device context), spares keep the next case from waiting
    for a start-up."""
    env = {str(k): str(v) for k, v in (env or {}).items()}
    key = (str(device), tuple(sorted(env.items())))
    with _lock:
        _target[key] = max(1, count)
        idle = _pool.setdefault(key, [])
        while len(idle) < _target[key]:
            idle.append(_Child(str(device), env))


def _serve(key: Any, child: _Child, payload: bytes, timeout: float) -> Outcome:
    if not child.ready:
        start = time.monotonic()
        hello = child.receive(STARTUP_TIMEOUT)
        if hello is None or not hello.get("ready"):
            hung = not child.dead
            rc = child.kill()
            seconds = time.monotonic() - start
            base = {"kind": "timeout", "retire_reason": "start-up timeout"} if hung \
                else _death(rc)
            outcome = Outcome(**base, where="starting the child", stderr_tail=child.tail(0),
                              seconds=seconds, retired=True, pid=child.pid)
            child.close()  # no replacement: it would most likely fail the same way
            return outcome
        child.ready = True
    offset = child.size()
    start = time.monotonic()
    try:
        child.outbox.send_bytes(payload)
    except OSError:
        child.dead = True
    reply = child.receive(timeout) if not child.dead else None
    seconds = time.monotonic() - start
    if reply is None:
        hung = not child.dead
        rc = child.kill()
        base = {"kind": "timeout", "retire_reason": f"timeout after {timeout:g} s"} if hung \
            else _death(rc)
        outcome = Outcome(**base, stderr_tail=child.tail(offset), seconds=seconds,
                          retired=True, pid=child.pid)
        _retire(key, child)
        return outcome
    if reply["kind"] == "returned":
        try:
            reply["value"] = pickle.loads(reply["value"])
        except BaseException as exc:
            reply = {**reply, **exception_fields(exc, where="unpickling the result")}
    outcome = replace(_reply_outcome(reply), stderr_tail=child.tail(offset), seconds=seconds,
                      pid=child.pid)
    trouble = _device_trouble(outcome, reply.get("probe", "")) \
        if child.device.split(":")[0] != "cpu" else ""
    if trouble:
        _retire(key, child)
        return replace(outcome, retired=True, retire_reason=trouble)
    with _lock:
        idle = _pool.setdefault(key, [])
        if len(idle) >= _target.get(key, 1):  # enough are warm: this one goes
            spare = child
        else:
            idle.append(child)
            spare = None
    if spare is not None:
        _shutdown_child(spare)
    return outcome


def _shutdown_child(child: _Child, wait: float = 1.0) -> None:
    """Ask one child to exit, then kill its process group."""
    shutdown([child], wait)


def shutdown(children: list[_Child] | None = None, wait: float = 1.0) -> None:
    """Stop every warm child: a polite "exit", a short wait, then SIGKILL to its group."""
    if children is None:
        with _lock:
            children = [*(c for idle in _pool.values() for c in idle), *_busy]
            _pool.clear()
    for child in children:
        with contextlib.suppress(OSError):
            child.outbox.send("exit")
    deadline = time.monotonic() + wait
    for child in children:
        while not child._exited() and time.monotonic() < deadline:
            time.sleep(0.01)
        child.close()  # SIGKILL now: a child marked dead first would get 5 s to exit
        child.dead = True


atexit.register(shutdown)


def foreground_command(fn: Callable[..., Any] | str, args: tuple[Any, ...] | list[Any],
                       kwargs: dict[str, Any], device: str,
                       env: dict[str, str] | None) -> str | None:
    """The shell command that reruns the case in the foreground; None when the arguments
    are not literals (or the function has no importable name)."""
    try:
        name = case_name(fn)
        text = repr((tuple(args), dict(kwargs)))
        if ast.literal_eval(text) != (tuple(args), dict(kwargs)):
            return None
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    envs = [f"--env={k}={v}" for k, v in sorted((env or {}).items())]
    return shlex.join(["torch-conformance", "isolate", f"--device={device}", *envs, name, text])


def run_inprocess(fn: Callable[..., Any] | str, *args: Any, **kwargs: Any) -> Outcome:
    """Run the case in this process: kinds "returned" and "raised" only."""
    start = time.monotonic()
    reply = run_case(case_name(fn), args, kwargs, pickled=False)
    return replace(_reply_outcome(reply), seconds=time.monotonic() - start, pid=os.getpid())
