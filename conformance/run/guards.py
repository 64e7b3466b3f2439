"""Command-line mistakes pytest cannot see: a path option's value that became pytest's
rootdir.

pytest chooses its rootdir (and with it the ini file, ``testpaths`` and every test id)
before it loads plugins, so it does not know that the word after ``--report`` is that
option's value: an existing directory given as ``--report DIR`` counts as a test path, and
a DIR outside the project makes the run collect from the wrong place with no ini file (the
project's own tests included, in a source checkout). ``--report=DIR`` is never read as a
path. The check asks pytest's own rootdir rule again without our options' values and
compares.
"""

from __future__ import annotations

import dataclasses
import inspect
import itertools
from pathlib import Path

import pytest

PATH_OPTIONS = ("--report", "--repro-dir", "--device-matrix", "--shard-durations")


def _rootdir_without_our_values(config: pytest.Config) -> Path | None:
    try:
        from _pytest.config.findpaths import determine_setup
    except ImportError:  # pragma: no cover - a pytest that moved it: no check
        return None
    ns = config.known_args_namespace
    given = {"inifile": ns.inifilename, "args": list(ns.file_or_dir),
             "rootdir_cmd_arg": ns.rootdir or None,
             "invocation_dir": Path(config.invocation_params.dir),
             "override_ini": getattr(ns, "override_ini", None)}
    params = inspect.signature(determine_setup).parameters
    try:
        return Path(determine_setup(**{k: v for k, v in given.items() if k in params})[0])
    except Exception:  # pragma: no cover - a changed signature: no check
        return None


def misread_path_option(config: pytest.Config) -> str | None:
    """The one-line error for a path option whose separate value became the rootdir.
    Checked where the run starts: an xdist worker starts after the controller has made the
    report folder, so the same arguments name an existing path there (and a traceback)."""
    if hasattr(config, "workerinput"):
        return None
    args = list(config.invocation_params.args)
    values = [(o, v) for o, v in itertools.pairwise(args)
              if o in PATH_OPTIONS and not v.startswith("-")
              and (Path(config.invocation_params.dir) / v).exists()]
    if not values:
        return None
    expected = _rootdir_without_our_values(config)
    if expected is None or expected.resolve() == Path(config.rootpath).resolve():
        return None
    option, value = values[0]
    return (f"{option} {value}: pytest read this existing path as a test path and took its "
            f"rootdir from it ({config.rootpath}, not {expected}), so the run would collect "
            f"from the wrong place; write {option}={value}")


def args_for_workers(config: pytest.Config) -> None:
    """Rewrite ``--report DIR`` (each path option with a separate value) as ``--report=DIR``
    in the arguments xdist hands its workers (the controller's invocation arguments). A
    worker parses them after the controller made DIR: as a separate word, an existing DIR
    outside the project became the worker's rootdir, and the worker then collected without
    the project's ini file (its testpaths: every test folder under the working directory,
    the project's own tests too) where the controller had checked nothing wrong."""
    args = list(config.invocation_params.args)
    out: list[str] = []
    i = 0
    while i < len(args):
        if args[i] in PATH_OPTIONS and i + 1 < len(args) and not args[i + 1].startswith("-"):
            out.append(f"{args[i]}={args[i + 1]}")
            i += 2
            continue
        out.append(args[i])
        i += 1
    if out != args:
        config.invocation_params = dataclasses.replace(config.invocation_params, args=tuple(out))
