"""Blind "run breaker" faults for the TopK conformance area.

Every function below is a drop-in TopK implementation for
``--impl topk=tests.planted.blind_run_breakers:<name>``.  It forwards to
``torch.topk`` until its ``BREAK_AT``-th call in the current process and then
breaks the run the way a faulty GPU driver, runtime or kernel library might:
it crashes the process, exits it, hangs, raises a BaseException that is not
an Exception, or damages process-wide state (cwd, stdio descriptors, child
processes).

Rules every breaker follows:

* It breaks at most ONCE per run.  Right before breaking it creates the marker
  ``<name>.done`` in ``$CONFORMANCE_PLANTED_DIR`` with ``open(path, "x")``;
  if the marker already exists (or cannot be created) it keeps behaving like
  ``torch.topk``, so a replacement worker runs clean.  If
  ``CONFORMANCE_PLANTED_DIR`` is not set it never breaks.
* The call counter is per function and per process (a fresh xdist worker
  starts from zero, but the marker stops it from breaking again).
* Hangs are bounded (``HANG_S`` seconds, well above ``--test-timeout 5`` and
  below the default 60 s watchdog); helper threads are daemons and blocked
  with timeouts; the one child process sleeps ``ORPHAN_S`` seconds and then
  calls ``os._exit``.  Nothing allocates much memory.

The expected outcomes in ``SCENARIOS`` assume the breaking test is run with
``--test-timeout 5``.  With the default 60 s watchdog the bounded hangs
(``HANG_S`` = 40 s) finish on their own and those tests would pass, slowly.
Whatever the per-test outcome, a run containing a breaker whose outcome is
not "passed" must not be reported PASS and must exit non-zero; tests that
could not run because of the break must be counted as "not-run".
"""

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import tempfile
import threading
import time
import warnings

import torch

BREAK_AT = 25          # the N-th call in a process breaks
HANG_S = 40.0          # bounded hang: > --test-timeout 5, < default 60 s
ORPHAN_S = 45.0        # lifetime of the leftover child (< 60 s)

# (function name, outcome an honest suite must report for the breaking test, why)
SCENARIOS = [
    ("segfault_null_deref", "crashed",
     "a kernel launch wrapper dereferences NULL via ctypes: the process dies of SIGSEGV"),
    ("abort_in_runtime", "crashed",
     "the runtime hits an internal assertion and calls abort(): the process dies of SIGABRT"),
    ("exit_zero_silently", "crashed",
     "the driver calls _exit(0) mid-test: no result is ever produced, even though the exit "
     "status is 0"),
    ("sigkill_self", "crashed",
     "the process is SIGKILLed (like the OOM killer) in the middle of the test, not by the "
     "watchdog"),
    ("hang_in_c_holding_gil", "timed-out",
     "a blocking driver call holds the GIL with SIGALRM/SIGTERM/SIGINT/SIGUSR* blocked; only "
     "SIGKILL or an out-of-process watchdog stops it"),
    ("deadlock_threads", "timed-out",
     "two runtime threads take two locks in opposite order and the caller joins them: the test "
     "never returns within 5 s"),
    ("raise_keyboard_interrupt", "failed",
     "library code raises KeyboardInterrupt (not the user); the test must not count as passed "
     "and the tests it stops must be not-run"),
    ("raise_system_exit_zero", "failed",
     "a wrapper calls sys.exit(0) on a 'fatal' error: SystemExit is an error of this test, never "
     "a success"),
    ("c_stack_overflow", "crashed",
     "unbounded recursion through C code (sum/map) with a raised recursion limit overflows a "
     "thread's C stack: SIGSEGV"),
    ("chdir_to_deleted_dir", "passed",
     "the library chdirs into a temp dir and deletes it; results are correct, but the suite must "
     "still find its files and write --report DIR"),
    ("close_stdio_fds", "passed",
     "the library closes fds 1 and 2 (stale-fd double close); results are correct, but "
     "results/report must not be lost or written to the wrong fd"),
    ("orphan_child_holding_pipes", "passed",
     "the runtime forks a daemon in its own session that inherits every fd (pipes included) and "
     "lives 45 s; results are correct, the run must still end and report"),
]

_counter_lock = threading.Lock()
_counters = {}


def _planted_dir_from_env():
    d = os.environ.get("CONFORMANCE_PLANTED_DIR")
    if not d:
        return None
    try:
        return os.path.abspath(d)
    except OSError:       # cwd already deleted and the path is relative
        return None


# Resolved once at import, so a breaker that changes the cwd cannot move it.
_PLANTED_DIR_AT_IMPORT = _planted_dir_from_env()


def _should_break(name):
    """Count this call; on the BREAK_AT-th call claim the marker once."""
    with _counter_lock:
        n = _counters.get(name, 0) + 1
        _counters[name] = n
    if n != BREAK_AT:
        return False
    d = _PLANTED_DIR_AT_IMPORT or _planted_dir_from_env()
    if not d:
        return False
    try:
        with open(os.path.join(d, name + ".done"), "x") as f:
            f.write(f"pid={os.getpid()} call={n} time={time.time():.3f}\n")
            f.flush()
            os.fsync(f.fileno())
    except OSError:       # already broken once in this run, or no such dir
        return False
    return True


def _topk(x, k, dim=-1, largest=True, sorted=True):
    return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)


def _libc(gil=False):
    name = ctypes.util.find_library("c") or "libc.so.6"
    return ctypes.PyDLL(name) if gil else ctypes.CDLL(name, use_errno=True)


# --------------------------------------------------------------------------
# Crashes (death by signal or by exit)
# --------------------------------------------------------------------------

def segfault_null_deref(x, k, dim=-1, largest=True, sorted=True):
    if _should_break("segfault_null_deref"):
        ctypes.string_at(0, 64)          # read from address 0 -> SIGSEGV
        os.kill(os.getpid(), signal.SIGSEGV)  # in case page 0 were mapped
    return _topk(x, k, dim, largest, sorted)


def abort_in_runtime(x, k, dim=-1, largest=True, sorted=True):
    if _should_break("abort_in_runtime"):
        os.abort()                       # SIGABRT, like a failed C assert
    return _topk(x, k, dim, largest, sorted)


def exit_zero_silently(x, k, dim=-1, largest=True, sorted=True):
    if _should_break("exit_zero_silently"):
        os._exit(0)                      # no atexit, no flush, status 0
    return _topk(x, k, dim, largest, sorted)


def sigkill_self(x, k, dim=-1, largest=True, sorted=True):
    if _should_break("sigkill_self"):
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(1.0)                  # never reached
    return _topk(x, k, dim, largest, sorted)


def c_stack_overflow(x, k, dim=-1, largest=True, sorted=True):
    if _should_break("c_stack_overflow"):
        box = {}

        def rec(n):
            # every level goes through C (sum -> map_next -> call), so on
            # CPython 3.11 each level uses real C stack
            return sum(map(rec, (n + 1,)))

        def body():
            old = sys.getrecursionlimit()
            try:
                sys.setrecursionlimit(1000000)
                rec(0)
            except BaseException as e:   # RecursionError on interpreters that guard the C stack
                box["err"] = e
            finally:
                sys.setrecursionlimit(old)

        prev = threading.stack_size()
        try:
            threading.stack_size(512 * 1024)   # fixed, small: overflow is fast and cheap
            t = threading.Thread(target=body, name="topk-recursive-planner", daemon=True)
            t.start()
        finally:
            threading.stack_size(prev)
        t.join(HANG_S)
        if "err" in box:
            raise RuntimeError("topk: recursive planner failed") from box["err"]
    return _topk(x, k, dim, largest, sorted)


# --------------------------------------------------------------------------
# Hangs (bounded)
# --------------------------------------------------------------------------

def hang_in_c_holding_gil(x, k, dim=-1, largest=True, sorted=True):
    if _should_break("hang_in_c_holding_gil"):
        libc = _libc(gil=True)           # PyDLL: the GIL stays held in the call
        libc.sleep.argtypes = [ctypes.c_uint]
        libc.sleep.restype = ctypes.c_uint
        blocked = {signal.SIGALRM, signal.SIGVTALRM, signal.SIGPROF,
                   signal.SIGINT, signal.SIGTERM, signal.SIGHUP,
                   signal.SIGUSR1, signal.SIGUSR2}
        old = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            deadline = time.monotonic() + HANG_S
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                libc.sleep(int(left) + 1 if left > 1 else 1)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
    return _topk(x, k, dim, largest, sorted)


def deadlock_threads(x, k, dim=-1, largest=True, sorted=True):
    if _should_break("deadlock_threads"):
        a, b = threading.Lock(), threading.Lock()
        both_hold = threading.Barrier(2, timeout=HANG_S)

        def worker(first, second):
            with first:
                try:
                    both_hold.wait()
                except threading.BrokenBarrierError:
                    return
                if second.acquire(timeout=HANG_S):   # bounded "deadlock"
                    second.release()

        ts = [threading.Thread(target=worker, args=(a, b), name="topk-stream-0", daemon=True),
              threading.Thread(target=worker, args=(b, a), name="topk-stream-1", daemon=True)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()                     # the caller waits for the "streams"
    return _topk(x, k, dim, largest, sorted)


# --------------------------------------------------------------------------
# BaseExceptions that are not Exceptions
# --------------------------------------------------------------------------

def raise_keyboard_interrupt(x, k, dim=-1, largest=True, sorted=True):
    if _should_break("raise_keyboard_interrupt"):
        raise KeyboardInterrupt("topk: interrupted by the runtime's signal handler")
    return _topk(x, k, dim, largest, sorted)


def raise_system_exit_zero(x, k, dim=-1, largest=True, sorted=True):
    if _should_break("raise_system_exit_zero"):
        sys.exit(0)
    return _topk(x, k, dim, largest, sorted)


# --------------------------------------------------------------------------
# Damage to process-wide state; the results stay correct
# --------------------------------------------------------------------------

def chdir_to_deleted_dir(x, k, dim=-1, largest=True, sorted=True):
    if _should_break("chdir_to_deleted_dir"):
        base = _PLANTED_DIR_AT_IMPORT or _planted_dir_from_env()
        d = tempfile.mkdtemp(prefix="topk-jit-cwd-", dir=base)
        os.chdir(d)
        os.rmdir(d)                      # cwd now no longer exists
    return _topk(x, k, dim, largest, sorted)


def close_stdio_fds(x, k, dim=-1, largest=True, sorted=True):
    if _should_break("close_stdio_fds"):
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                os.close(fd)
    return _topk(x, k, dim, largest, sorted)


def orphan_child_holding_pipes(x, k, dim=-1, largest=True, sorted=True):
    if _should_break("orphan_child_holding_pipes"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # 3.12+ warns about fork with threads
            pid = os.fork()
        if pid == 0:
            # child: new session (escapes process-group kills), keeps every
            # inherited fd, sleeps a bounded time, exits without cleanup
            try:
                with contextlib.suppress(OSError):
                    os.setsid()
                time.sleep(ORPHAN_S)
            finally:
                os._exit(0)
        # parent: do not wait for the child (it is the runtime's "daemon")
    return _topk(x, k, dim, largest, sorted)


for _fn in (segfault_null_deref, abort_in_runtime, exit_zero_silently, sigkill_self,
            c_stack_overflow, hang_in_c_holding_gil, deadlock_threads,
            raise_keyboard_interrupt, raise_system_exit_zero, chdir_to_deleted_dir,
            close_stdio_fds, orphan_child_holding_pipes):
    _fn.conformance_name = "torch.topk"
del _fn
