"""No leak report at exit: triton >= 3.8's bindings (nanobind) print ~22 lines of "leaked
instance / type / function" when the interpreter finalizes with their objects still alive,
which the exit-time ``gc.freeze`` (plugin.py: it keeps the exit fast) guarantees.

``install()`` registers, at the plugin's import (so it runs after every exit handler
registered later), a handler that closes stderr (fd 2, redirected to /dev/null) once the
exit handlers are done, only where triton's compiled module is loaded. The exit status is
untouched; what is lost is what finalization itself would write to stderr, which in a
finished pytest run is that leak report.
"""

from __future__ import annotations

import atexit
import os
import sys

_INSTALLED = False


def _close_stderr() -> None:
    if not any(name.startswith("triton._C") for name in sys.modules):
        return
    try:
        sys.stderr.flush()
        sys.stdout.flush()
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 2)
        os.close(fd)
    except (OSError, ValueError):  # a closed stream: nothing to quieten
        pass


def install() -> None:
    global _INSTALLED
    if not _INSTALLED:
        atexit.register(_close_stderr)
        _INSTALLED = True
