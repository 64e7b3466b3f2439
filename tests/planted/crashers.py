"""Planted cases for ``conformance.processes.isolate``: one module-level function per way a case can
end (return, raise, die by a signal, exit, hang)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


def add(a: int, b: int = 0) -> int:
    return a + b


def pid() -> int:
    return os.getpid()


def tensor_sum(values: list[float]) -> float:
    import torch

    return float(torch.tensor(values).sum())


def noisy(text: str) -> str:
    print(f"out: {text}")
    print(f"err: {text}", file=sys.stderr)
    return text


def index_error(n: int) -> None:
    data = [0] * n
    data[n]  # an IndexError


def abort() -> None:
    print("about to abort", file=sys.stderr)
    os.abort()


def segfault() -> None:
    ctypes.string_at(0)


def exit3() -> None:
    os._exit(3)


def sys_exit(code: int) -> None:
    sys.exit(code)


def spin() -> None:
    while True:
        pass


def grandchild_then_hang(pid_file: str, marker: str) -> None:
    """Start a grandchild that sleeps (``marker`` in its argv), write its pid, then hang."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", marker])
    Path(pid_file).write_text(str(child.pid))
    time.sleep(600)


def failed_assert_async() -> None:
    import torch

    torch._assert_async(torch.tensor(False))


class Unpicklable(Exception):
    """An exception that cannot be pickled (it holds a lock)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.lock = threading.Lock()

    def __reduce__(self) -> Any:
        raise TypeError("Unpicklable cannot be pickled")


def raise_unpicklable() -> None:
    raise Unpicklable("planted: holds a lock")


def return_unpicklable() -> Any:
    return threading.Lock()


def device_error() -> None:
    """A RuntimeError whose message reads like a CUDA error (for the retire rule)."""
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def poison_device() -> None:
    """Break the child's torch.ones (which the health probe uses), then raise an ordinary
    error: a stand-in for a poisoned CUDA context on a machine without one."""
    import torch

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("planted: the context is gone")

    torch.ones = broken
    raise ValueError("planted: an ordinary error")


def getenv(name: str) -> str | None:
    return os.environ.get(name)
