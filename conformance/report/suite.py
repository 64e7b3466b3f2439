"""Which suite made a report: its version (setuptools-scm, from git at install time) and
the commit of the source it ran from, read from git at run time when it is a checkout (an
editable install keeps the version it was installed at; the commit is the one that ran)."""

from __future__ import annotations

import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from conformance import __version__

ROOT = Path(__file__).resolve().parents[2]  # the checkout (or site-packages)


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


@cache
def identity() -> dict[str, Any]:
    """{"version", "commit", "dirty", "source", "installed_commit"}: None when unknown.
    ``installed_commit`` is the one the version was computed at (pip install time)."""
    from conformance import COMMIT_AT_INSTALL

    installed = (COMMIT_AT_INSTALL or "").removeprefix("g") or None
    commit = _git("rev-parse", "HEAD") if (ROOT / ".git").exists() else None
    if commit is not None:
        status = _git("status", "--porcelain", "--untracked-files=no")
        return {"version": __version__, "commit": commit,
                "dirty": None if status is None else bool(status), "source": "git checkout",
                "installed_commit": installed}
    return {"version": __version__, "commit": installed, "dirty": None,
            "source": "installed package", "installed_commit": installed}


def describe(suite: dict[str, Any] | None) -> str:
    """One line: version, commit (12 digits) and whether the tree had changes."""
    if not suite:
        return "unknown"
    commit, installed = suite.get("commit"), suite.get("installed_commit")
    version = suite.get("version")
    if commit and installed and not commit.startswith(installed):  # an editable install
        version = f"{version} (installed at {installed[:9]})"
    text = f"{version} at {commit[:12] if commit else 'an unknown commit'}"
    return text + (" with uncommitted changes" if suite.get("dirty") else "")
