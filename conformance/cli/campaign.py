"""The GPU campaign: the GPU checks and benchmarks of every area, most valuable first, within
a global deadline on a lent GPU, and its CPU rehearsal.

    python -m conformance.cli.campaign OUT [--deadline S]   # on the GPU host (ci/gpu-campaign.sh)
    python -m conformance.cli.campaign OUT --dry-run        # on a CPU: the same stages, rehearsed

Stages (conformance/cli/campaign_stages.py) run in order of value, each in its own process
group: our FA4 sm90 and Triton kernels against the oracle, the benchmark of our kernels
against their peers, then the other areas as time allows. A stage needing the CuTe DSL
waits for a call where ``cutlass.cute`` imports. A stage starts only with at least 20 s of
test time left before the deadline; each is killed with its group at its cap or the
deadline, whichever is first, and the campaign itself stops at the deadline.

Results come back whatever happens: after every stage, and at the start, OUT is rewritten
with at most eight files, none in a sub-folder (the device tool brings back eight):
README.md (what ran, what did not and why), report.json, summary.md, report.html (the
stage reports merged), benchmark.json, environment.txt, stages.tar.gz (each stage's
report, junit.xml and log) and SHA256SUMS (the manifest of the other seven). Work files
live outside OUT (``--work``, default /tmp/conformance-campaign) and carry over to the next
call on the same machine: a second call runs only what the first did not, and its OUT
holds both calls' results.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from conformance.cli import campaign_run
from conformance.cli.campaign_run import FINAL, Interrupted, Runner, StageResult
from conformance.cli.campaign_stages import (
    DRY_WINDOW_S,
    MIN_WINDOW_S,
    NOT_IN_CAMPAIGN,
    ROOT,
    STAGES,
    Stage,
)
from conformance.harness.deps import CUTE_ENV
from conformance.report import campaign_summary

T0_ENV = "CONFORMANCE_CAMPAIGN_T0"  # epoch seconds at which the deadline's clock started
FINISH_MARGIN_S = 12  # kept before the deadline for the merge, the README and the manifest
DEFAULT_WORK = Path("/tmp/conformance-campaign")
OUT_FILES = ("README.md", "report.json", "summary.md", "report.html", "benchmark.json",
             "environment.txt", "stages.tar.gz", "SHA256SUMS")
FILE_LIMIT = 15 * 2**20  # the device tool brings back files of up to 16 MiB


def checkout_id() -> str:
    """The code that ran: a digest of the suite's Python files (a copy has no .git)."""
    h = hashlib.sha256()
    for folder in ("conformance", "impls", "benchmarks", "oracles"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            h.update(path.relative_to(ROOT).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


PROBE = """
import importlib, platform
print('python', platform.python_version())
import torch
print('torch', torch.__version__, 'cuda', torch.version.cuda, 'hip', torch.version.hip,
      'available', torch.cuda.is_available())
for m in ('triton', 'numpy', 'cutlass.cute', 'flash_attn.cute'):
    try:
        mod = importlib.import_module(m)
        where = getattr(mod, '__file__', None)
        print(m, getattr(mod, '__version__', 'present') if where else 'absent: empty namespace',
              where or '')
    except Exception as e:
        print(m, 'absent:', type(e).__name__, str(e).splitlines()[0][:160] if str(e) else '')
"""


def environment(dry_run: bool) -> tuple[str, str | None]:
    """(environment.txt, None when cutlass.cute imports, else why not)."""
    lines = [f"campaign: {'dry run on the CPU' if dry_run else 'GPU'}",
             f"date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}"]
    if shutil.which("nvidia-smi"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,"
                            "memory.total", "--format=csv"], capture_output=True, text=True,
                           check=False, timeout=30)
        lines.append(q.stdout.strip() or q.stderr.strip())
    try:
        out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                             check=False, cwd=ROOT, timeout=120)
        text, err = out.stdout.strip(), out.stderr.strip()[-500:]
    except subprocess.TimeoutExpired:
        text, err = "", "the environment probe took over 120 s"
    cute = next((line for line in text.splitlines() if line.startswith("cutlass.cute ")), "")
    why = None if cute and "absent" not in cute else (cute.partition(" ")[2] or err
                                                      or "cutlass.cute: not probed")
    given = os.environ.get(CUTE_ENV)  # the suite's own answer, handed down (or a test's)
    if given and given != "ok":
        why = f"{CUTE_ENV}={given}"
    return "\n".join([*lines, text, err]).strip() + "\n", why


class Campaign:
    def __init__(self, out: Path, work: Path, dry_run: bool, deadline_s: float,
                 only: list[str] | None = None, dry_window_s: float = DRY_WINDOW_S) -> None:
        self.out, self.work, self.dry_run, self.only = out, work, dry_run, only
        self.dry_window_s = dry_window_s
        self.started = time.monotonic()
        # the clock starts where ci/gpu-campaign.sh started (its unpacking counts)
        t0 = float(os.environ.get(T0_ENV) or time.time())
        self.started -= max(0.0, time.time() - t0)
        self.deadline = self.started + deadline_s
        self.deadline_s = deadline_s
        self.checkout = checkout_id()
        self.call, self.results = campaign_run.load_state(work, self.checkout)
        self.cute_why: str | None = None
        self.running: str | None = None
        self.ended: str | None = None  # None while running; how it ended
        self.problems: list[str] = []  # found by the last full publish

    # -- the stages ---------------------------------------------------------------------
    def stages(self) -> list[Stage]:
        return [s for s in STAGES if not self.only or s.name in self.only]

    def pending(self, stage: Stage) -> bool:
        done = self.results.get(stage.name)
        return done is None or done.status not in FINAL

    def left(self) -> float:
        return self.deadline - time.monotonic() - FINISH_MARGIN_S

    def run(self, runner: Runner) -> None:
        for name in OUT_FILES:  # a reused OUT must not show an earlier campaign's files
            (self.out / name).unlink(missing_ok=True)
        env, self.cute_why = environment(self.dry_run)
        (self.out / "environment.txt").write_text(env)
        self.publish()
        for stage in self.stages():
            if not self.pending(stage):
                continue
            res = StageResult(stage.name, 0, stage.purpose, call=self.call)
            minimum = DRY_WINDOW_S if self.dry_run else MIN_WINDOW_S
            window = self.dry_window_s if self.dry_run else stage.window_s
            window = min(window, self.left() - stage.startup_s)
            if stage.needs_cute and self.cute_why is not None:
                res.status = "waiting for the CuTe DSL"
                res.why = f"cutlass.cute does not import in this call: {self.cute_why}"
            elif window < minimum:
                res.status = "not run"
                res.why = (f"{max(0.0, self.left()):.0f} s left before the deadline: under "
                           f"{stage.startup_s} s of start-up + {minimum} s of tests")
            else:
                self.running = stage.name
                self.publish(full=False)
                cap = min(self.left(), stage.wall_cap(window))
                try:
                    res = campaign_run.run_stage(runner, stage, self.work, window, cap,
                                                 self.dry_run, self.call)
                except Interrupted:
                    self.results[stage.name] = campaign_run.interrupted(
                        stage, self.work, window, self.call)
                    raise
                if res.status == "killed at its cap" and cap < stage.wall_cap(window):
                    res.status = "cut at the deadline"  # not final: a later call reruns it
                self.running = None
            self.results[stage.name] = res
            campaign_run.save_state(self.work, self.checkout, self.call, self.results)
            print(f"[{time.monotonic() - self.started:6.1f} s] {stage.name}: {res.status} "
                  f"({res.wall_s:.1f} s; window {res.window_s:.0f} s) {res.why}", flush=True)
            self.publish()

    # -- OUT --------------------------------------------------------------------------------
    def publish(self, full: bool = True) -> None:
        """Rewrite OUT from what the work folder holds now: after a stage everything; as
        one starts, the README (which says it is running) and the manifest only."""
        if full:
            self.problems = self.merge()
            self.benchmark()
            self.tarball(self.problems)
        readme = campaign_summary.render(self.summary_state(), self.out, self.problems)
        (self.out / "README.md").write_text(readme)
        self.manifest()

    def summary_state(self) -> campaign_summary.State:
        ordered = [self.results[s.name] for s in self.stages() if s.name in self.results]
        return campaign_summary.State(
            dry_run=self.dry_run, call=self.call, results=ordered,
            planned=[s.name for s in self.stages() if s.name not in self.results],
            running=self.running, ended=self.ended, deadline_s=self.deadline_s,
            wall_s=time.monotonic() - self.started, cute_why=self.cute_why,
            work=str(self.work), not_in_campaign=NOT_IN_CAMPAIGN)

    def merge(self) -> list[str]:
        from conformance.report.merge import MergeError, merge_dirs

        dirs = [Path(r.report) for r in self.results.values()
                if r.report and not r.report.endswith(".json")
                and (Path(r.report) / "report.json").is_file()]
        if not dirs:
            return []
        merged = self.work / ".merged"
        shutil.rmtree(merged, ignore_errors=True)
        try:
            merge_dirs(dirs, merged, allow_partial=True)
        except MergeError as exc:
            return [f"merge refused: {exc}"]
        problems = []
        for name in ("report.json", "summary.md", "report.html"):
            src = merged / name
            if src.is_file() and src.stat().st_size > FILE_LIMIT:
                problems.append(f"{name} is {src.stat().st_size / 2**20:.1f} MiB, over the "
                                "device tool's 16 MiB: it is in stages.tar.gz only")
                (self.out / name).unlink(missing_ok=True)
            elif src.is_file():
                shutil.copy(src, self.out / name)
        return problems

    def benchmark(self) -> None:
        runs = {}
        for r in self.results.values():
            if r.report and r.report.endswith(".json") and Path(r.report).is_file():
                try:
                    runs[r.name] = json.loads(Path(r.report).read_text())
                except ValueError:  # cut mid-write: the next refresh has it whole
                    continue
        if runs:
            rows = [{**row, "stage": name} for name, run in runs.items()
                    for row in run.get("results") or []]
            payload = {"stages": runs, "results": rows}
            (self.out / "benchmark.json").write_text(json.dumps(payload, indent=1) + "\n")

    def tarball(self, problems: list[str]) -> None:
        """Every stage's folder and log; junit.xml files left out if that is over 15 MiB."""
        path = self.out / "stages.tar.gz"

        def no_junit(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
            return None if info.name.endswith("junit.xml") else info

        for skip_junit in (False, True):
            with tarfile.open(path, "w:gz") as tar:
                for item in sorted(self.work.iterdir()):
                    if not item.name.startswith("."):
                        tar.add(item, arcname=f"stages/{item.name}",
                                filter=no_junit if skip_junit else None)
            if path.stat().st_size <= FILE_LIMIT:
                if skip_junit:
                    problems.append("stages.tar.gz leaves out the stages' junit.xml (over "
                                    "15 MiB with them)")
                return

    def manifest(self) -> None:
        from conformance.report.manifest import write_manifest

        write_manifest(self.out)  # SHA256SUMS of the other seven


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m conformance.cli.campaign",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="results folder (at most eight files)")
    ap.add_argument("--dry-run", action="store_true", help="rehearse on the CPU")
    ap.add_argument("--deadline", type=float, default=None, metavar="S",
                    help="seconds from the start by which everything, the README included, "
                         "is written (default 520; dry run 240)")
    ap.add_argument("--work", type=Path, default=None,
                    help=f"work folder, kept across calls (default {DEFAULT_WORK}; for "
                         "--dry-run a fresh one, removed at the end)")
    ap.add_argument("--fresh", action="store_true", help="forget earlier calls' results")
    ap.add_argument("--dry-window", type=float, default=DRY_WINDOW_S, metavar="S",
                    help=f"the dry run's test window per stage (default {DRY_WINDOW_S} s)")
    ap.add_argument("--only", default=None, help="comma list of stages: " +
                    ", ".join(s.name for s in STAGES))
    args = ap.parse_args(argv)
    only = args.only.split(",") if args.only else None
    unknown = set(only or ()) - {s.name for s in STAGES}
    deadline = args.deadline if args.deadline is not None else 240 if args.dry_run else 520
    if unknown:
        print(f"error: unknown stage(s) {', '.join(sorted(unknown))}", file=sys.stderr)
        return 4
    if not deadline > FINISH_MARGIN_S:
        print(f"error: --deadline must be over {FINISH_MARGIN_S} s", file=sys.stderr)
        return 4
    scratch = args.work is None and args.dry_run  # a rehearsal starts afresh, leaves nothing
    work = (Path(tempfile.mkdtemp(prefix="campaign-dry-")) if scratch
            else args.work or DEFAULT_WORK).resolve()
    out = args.out.resolve()
    if work == out or out in work.parents:
        print("error: --work must be outside OUT (OUT comes back as at most eight files)",
              file=sys.stderr)
        return 4
    if args.fresh:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    campaign = Campaign(out, work, args.dry_run, deadline, only, args.dry_window)
    runner = Runner()
    try:
        campaign.run(runner)
        campaign.ended = "finished"
    except Interrupted as exc:
        campaign.ended = f"interrupted by {exc}"
    finally:
        campaign.running = None
        campaign.ended = campaign.ended or "stopped by an error in the campaign itself"
        campaign_run.save_state(work, campaign.checkout, campaign.call, campaign.results)
        campaign.publish()
    if scratch:
        shutil.rmtree(work, ignore_errors=True)
    results = list(campaign.results.values())
    bad = [r for r in results if r.status in ("error", "killed at its cap")
           or (r.status == "tests failed" and args.dry_run)]
    print(f"campaign results in {out} ({len(results)} stages, {len(bad)} not clean; "
          f"{campaign.ended})")
    return 1 if bad or campaign.ended != "finished" else 0


if __name__ == "__main__":
    sys.exit(main())
