"""The child process of ``conformance.processes.isolate``: imports torch once, selects its device,
then serves cases from its pipe until "exit" or end of file.

Started as ``python -u -m conformance.processes._child --fds=R,W --device=DEV --tag=TAG``;
the parent's first message is its ``sys.path``. Replies: ``{"ready": ...}`` once, then one
reply per case (see ``_isolate_case.run_case``), plus ``probe`` after every case on a device
other than the CPU (a case that catches a device error itself still poisons the context).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import os
import sys
from multiprocessing.connection import Connection

from conformance.harness.lifetime import die_with_parent


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="conformance.processes._child")
    parser.add_argument("--fds", required=True)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tag", default="")
    parser.add_argument("--dist", default="",
                        help="BACKEND,RANK,WORLD,STORE_FILE,TIMEOUT_S: join a process group "
                             "(a rank of conformance.processes.ranks) before serving cases")
    opts = parser.parse_args(argv)
    die_with_parent()
    rfd, wfd = (int(x) for x in opts.fds.split(","))
    for fd in (rfd, wfd):
        os.set_inheritable(fd, False)  # grandchildren must not hold the pipes open
    # a segfault or an abort leaves every thread's Python stack in the output file (the
    # parent's stderr tail), not just "died by SIGSEGV"
    faulthandler.enable(all_threads=True)
    inbox, outbox = Connection(rfd, writable=False), Connection(wfd, readable=False)
    try:
        parent_path = inbox.recv()
    except EOFError:
        return 0
    sys.path[:] = [*parent_path, *(p for p in sys.path if p not in parent_path)]

    import torch

    from conformance.processes._case import probe_device, run_case, select_device

    select_device(opts.device)
    hello = {"ready": True, "pid": os.getpid(), "torch": torch.__version__}
    if opts.dist:
        from conformance.processes.current_rank import join_group, sequence

        hello.update(join_group(opts.dist, opts.device))
    outbox.send(hello)
    on_accelerator = torch.device(opts.device).type != "cpu"
    while True:
        try:
            msg = inbox.recv()
        except EOFError:
            return 0
        if msg == "exit":
            return 0
        reply = run_case(msg["fn"], msg["args"], msg["kwargs"], pickled=True)
        if on_accelerator:  # after every case: a case may catch a device error itself
            reply["probe"] = probe_device(opts.device)
        if opts.dist:  # after every case: the ranks must leave it in step
            reply["sequence"] = sequence()
        _flush()
        outbox.send(reply)


if __name__ == "__main__":
    sys.exit(main())
