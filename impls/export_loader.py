"""Load a saved export artefact in a fresh Python process and serve calls to it over a pipe.

A ``.pt2`` (``torch.export.save``) or an AOTInductor package is what a deployment ships: it
must run in a process that shares nothing with the one that built it (no module-level state,
no registered ops or kernels, no caches). ``Served(env)`` starts ``python -m
impls.export_loader`` (a new interpreter, not a fork); ``load(kind, path)`` has it load the
artefact, and calls are answered over a pipe: tensors in (plain pickle, no shared memory),
the outputs back, or the first line of the exception it raised (re-raised here as
``Refused``, so the area sees a refusal). If the server dies (a signal, an exit) the call
raises ``ServerDied`` naming the signal. The server is stopped (a bounded wait, then
SIGKILL of its process group) when the ``Served`` is garbage-collected or at exit.
``fresh(env)`` hands out a spare server started at the previous call (never used before).
``env``: variables set (a value) or removed (None) in the server's environment, e.g.
``AOTI_RUNTIME_CHECK_INPUTS``, which an AOTInductor package reads once per process. The
TF32 settings of the starting process (cuDNN's and matmul's allow_tf32) are set in the
server too: the area pins them (off for the strict rule, on for test_tf32.py).

The server imports torch and this module only; it loads only the file it is given, which
the caller wrote itself.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

KINDS = ("export.saved", "aoti")
CALL_TIMEOUT = 600.0
STOP_WAIT = 2.0
TF32_ENV = "CONFORMANCE_EXPORT_TF32"
_ROOT = str(Path(__file__).resolve().parents[1])


class Refused(RuntimeError):
    """The server raised (loading, or running the program): its exception's first line."""


class ServerDied(RuntimeError):
    """The server process ended (a signal or an exit) while loading or running."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def _stop(proc: subprocess.Popen, outbox: Connection, inbox: Connection, log: Any) -> None:
    """Ask the server to exit, wait a bounded time, then kill its process group."""
    with contextlib.suppress(Exception):
        outbox.send_bytes(pickle.dumps(("exit", None)))
    try:
        proc.wait(timeout=STOP_WAIT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.wait(timeout=STOP_WAIT)
    for c in (outbox, inbox, log):
        with contextlib.suppress(Exception):
            c.close()


class Served:
    """A saved program loaded and run by a fresh Python process (see the module docstring).

    Started before the artefact exists (``start``, the interpreter and torch load while the
    caller builds), then told what to load (``load``)."""

    def __init__(self, env: dict[str, str | None] | None = None) -> None:
        full = {**os.environ, "PYTHONUNBUFFERED": "1"}
        for key, value in (env or {}).items():
            if value is None:
                full.pop(key, None)
            else:
                full[key] = value
        full["PYTHONPATH"] = os.pathsep.join(filter(None, [_ROOT, full.get("PYTHONPATH")]))
        tf32 = _tf32_now()  # the TF32 settings in force here hold there too
        if tf32 is not None:
            full[TF32_ENV] = tf32
        self.env = {k: full.get(k) for k in (env or {})}
        self._log = tempfile.TemporaryFile(prefix="conformance-export-server-")  # noqa: SIM115
        p2c_r, p2c_w = os.pipe()
        c2p_r, c2p_w = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-u", "-m", "impls.export_loader", f"{p2c_r},{c2p_w}"],
                stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                pass_fds=(p2c_r, c2p_w), start_new_session=True, env=full, cwd=_ROOT)
        finally:
            os.close(p2c_r)
            os.close(c2p_w)
        self.pid = self._proc.pid
        self._out = Connection(p2c_w, readable=False)
        self._in = Connection(c2p_r, writable=False)
        self._finalizer = weakref.finalize(self, _stop, self._proc, self._out, self._in,
                                           self._log)

    def _ask(self, what: str, payload: Any) -> Any:
        try:
            self._out.send_bytes(pickle.dumps((what, payload)))
            if not self._in.poll(CALL_TIMEOUT):
                raise ServerDied(f"the server (pid {self.pid}) did not answer in "
                                 f"{CALL_TIMEOUT:g} s")
            reply = pickle.loads(self._in.recv_bytes())
        except (EOFError, OSError, BrokenPipeError):
            raise ServerDied(self._death()) from None
        if reply[0] == "error":
            raise Refused(reply[1])
        return reply[1]

    def _death(self) -> str:
        try:
            rc = self._proc.wait(timeout=STOP_WAIT)
        except subprocess.TimeoutExpired:
            return f"the server (pid {self.pid}) closed its pipe and still runs"
        if rc < 0:
            name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ \
                else f"signal {-rc}"
            what = f"died by {name}"
        else:
            what = f"exited with status {rc}"
        self._log.seek(0)
        tail = self._log.read()[-600:].decode(errors="replace").strip().replace("\n", " | ")
        return f"the server process (pid {self.pid}) {what}" + (f": {tail}" if tail else "")

    def load(self, kind: str, path: str | Path) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        self._ask("load", (kind, str(path)))

    def __call__(self, *args: Any) -> Any:
        return self._ask("call", args)

    def close(self) -> None:
        self._finalizer()

    @property
    def alive(self) -> bool:
        return self._proc.poll() is None


# A spare server per environment, started when the previous one is handed out: the next
# artefact gets a process that has never loaded anything (as fresh as a new one) whose
# interpreter and torch already loaded, off the round trip's critical path (~3 s each).
_SPARES: dict[tuple, Served] = {}


def _tf32_now() -> str | None:
    if "torch" not in sys.modules:
        return None
    import torch

    return "1" if torch.backends.cudnn.allow_tf32 else "0"


def fresh(env: dict[str, str | None] | None = None) -> Served:
    """A server that has loaded nothing yet, with ``env`` and this process's TF32 settings."""
    key = (tuple(sorted((env or {}).items())), _tf32_now())
    server = _SPARES.pop(key, None)
    if server is None or not server.alive:
        server = Served(env)
    _SPARES[key] = Served(env)
    return server


# ---- the server side ------------------------------------------------------------------------

def _load(kind: str, path: str) -> Any:
    import torch

    if kind == "export.saved":
        return torch.export.load(path).module()
    return torch._inductor.aoti_load_package(path)


def _math_modes(tf32: str | None) -> None:
    """The TF32 settings of the process that started the server (``TF32_ENV``: "1" on,
    "0" off), so that a served program computes as the building process would have."""
    import torch

    if tf32 in ("0", "1"):
        on = tf32 == "1"
        torch.backends.cuda.matmul.allow_tf32 = on
        torch.backends.cudnn.allow_tf32 = on
        torch.set_float32_matmul_precision("high" if on else "highest")


def serve(inbox: Connection, outbox: Connection) -> None:
    import torch

    _math_modes(os.environ.get(TF32_ENV))
    # what loading needs, imported while the server waits for work (a spare's head start)
    for name in ("torch.export", "torch._export.serde.serialize", "torch._inductor.package"):
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    program = None
    while True:
        try:
            what, payload = pickle.loads(inbox.recv_bytes())
        except EOFError:
            return
        if what == "exit":
            return
        try:
            if what == "load":
                program = _load(*payload)
                reply: Any = None
            else:
                if program is None:
                    raise RuntimeError("no program loaded")
                with torch.no_grad():
                    reply = program(*payload)
                if isinstance(reply, list):
                    reply = tuple(reply)
            data = pickle.dumps(("ok", reply))
        except Exception as exc:
            data = pickle.dumps(("error", _first_line(exc)))
        outbox.send_bytes(data)


if __name__ == "__main__":
    r, w = (int(fd) for fd in sys.argv[1].split(","))
    serve(Connection(r, writable=False), Connection(w, readable=False))
