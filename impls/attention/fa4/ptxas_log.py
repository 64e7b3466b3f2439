"""What ptxas says while CuTe DSL compiles a kernel (with the ``remarks{ptx}`` option it
prints ``ptxas -v``: registers and spill bytes per kernel), captured from stderr."""

from __future__ import annotations

import contextlib
import io
import os
import re
import sys
import tempfile
from collections.abc import Iterator

SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
REGISTERS = re.compile(r"Used (\d+) registers")


@contextlib.contextmanager
def capture_stderr() -> Iterator[list[str]]:
    """Capture file descriptor 2 (native code) and sys.stderr (the DSL's Python side, which
    pytest swaps for its own object); the text is in the yielded list afterwards."""
    out: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    py_err = io.StringIO()
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            with contextlib.redirect_stderr(py_err):
                yield out
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            out.append(tmp.read().decode("utf-8", "replace"))
            out.append(py_err.getvalue())


def spills(log: str) -> list[tuple[int, int]]:
    """(store bytes, load bytes) per kernel ptxas reported."""
    return [(int(a), int(b)) for a, b in SPILLS.findall(log)]


def registers(log: str) -> list[int]:
    return [int(r) for r in REGISTERS.findall(log)]
