"""Planted faults: a vendor ``topk`` module that hangs at start-up.

Use with ``pytest --impl topk=tests.planted.blind_startup_hangs:topk`` and set
``BLIND_STARTUP_HANG`` to one of the kind names below (empty / unset: no hang,
the module is a correct ``torch.topk`` wrapper).  Every hang is bounded by
``HANG_S`` (90 s; ``BLIND_STARTUP_HANG_S`` may only lower it), after which the
module gives up waiting and finishes normally; child processes end within
``HANG_S`` too.  Nothing beyond localhost and ``tempfile`` is touched.

Kinds (env value: imitated failure; where the hang runs; when):

busy_loop: driver polls a device "ready" register that never flips; Python code; import
sleep: init retries "device busy" with a long back-off; C code that releases the GIL
    (time.sleep); import
event_wait: waits for a background driver thread's "initialised" event that never comes; C
    code that releases the GIL (lock wait); import
lock_twice: init takes a non-reentrant Lock, then a helper takes it again (self-deadlock); C
    code that releases the GIL (lock wait); import
thread_join: joins a non-daemon warm-up thread stuck waiting for a device; C code that
    releases the GIL (join/lock wait); import
queue_get: waits for a reply from a worker pool that never answers; C code that releases the
    GIL (lock wait); import
import_lock: starts a thread that imports this (half-initialised) module, then joins it:
    import-lock deadlock; C code that releases the GIL (module lock / join); import
socket_accept: rendezvous server waits for peers (torch.distributed-style store) that never
    connect; C code that releases the GIL (accept on localhost); import
socketpair_recv: waits for a handshake from a daemon on a connected socket; C code that
    releases the GIL (recv); import
subprocess_wait: waits for a helper child process (compiler / device probe) that never
    exits; C code that releases the GIL (waitpid); import
child_pipe_read: reads the banner of a spawned helper daemon that never writes; C code that
    releases the GIL (read on pipe); import
c_sleep_gil: C extension blocks in a driver call without releasing the GIL; C code holding
    the GIL; import
c_sleep_gil_sigblock: same, but the driver masks all signals while blocked (SIGALRM cannot
    interrupt it); C code holding the GIL, signals blocked; import
c_sleep_nogil: C extension blocks in a driver call after releasing the GIL; C code that
    releases the GIL; import
attr_dtypes: reading ``topk.conformance_dtypes`` lazily enumerates devices and waits on an
    event; C code that releases the GIL (lock wait); attribute read
attr_features: reading ``topk.conformance_features`` spins polling a capability flag; Python
    code; attribute read
attr_name: reading ``topk.conformance_name`` calls into a C library that blocks holding the
    GIL; C code holding the GIL; attribute read

"Python code" hangs keep the GIL only between eval-loop switch points (other
threads still run); GIL_HELD lists the kinds whose hang holds the GIL in C.
Attribute kinds hang only on the first read (a later read returns at once).
"""

import contextlib
import ctypes
import importlib
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time

import torch

HANG_S = 90
with contextlib.suppress(ValueError):
    HANG_S = min(HANG_S, float(os.environ.get("BLIND_STARTUP_HANG_S", HANG_S)))

KINDS = {
    "busy_loop": "import",
    "sleep": "import",
    "event_wait": "import",
    "lock_twice": "import",
    "thread_join": "import",
    "queue_get": "import",
    "import_lock": "import",
    "socket_accept": "import",
    "socketpair_recv": "import",
    "subprocess_wait": "import",
    "child_pipe_read": "import",
    "c_sleep_gil": "import",
    "c_sleep_gil_sigblock": "import",
    "c_sleep_nogil": "import",
    "attr_dtypes": "attribute",
    "attr_features": "attribute",
    "attr_name": "attribute",
}

GIL_HELD = {"c_sleep_gil", "c_sleep_gil_sigblock", "attr_name"}

_KIND = os.environ.get("BLIND_STARTUP_HANG", "").strip()
if _KIND and _KIND not in KINDS:
    raise ValueError(
        f"BLIND_STARTUP_HANG={_KIND!r} is not one of {sorted(KINDS)}")


# ---------------------------------------------------------------- primitives

def _deadline():
    return time.monotonic() + HANG_S


def _busy_loop():
    end = _deadline()
    ready = False
    while not ready:                      # "device register" never flips
        if time.monotonic() >= end:
            break
        ready = sum(range(100)) < 0


def _event_wait():
    threading.Event().wait(HANG_S)


def _c_sleep(dll_cls):
    libc = dll_cls(None)
    fn = libc.sleep
    fn.argtypes = [ctypes.c_uint]
    fn.restype = ctypes.c_uint
    end = _deadline()
    while True:
        rem = int(end - time.monotonic())
        if rem <= 0:
            break
        fn(rem)                           # EINTR-retrying driver loop


def _c_sleep_gil_sigblock():
    if not hasattr(signal, "pthread_sigmask"):
        _c_sleep(ctypes.PyDLL)
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        _c_sleep(ctypes.PyDLL)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _lock_twice():
    lock = threading.Lock()
    with lock:
        # helper "re-enters" init; a plain Lock is not reentrant
        if lock.acquire(timeout=HANG_S):
            lock.release()


def _thread_join():
    device_ready = threading.Event()

    def warm_up():
        device_ready.wait(HANG_S)

    t = threading.Thread(target=warm_up, name="vendor-warmup", daemon=False)
    t.start()
    t.join()                              # ends when warm_up gives up


def _queue_get():
    requests, replies = queue.Queue(), queue.Queue()

    def worker():
        requests.get(timeout=HANG_S)      # waits for a request nobody sends
        replies.put("ok")

    t = threading.Thread(target=worker, name="vendor-pool", daemon=True)
    t.start()
    with contextlib.suppress(queue.Empty):
        replies.get(timeout=HANG_S)


def _import_lock():
    me = sys.modules.get(__name__)
    if me is None or getattr(me, "__dict__", None) is not globals():
        # Not importable under our own name: importing would re-execute us.
        _thread_join()
        return

    def lazy_loader():
        with contextlib.suppress(Exception):
            importlib.import_module(__name__)   # blocks on our module lock

    t = threading.Thread(target=lazy_loader, name="vendor-lazy-import",
                         daemon=True)
    t.start()
    t.join(HANG_S)          # after we give up and finish, the thread unblocks


def _socket_accept():
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        srv.settimeout(HANG_S)
        try:
            conn, _ = srv.accept()
            conn.close()
        except (TimeoutError, OSError):
            pass
    finally:
        srv.close()


def _socketpair_recv():
    a, b = socket.socketpair()
    try:
        a.settimeout(HANG_S)
        with contextlib.suppress(socket.timeout, OSError):
            a.recv(1)
    finally:
        a.close()
        b.close()


def _child_seconds():
    return str(max(1, int(HANG_S)))


def _subprocess_wait():
    with contextlib.suppress(subprocess.TimeoutExpired, OSError):
        subprocess.run(["sleep", _child_seconds()], timeout=HANG_S,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def _child_pipe_read():
    try:
        proc = subprocess.Popen(["sleep", _child_seconds()],
                                stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
    except OSError:
        return
    try:
        proc.stdout.readline()            # EOF when the child exits
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()


_IMPORT_HANGS = {
    "busy_loop": _busy_loop,
    "sleep": lambda: time.sleep(HANG_S),
    "event_wait": _event_wait,
    "lock_twice": _lock_twice,
    "thread_join": _thread_join,
    "queue_get": _queue_get,
    "import_lock": _import_lock,
    "socket_accept": _socket_accept,
    "socketpair_recv": _socketpair_recv,
    "subprocess_wait": _subprocess_wait,
    "child_pipe_read": _child_pipe_read,
    "c_sleep_gil": lambda: _c_sleep(ctypes.PyDLL),
    "c_sleep_gil_sigblock": _c_sleep_gil_sigblock,
    "c_sleep_nogil": lambda: _c_sleep(ctypes.CDLL),
}

_ATTR_HANGS = {
    "attr_dtypes": ("conformance_dtypes", _event_wait),
    "attr_features": ("conformance_features", _busy_loop),
    "attr_name": ("conformance_name", lambda: _c_sleep(ctypes.PyDLL)),
}

_hung_once = set()


def _maybe_attr_hang(attr):
    spec = _ATTR_HANGS.get(_KIND)
    if spec is None or spec[0] != attr or attr in _hung_once:
        return
    _hung_once.add(attr)
    spec[1]()


# ---------------------------------------------------------------- the callable

class _VendorTopK:
    """Correct topk whose declaration attributes are computed lazily."""

    __name__ = "topk"

    def __call__(self, x, k, dim=-1, largest=True, sorted=True):
        return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)

    @property
    def conformance_name(self):
        _maybe_attr_hang("conformance_name")
        return "torch.topk"

    @property
    def conformance_dtypes(self):
        _maybe_attr_hang("conformance_dtypes")
        raise AttributeError("conformance_dtypes")   # not declared: defaults

    @property
    def conformance_features(self):
        _maybe_attr_hang("conformance_features")
        raise AttributeError("conformance_features")  # not declared: defaults

    def __repr__(self):
        return "<vendor topk>"


topk = _VendorTopK()

if _KIND in _IMPORT_HANGS:
    _IMPORT_HANGS[_KIND]()
