"""The side of the run in each process that runs tests (an xdist worker, or the only
process with ``-n 0``): a crash file, a per-test watchdog and the collection manifest.

- The crash file ``crash-<worker>.txt`` in the run's journal folder starts, while a test
  runs, with one JSON line naming it; Python's ``faulthandler`` appends the stack of every
  thread there if the process dies of a signal (a segfault, an abort, a bus error).
- The watchdog is ``faulthandler.dump_traceback_later(timeout, exit=True)``: past the test's
  timeout it appends "Timeout (h:mm:ss)!" and every thread's stack, then ends the process.
  It works in C code too (a kernel that never returns). Under xdist the controller reads
  the file and records the test as crashed or timed-out (``read_crash``), and xdist starts
  a replacement worker; with ``-n 0`` the run ends there and ``torch-conformance report
  DIR`` (or the next run into DIR) writes its report from the journal.
- The manifest (``manifest.json``): every collected conformance test's metadata, so that a
  test that never ran is still reported with its area and implementation.

Timeouts: the matrix's per-area ``timeout_s`` (60 s where an area gives none) for the ci
profile, three times that for dev and ten times for thorough; ``--test-timeout SECONDS``
sets one for every test (0 turns the watchdog off).
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

from conformance.harness.runstate import MUST_PASS, RunState
from conformance.run import device_health
from conformance.run.keys import ITEM_META

DEFAULT_TIMEOUT_S = 60.0
EXITED_MID_TEST = "torch-conformance: os._exit(0) called mid-test:"
EXIT_MID_TEST_STATUS = 71  # what a process ends with when a test called os._exit(0)
PROFILE_FACTOR = {"ci": 1.0, "dev": 3.0, "thorough": 10.0}
MANIFEST = "manifest.json"
MUST_PASS_FILE = "must_pass.json"  # the must-pass tests collected (before deselection)


def addoption(group: Any) -> None:
    group.addoption("--test-timeout", dest="conformance_test_timeout", default=None,
                    type=float, metavar="SECONDS",
                    help="stop a test after SECONDS (recorded timed-out, with its stack; "
                         "under xdist the worker is replaced and the run goes on); default: "
                         "the matrix's per-area timeout_s; 0 turns the watchdog off")


def read_manifest(directory: Path) -> dict[str, dict[str, Any]]:
    """The collection the test processes wrote (test id -> metadata); {} if none."""
    try:
        return json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}


def read_must_pass(directory: Path) -> dict[str, dict[str, Any]] | None:
    """The must-pass tests the test processes collected; None if none were written."""
    try:
        return json.loads((directory / MUST_PASS_FILE).read_text())
    except (OSError, ValueError):
        return None


def crash_file(directory: Path, worker: str) -> Path:
    return directory / f"crash-{worker}.txt"


class Watchdog:
    """Registered in every process that runs tests."""

    def __init__(self, config: pytest.Config, state: RunState, directory: Path,
                 worker: str) -> None:
        self.config = config
        self.state = state
        self.directory = directory
        self.worker = worker
        self.fd: int | None = None
        self.option = config.getoption("conformance_test_timeout", None)

    def timeout_of(self, item: pytest.Item) -> float | None:
        meta = item.stash.get(ITEM_META, None)
        if meta is None:  # not a conformance test (the project's own tests)
            return None
        if self.option is not None:
            return float(self.option) or None
        area = self.state.matrix.areas.get(meta["area"])
        base = area.timeout_s if area is not None and area.timeout_s else DEFAULT_TIMEOUT_S
        return base * PROFILE_FACTOR.get(self.state.profile, 1.0)

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """After pytest's own faulthandler set-up: fatal signals go to our file."""
        self.directory.mkdir(parents=True, exist_ok=True)
        path = crash_file(self.directory, self.worker)
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        faulthandler.enable(file=self.fd, all_threads=True)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        """The manifest and the must-pass list, written once per run (the first worker to
        collect)."""
        tests = {i.nodeid: meta for i in session.items
                 if (meta := i.stash.get(ITEM_META, None)) is not None}
        self._write_once(MANIFEST, tests)
        self._write_once(MUST_PASS_FILE, session.config.stash.get(MUST_PASS, {}))

    def _write_once(self, name: str, data: dict[str, Any]) -> None:
        path = self.directory / name
        if path.exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{name}.{self.worker}")
        tmp.write_text(json.dumps(data, default=str))
        os.replace(tmp, path)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> Any:
        seconds = self.timeout_of(item)
        if self.fd is not None:
            header = json.dumps({"nodeid": item.nodeid, "timeout_s": seconds,
                                 "worker": self.worker, "pid": os.getpid()})
            os.lseek(self.fd, 0, os.SEEK_SET)
            os.ftruncate(self.fd, 0)
            os.write(self.fd, (header + "\n").encode())
        if seconds and self.fd is not None:
            faulthandler.dump_traceback_later(seconds, exit=True, file=self.fd)
        real_exit = os._exit
        os._exit = self._exit_guard(item, real_exit)
        try:
            return (yield)
        finally:
            os._exit = real_exit
            if seconds and self.fd is not None:
                faulthandler.cancel_dump_traceback_later()

    def _exit_guard(self, item: pytest.Item, real_exit: Callable[[int], NoReturn]
                    ) -> Callable[[int], NoReturn]:
        """``os._exit`` while a test runs: a test (a library it calls) that ends this process
        with status 0 would end a ``-n 0`` run "successfully" with no verdict; the process
        ends with status 71 instead, the crash file saying why. Forked children (same
        function, other pid) and other statuses pass through unchanged."""
        pid = os.getpid()

        def guarded(status: int) -> NoReturn:
            if status == 0 and os.getpid() == pid:
                line = f"{EXITED_MID_TEST} {item.nodeid}"
                if self.fd is not None:
                    os.write(self.fd, f"{line}\n".encode())
                capture = self.config.pluginmanager.getplugin("capturemanager")
                with contextlib.suppress(Exception):  # pytest's capture holds fd 2
                    capture.suspend_global_capture(in_=True)
                with contextlib.suppress(OSError):
                    os.write(2, f"\n{line}: the run did not finish (exit "
                                f"{EXIT_MID_TEST_STATUS})\n".encode())
                real_exit(EXIT_MID_TEST_STATUS)
            real_exit(status)

        return guarded

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        """After the test body, before its report: is the device still usable? If not,
        the crash file names this test and the process exits (device_health.py)."""
        try:
            return (yield)
        finally:
            device = self.state.device.torch_device
            if self.fd is not None and device_health.enabled(device):
                why = device_health.problem(device)
                if why:
                    os.write(self.fd, f"{device_health.POISONED} {why}\n".encode())
                    os._exit(device_health.EXIT_STATUS)

    @pytest.hookimpl(tryfirst=True)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.fd is None:
            return
        faulthandler.disable()  # pytest's own faulthandler plugin re-enables its stderr
        os.close(self.fd)
        self.fd = None


def _current_thread_first(dump: str) -> str:
    """faulthandler's dump with the thread that was running the test (the "Current
    thread", or the main thread of a timeout's) first."""
    head, *blocks = dump.split("\n\n")
    if not blocks:
        return dump
    first = [b for b in blocks if b.startswith("Current thread")]
    if not first:  # a timeout names no current thread: the main one is the test's
        first = [b for b in blocks if "in pytest_runtest_call" in b or "in runtestprotocol"
                 in b][:1]
    rest = [b for b in blocks if b not in first]
    return "\n\n".join([head, *first, *rest])


def read_crash(path: Path) -> dict[str, Any] | None:
    """What a crash file says: {"nodeid", "outcome" (crashed / timed-out), "reason",
    "stack"}; None if the file names no test."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    first, _, dump = text.partition("\n")
    try:
        header = json.loads(first)
    except ValueError:
        return None
    where = f"worker {header.get('worker')}, pid {header.get('pid')}"
    stack = _current_thread_first(dump.strip())
    if stack.startswith("Timeout ("):
        seconds = header.get("timeout_s")
        return {"nodeid": header["nodeid"], "outcome": "timed-out", "stack": stack,
                "reason": f"timed out after {seconds:g} s ({where}; the per-test watchdog: "
                          "--test-timeout, or the matrix area's timeout_s)"}
    if stack.startswith(EXITED_MID_TEST):
        return {"nodeid": header["nodeid"], "outcome": "crashed", "stack": "",
                "reason": f"crashed: the test called os._exit(0) ({where}): the process "
                          f"ended mid-test with no result"}
    if stack.startswith(device_health.POISONED):
        why = stack.splitlines()[0].removeprefix(device_health.POISONED).strip()
        return {"nodeid": header["nodeid"], "outcome": "crashed", "stack": "",
                "reason": f"crashed: the test left the device unusable ({why}); {where} "
                          f"exited so that the rest runs on a fresh one"}
    fatal = next((line for line in stack.splitlines() if line.startswith("Fatal Python")), "")
    what = fatal.removeprefix("Fatal Python error:").strip() or \
        "the process died with no fault report (SIGKILL or out of memory, os._exit, or a " \
        "fault its handler could not report, e.g. a C stack overflow)"
    return {"nodeid": header["nodeid"], "outcome": "crashed", "stack": stack,
            "reason": f"crashed: {what} ({where})"}
