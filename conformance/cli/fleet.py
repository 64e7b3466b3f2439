"""``torch-conformance fleet OUTDIR [--devices all|0,1,...] [--workers 2] [--timeout S]
[-- PYTEST ARGS]``: qualify every GPU of this host at once, one pytest run per GPU.

Each GPU gets its own pytest process (``--device=cuda:N --report OUTDIR/cuda-N -n WORKERS``
plus the given arguments; its output in ``OUTDIR/cuda-N.log``), in its own process group.
When they are done, OUTDIR gets ``fleet.md``, ``fleet.json`` and ``index.html``: one row per
GPU (index, name, UUID, PCI address, verdict, counts per outcome, must-pass, wall time,
report), and ``junit.xml``: every run's test suite (``torch-conformance[cuda:N ...]``).
A run that died, hung past ``--timeout`` or wrote no report that verifies is an INCOMPLETE
row saying why. Exit status as a run's: 0 every GPU PASS, 1 any FAIL, 2 any
INCOMPLETE (and none FAIL), 4 a usage error. ``--fake-devices N`` (hidden) runs N copies on
``--device=cpu``: the project's test of this command on a machine without GPUs.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from conformance.harness.lifetime import die_with_parent
from conformance.harness.outcomes import OUTCOMES

EXIT_OF = {"PASS": 0, "FAIL": 1, "INCOMPLETE": 2}  # as a run's (conformance/run/accounting.py)
GRACE_S = 20.0  # after SIGINT (pytest writes its report), before SIGKILL
OWN_OPTIONS = ("--device", "--report", "-n", "--numprocesses", "--dist", "--tx")
POLL_S = 0.2


class FleetError(ValueError):
    """Bad input (one line, exit 4)."""


@dataclass
class Member:
    """One GPU's run: what it is, how it went."""

    label: str  # the folder and log name, e.g. cuda-1
    device: str  # the --device it ran with
    index: int | None
    cmd: list[str] = field(default_factory=list)
    pid: int | None = None
    exit_code: int | None = None
    wall_s: float = 0.0
    verdict: str = "INCOMPLETE"
    reason: str = ""
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    must_pass: dict[str, int] | None = None
    report: str | None = None  # report.json, relative to OUTDIR
    log: str = ""


def gpu_devices(spec: str) -> list[tuple[str, int]]:
    """(kind, index) of each GPU ``--devices`` names: ``all`` or ``0,2,...``."""
    import torch

    kind = next((k for k in ("cuda", "xpu") if hasattr(torch, k)
                 and getattr(torch, k).is_available()), None)
    count = int(getattr(torch, kind).device_count()) if kind else 0
    if kind is None or count == 0:
        raise FleetError(f"fleet: torch {torch.__version__} sees no GPU (cuda, ROCm or xpu) "
                         "on this host")
    if spec == "all":
        return [(kind, i) for i in range(count)]
    try:
        indices = [int(part) for part in spec.split(",")]
    except ValueError:
        raise FleetError(f"fleet: --devices {spec!r}: give all or GPU indices, e.g. "
                         "0,1") from None
    if len(set(indices)) != len(indices) or any(i < 0 for i in indices):
        raise FleetError(f"fleet: --devices {spec!r}: each index once, every one >= 0")
    past = [i for i in indices if i >= count]
    if past:
        raise FleetError(f"fleet: --devices {spec!r}: this host has {count} {kind} devices "
                         f"(indices 0-{count - 1}), not {past[0]}")
    return [(kind, i) for i in indices]


def check_pytest_args(args: list[str]) -> None:
    """The options fleet sets per GPU may not come from the user."""
    for arg in args:
        for own in OWN_OPTIONS:
            if arg == own or arg.startswith(own + "=") or (
                    own == "-n" and re.fullmatch(r"-n\s*(\d+|auto|logical)", arg)):
                raise FleetError(f"fleet: {arg!r} after --: fleet sets --device, --report and "
                                 "-n for each GPU (use --devices and --workers)")


def members(opts: Any) -> list[Member]:
    if opts.fake_devices:
        return [Member(f"fake-{i}", "cpu", None) for i in range(opts.fake_devices)]
    return [Member(f"{kind}-{i}", f"{kind}:{i}", i) for kind, i in gpu_devices(opts.devices)]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before exec
    """Linux: the child gets SIGKILL if the fleet process dies (no orphans)."""
    die_with_parent(exit_if_orphaned=False)


def _env(total_workers: int) -> dict[str, str]:
    """The children share the host's cores: their thread pools are sized for that."""
    env = dict(os.environ)
    env.pop("PYTEST_XDIST_WORKER", None)
    threads = str(max(1, (os.cpu_count() or 1) // max(total_workers, 1)))
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(name, threads)
    return env


def start(member: Member, out: Path, pytest_args: list[str], workers: int,
          env: dict[str, str]) -> subprocess.Popen:
    member.cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *pytest_args,
                  f"--device={member.device}", f"--report={out / member.label}",
                  "-n", str(workers)]
    member.log = f"{member.label}.log"
    with open(out / member.log, "wb") as log:
        proc = subprocess.Popen(
            member.cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=env, start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
    member.pid = proc.pid
    return proc


def _signal_group(pid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def stop(procs: dict[str, subprocess.Popen], grace: float = GRACE_S) -> None:
    """SIGINT to every group still running (pytest then writes its report), SIGKILL to
    what is left after ``grace`` seconds, and the whole group again: nothing outlives us."""
    live = {k: p for k, p in procs.items() if p.poll() is None}
    for p in live.values():
        _signal_group(p.pid, signal.SIGINT)
    deadline = time.monotonic() + grace
    while any(p.poll() is None for p in live.values()) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    for p in procs.values():
        _signal_group(p.pid, signal.SIGKILL)  # stragglers of a group whose leader exited
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)


def run_all(members_: list[Member], out: Path, pytest_args: list[str], workers: int,
            timeout: float | None) -> None:
    """Start every member, wait for them (killing one past ``timeout``), fill in the rows.
    On KeyboardInterrupt or SIGTERM every child's group is stopped first."""
    env = _env(len(members_) * max(workers, 1))
    procs: dict[str, subprocess.Popen] = {}
    started: dict[str, float] = {}
    previous = signal.getsignal(signal.SIGTERM)

    def terminate(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    try:
        for m in members_:
            procs[m.label] = start(m, out, pytest_args, workers, env)
            started[m.label] = time.monotonic()
            print(f"fleet: {m.device} ({m.label}) started, pid {m.pid}, log {out / m.log}",
                  flush=True)
        pending = list(members_)
        while pending:
            for m in list(pending):
                p = procs[m.label]
                if p.poll() is None:
                    if not timeout or time.monotonic() - started[m.label] <= timeout:
                        continue
                    stop({m.label: p})
                    m.reason = f"hung: stopped after --timeout {timeout:g} s"
                pending.remove(m)
                _finished(m, p, started[m.label])
            if pending:
                time.sleep(POLL_S)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not orphan
        try:
            stop(procs)
        finally:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        for m in members_:
            if m.exit_code is None:
                m.reason = m.reason or "interrupted: the fleet was stopped"
                if m.label in procs:
                    _finished(m, procs[m.label], started[m.label])
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)


def _finished(m: Member, p: subprocess.Popen, began: float) -> None:
    m.wall_s = round(time.monotonic() - began, 1)
    m.exit_code = p.poll()
    print(f"fleet: {m.device} ({m.label}) exited with status {m.exit_code} after "
          f"{m.wall_s:g} s", flush=True)


def _last_error(log: Path) -> str:
    try:
        lines = [s.strip() for s in log.read_text(errors="replace").splitlines() if s.strip()]
    except OSError:
        return "no log"
    errors = [s for s in lines if s.startswith(("ERROR", "E ")) or "error:" in s.lower()]
    return (errors or lines or ["no output"])[-1][:300]


def judge(member: Member, out: Path) -> None:
    """The row's verdict: the report's when the run ended by itself with a report that
    verifies, else INCOMPLETE with the reason."""
    from conformance.report.manifest import verify

    folder = out / member.label
    rc = member.exit_code
    report = None
    if (folder / "report.json").is_file():
        report, problems = verify(folder)
        member.report = f"{member.label}/report.json"
        if problems and not member.reason:
            member.reason = f"its report does not verify: {problems[0]}"
    if report is not None:
        dev = (report.get("environment") or {}).get("device") or {}
        member.name, member.uuid = dev.get("name"), dev.get("uuid")
        member.pci_bus_id = dev.get("pci_bus_id")
        member.index = dev.get("index", member.index)
        member.counts = {o: int(n) for o, n in (report.get("summary") or {}).items()}
        must = report.get("must_pass")
        if must and "required" in must:
            member.must_pass = {"passed": must["passed"], "required": must["required"]}
    if rc is not None and rc < 0 and not member.reason:
        try:
            member.reason = f"died by {signal.Signals(-rc).name}"
        except ValueError:
            member.reason = f"died by signal {-rc}"
    elif report is None and not member.reason:
        member.reason = (f"exited with status {rc} and wrote no report: "
                         f"{_last_error(out / member.log)}")
    elif report is not None and rc != report.get("exit_status") and not member.reason:
        member.reason = (f"exited with status {rc}, its report says {report.get('exit_status')}"
                         f": {_last_error(out / member.log)}")
    member.verdict = "INCOMPLETE" if member.reason else str(report["verdict"])


def fleet_verdict(rows: list[Member]) -> str:
    verdicts = {m.verdict for m in rows}
    if "FAIL" in verdicts:
        return "FAIL"
    return "INCOMPLETE" if "INCOMPLETE" in verdicts or not rows else "PASS"


def _counts(m: Member) -> str:
    return ", ".join(f"{m.counts[o]} {o}" for o in OUTCOMES if m.counts.get(o)) or "-"


def _must(m: Member) -> str:
    return f"{m.must_pass['passed']}/{m.must_pass['required']}" if m.must_pass else "-"


COLUMNS = ("device", "index", "name", "UUID", "PCI bus id", "verdict", "outcomes",
           "must-pass", "wall s", "report")


def _cells(m: Member) -> list[str]:
    return [m.label if m.device == "cpu" else m.device,
            "-" if m.index is None else str(m.index), m.name or "-", m.uuid or "-",
            m.pci_bus_id or "-", m.verdict + (f" ({m.reason})" if m.reason else ""),
            _counts(m), _must(m), f"{m.wall_s:g}", m.report or m.log]


def write(out: Path, rows: list[Member], info: dict[str, Any]) -> list[Path]:
    """fleet.json, fleet.md, index.html and junit.xml (every run's test suite) in ``out``."""
    verdict = fleet_verdict(rows)
    data = {"schema": "torch-conformance-fleet", "schema_version": 1, **info,
            "verdict": verdict, "exit_status": EXIT_OF[verdict],
            "devices": [asdict(m) for m in rows]}
    (out / "fleet.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    pipe = [f"| {' | '.join(c.replace('|', '/') for c in _cells(m))} |" for m in rows]
    (out / "fleet.md").write_text("\n".join([
        f"# torch-conformance fleet: {verdict}", "",
        f"{len(rows)} runs, {info['workers']} xdist workers each; pytest arguments: "
        f"`{' '.join(info['pytest_args']) or '(none)'}`", "",
        f"| {' | '.join(COLUMNS)} |", f"|{'---|' * len(COLUMNS)}", *pipe, ""]),
        encoding="utf-8")
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in _cells(m)[:-1])
        + (f'<td><a href="{html.escape(m.label)}/report.html">{html.escape(m.label)}</a></td>'
           if m.report else f'<td><a href="{html.escape(m.log)}">{html.escape(m.log)}</a></td>')
        + "</tr>\n" for m in rows)
    (out / "index.html").write_text(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>torch-conformance fleet"
        f"</title></head><body>\n<h1>torch-conformance fleet: {verdict}</h1>\n<table>\n<tr>"
        + "".join(f"<th>{c}</th>" for c in COLUMNS) + "</tr>\n" + body
        + "</table>\n</body></html>\n", encoding="utf-8")
    from conformance.report.merge import merge_junit

    junit = merge_junit([out / m.label / "junit.xml" for m in rows], out / "junit.xml")
    return [out / "fleet.md", out / "fleet.json", out / "index.html", *([junit] if junit else [])]


def main(opts: Any) -> int:
    """The ``fleet`` command (FleetError: a usage error)."""
    args = list(opts.pytest_args or [])
    check_pytest_args(args)
    if opts.workers < 0:
        raise FleetError(f"fleet: --workers {opts.workers}: 0 (no xdist) or more")
    if not 0 <= opts.fake_devices <= 64:
        raise FleetError(f"fleet: --fake-devices {opts.fake_devices}: 1 to 64")
    if opts.timeout is not None and opts.timeout <= 0:
        raise FleetError(f"fleet: --timeout {opts.timeout:g}: seconds, > 0")
    out = Path(opts.outdir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FleetError(f"fleet: {out} exists and is not an empty directory")
    rows = members(opts)
    out.mkdir(parents=True, exist_ok=True)
    begun = time.time()
    interrupted = False
    try:
        run_all(rows, out, args, opts.workers, opts.timeout)
    except KeyboardInterrupt:
        interrupted = True
    for m in rows:
        judge(m, out)
    if not interrupted and rows and all(m.exit_code == 4 and m.report is None for m in rows):
        raise FleetError(f"fleet: every run refused its arguments: "
                         f"{_last_error(out / rows[0].log)}")
    written = write(out, rows, {
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(begun)),
        "wall_s": round(time.time() - begun, 1), "pytest_args": args,
        "workers": opts.workers, "timeout_s": opts.timeout, "interrupted": interrupted})
    for m in rows:
        print(f"  {_cells(m)[0]:<8} {m.verdict:<10}  {_counts(m)}"
              + (f"  ({m.reason})" if m.reason else ""))
    verdict = fleet_verdict(rows)
    print(f"fleet verdict: {verdict}; wrote " + ", ".join(str(p) for p in written))
    return EXIT_OF[verdict]


def add_parser(sub: Any) -> Any:
    import argparse

    f = sub.add_parser("fleet", help="qualify every GPU of this host at once: one pytest run "
                                     "per GPU, then a per-GPU table (fleet.md, fleet.json)",
                       usage="torch-conformance fleet OUTDIR [options] [-- PYTEST ARGS...]",
                       epilog="PYTEST ARGS (after --) go to every run, e.g. -- --strict "
                              "-k 'not thorough'")
    f.add_argument("outdir", help="where each GPU's report (OUTDIR/cuda-N/) and the table go")
    f.add_argument("--devices", default="all",
                   help="all (default) or GPU indices, e.g. 0,1,3")
    f.add_argument("--workers", type=int, default=2,
                   help="xdist workers per GPU (default 2; 0: no xdist)")
    f.add_argument("--timeout", type=float, default=None,
                   help="seconds a GPU's run may take; past it, it is stopped (INCOMPLETE)")
    f.add_argument("--fake-devices", type=int, default=0, help=argparse.SUPPRESS)
    f.set_defaults(pytest_args=[])  # what follows `--` (split off by cli/main.py)
    return f
