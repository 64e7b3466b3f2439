"""A child process that must not outlive its parent (Linux): ``PR_SET_PDEATHSIG``.

The kernel sends the child SIGKILL when the thread that started it exits, so a parent that
is itself killed (SIGKILL, an outer timeout) leaves no orphan holding a GPU or a port.
Elsewhere this does nothing. ``DIE_WITH_PARENT_ENV=1`` asks a pytest process of the suite
and its xdist workers to do it too (the GPU campaign's stages: conformance/plugin.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
DIE_WITH_PARENT_ENV = "CONFORMANCE_DIE_WITH_PARENT"


def die_with_parent(exit_if_orphaned: bool = True) -> None:
    """Ask for SIGKILL when the parent dies; exit at once if it already has (the parent
    died before this took effect and the process was re-parented)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if exit_if_orphaned and os.getppid() == 1:
        os._exit(1)


def new_group_dying_with_parent() -> None:  # pragma: no cover - runs in the child, pre-exec
    """``preexec_fn`` of a stage: its own process group (killed as one at the deadline),
    in the caller's session (the device tool ends the session's processes when the command
    returns; a new session would outlive it), and SIGKILL when the caller dies."""
    os.setpgid(0, 0)
    die_with_parent(exit_if_orphaned=False)
