"""The start of a run under a watchdog: importing the implementations, then collecting.

The per-test watchdog (``watchdog.py``) starts with the first test. Before it, a module that
hangs at import (an ``--impl``, an entry point, a library the suite imports) or a collection
that never ends would leave the run waiting for ever, with nothing said. From the plugin's
first hook to the end of collection (in the xdist controller, which collects nothing: to the
start of its session) a timer runs, ``--startup-timeout`` seconds (default 300; 0: off):

- past it, a Python thread prints one line naming what was under way (the ``--impl`` being
  imported or its ``conformance_*`` declarations read, else "collection" or "start-up")
  and the file that holds every thread's stack, and ends the process with status 2
  (INCOMPLETE: no test ran), its child processes killed. Under xdist that process is a
  worker: it leaves the line in the run's folder and the controller, told the worker is
  down, stops the run there (a replacement would hang alike) as INCOMPLETE, never PASS.
- a thread stuck in C code holding the GIL stops that Python thread too; as long again
  later (at most ``BACKSTOP_S``) faulthandler's C watchdog writes "Timeout" and every stack
  to stderr and ends the process with status 1 (its children are left to end alone).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

DEFAULT_S = 300.0
BACKSTOP_S = 30.0
EXIT_STATUS = 2  # INCOMPLETE (docs/reference/exit-codes.md)
PREFIX = "torch-conformance: start-up did not finish"
MARKER = "startup-timeout-"  # + worker id: what a worker's watch left for the controller


def addoption(group: Any) -> None:
    group.addoption("--startup-timeout", dest="conformance_startup_timeout", default=None,
                    type=float, metavar="SECONDS",
                    help="end a run whose start (importing the implementations, collecting) "
                         "takes longer than SECONDS, with one line naming what hung and a "
                         f"file with every stack (exit {EXIT_STATUS}); default {DEFAULT_S:g}; "
                         "0 turns it off")


def _seconds(config: pytest.Config) -> float:
    value = config.getoption("conformance_startup_timeout", None)
    return DEFAULT_S if value is None else max(float(value), 0.0)


def _under_way(main: int) -> str:
    """What the main thread was doing: the implementation it was importing or reading
    (``harness.registry``'s ``load_object`` / ``make_impl`` frames, by name), if any."""
    frame = sys._current_frames().get(main)
    phase = "start-up"
    while frame is not None:
        name = frame.f_code.co_name
        spec = frame.f_locals.get("spec")
        if name == "load_object" and isinstance(spec, str):
            return f"importing {spec} ({frame.f_locals.get('what', '')})"
        if name == "make_impl" and isinstance(spec, str):  # its conformance_* attributes
            return f"reading the declarations of {spec} ({frame.f_locals.get('what', '')})"
        if name in ("pytest_collection", "perform_collect"):
            phase = "collection"
        frame = frame.f_back
    return phase


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (Linux's /proc; elsewhere none)."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


class StartupWatch:
    """One per process; ``stop`` ends it (idempotent)."""

    def __init__(self, seconds: float, folder: Path | None) -> None:
        self.seconds = seconds
        self.folder = folder  # an xdist worker's: the run's journal folder, for the controller
        self.stopped = threading.Event()
        self.main = threading.main_thread().ident or 0
        self.pid = os.getpid()
        self.thread = threading.Thread(target=self._watch, name="conformance-startup-watch",
                                       daemon=True)
        self.thread.start()
        # the backstop, for a hang in C code that holds the GIL (the thread above then waits)
        if sys.__stderr__ is not None:
            faulthandler.dump_traceback_later(seconds + min(seconds, BACKSTOP_S), exit=True,
                                              file=sys.__stderr__)

    def stop(self) -> None:
        if not self.stopped.is_set():
            self.stopped.set()
            faulthandler.cancel_dump_traceback_later()

    def _watch(self) -> None:
        if self.stopped.wait(self.seconds):
            return
        what = _under_way(self.main)
        fd, path = tempfile.mkstemp(prefix="torch-conformance-startup-", suffix=".txt")
        with os.fdopen(fd, "w") as out:
            out.write(f"{PREFIX} within {self.seconds:g} s: {what}; pid {os.getpid()}\n")
            out.flush()
            faulthandler.dump_traceback(file=out, all_threads=True)
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        where = f" (xdist worker {worker})" if worker else ""
        line = (f"{PREFIX} within {self.seconds:g} s{where}: {what}; every thread's stack: "
                f"{Path(path)}; --startup-timeout SECONDS sets the limit")
        if self.folder is not None and worker:
            with contextlib.suppress(OSError):
                (self.folder / f"{MARKER}{worker}.txt").write_text(line + "\n")
        if sys.__stderr__ is not None:
            sys.__stderr__.write(f"ERROR: {line}\n")
            sys.__stderr__.flush()
        for pid in _descendants(os.getpid()):  # what the hung code started (a helper
            with contextlib.suppress(OSError):  # daemon, a probe): no orphan outlives us
                os.kill(pid, signal.SIGKILL)
        os._exit(EXIT_STATUS)


_WATCH: StartupWatch | None = None
STOPPED_BY = ""  # the controller: the line of the worker whose watch stopped the run


def start(config: pytest.Config) -> None:
    """Arm the timer (the plugin's first configure step)."""
    global _WATCH
    seconds = _seconds(config)
    if _WATCH is not None and _WATCH.pid != os.getpid():  # a fork: the thread stayed behind
        _WATCH = None
    if seconds and _WATCH is None:
        folder = getattr(config, "workerinput", {}).get("conformance_run_folder")
        _WATCH = StartupWatch(seconds, Path(folder) if folder else None)


def stop() -> None:
    """Collection is over (or, in the xdist controller, its session starts)."""
    global _WATCH
    if _WATCH is not None:
        _WATCH.stop()
        _WATCH = None


def worker_down(folder: Path, worker: str) -> None:
    """The xdist controller, a worker down: if its start-up watch ended it, stop the run
    (each replacement would hang the same way) with the worker's line."""
    try:
        line = (folder / f"{MARKER}{worker}.txt").read_text().strip()
    except OSError:
        return
    global STOPPED_BY
    STOPPED_BY = line
    pytest.exit(line, returncode=EXIT_STATUS)
