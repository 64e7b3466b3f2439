"""``torch-conformance isolate``: rerun a case in the foreground (in this
process, so that a debugger can attach) or, with ``--isolated``, in a child."""

from __future__ import annotations

import argparse
import ast
import json
import os
import sys
from typing import Any

from conformance.processes._case import resolve
from conformance.processes.isolate import run_inprocess, run_isolated

USAGE_STATUS = 4


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line, no usage block
        raise _UsageError(message)


def _cli(argv: list[str] | None) -> int:
    parser = _Parser(prog="torch-conformance isolate",
                     description="Run an isolated case in the foreground (or in a child).")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--env", action="append", default=[], metavar="K=V")
    parser.add_argument("--timeout", type=float, default=30.0)
    parser.add_argument("--isolated", action="store_true",
                        help="run the case in a child process and print its Outcome")
    parser.add_argument("case", metavar="module:qualname")
    parser.add_argument("args", nargs="?", default="((), {})", metavar="ARGS",
                        help="repr((args, kwargs)), a Python literal")
    opts = parser.parse_args(argv)
    env = {}
    for item in opts.env:
        k, sep, v = item.partition("=")
        if not sep or not k:
            raise _UsageError(f"--env wants K=V, got {item!r}")
        env[k] = v
    try:
        parsed = ast.literal_eval(opts.args)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as exc:
        raise _UsageError(f"ARGS is not a Python literal: {opts.args!r} "
                          f"({type(exc).__name__})") from None
    if not (isinstance(parsed, tuple) and len(parsed) == 2
            and isinstance(parsed[0], (tuple, list)) and isinstance(parsed[1], dict)):
        raise _UsageError(f"ARGS must be repr((args, kwargs)), got {opts.args!r}")
    args, kwargs = tuple(parsed[0]), parsed[1]
    os.environ.update(env)  # before torch is imported
    try:
        resolve(opts.case)
    except Exception as exc:
        raise _UsageError(f"cannot load case {opts.case!r}: {type(exc).__name__}: {exc}") \
            from None
    if opts.isolated:
        outcome = run_isolated(opts.case, *args, device=opts.device, timeout=opts.timeout,
                               env=env, **kwargs)
        print(json.dumps(outcome.to_json(), indent=1, default=str))
    else:
        from conformance.processes._case import select_device

        select_device(opts.device)
        outcome = run_inprocess(opts.case, *args, **kwargs)
        if outcome.traceback:
            print(outcome.traceback, file=sys.stderr, end="")
    print(outcome.describe())
    if outcome.kind == "returned":
        print(f"value: {outcome.value!r}")
    return 0 if outcome.kind == "returned" else 1


def main(argv: list[str] | None = None) -> int:
    """The CLI: exit status 0 when the case returned, 1 otherwise, 4 on bad usage."""
    try:
        return _cli(argv)
    except _UsageError as exc:
        print(f"torch-conformance isolate: error: {exc}", file=sys.stderr)
        return USAGE_STATUS
