"""The GPU campaign: every GPU check and benchmark of every area in one prepared run that fits
a lent GPU's window (8 minutes of wall time on one H200), and its CPU rehearsal.

    python -m conformance.cli.campaign OUT              # on the GPU host (ci/gpu-campaign.sh)
    python -m conformance.cli.campaign OUT --dry-run    # on a CPU: the same stages, rehearsed

Stages run in order of value, each in its own process group under its own budget: pytest
gets ``--time-budget`` (the budget less a margin for start-up and the report), so a stage
that runs long stops starting tests, reports the rest not-run (time budget) and still writes
its report; a stage that overruns its whole budget is killed and recorded as such. What
earlier stages produced is never lost. Afterwards the stage reports are merged into one
(``conformance.report.merge``) and OUT receives at most eight files (the device tool brings back
eight): README.md (what ran, failed, was not run for time; the benchmark ratios against their
targets), report.json, summary.md, report.html, junit.xml, benchmark.json, environment.txt
and stages.tar.gz (every stage's own report and log).

The dry run replaces the GPU by the CPU: every pytest stage runs its selection on the CPU with
a budget of a few seconds (collection, the time-budget path, the reports and the merge are
exercised; almost every test is not run, for time), the benchmark runs at a tiny size on the
CPU, and the summary is written as for a real run. Packing the CuTe DSL stack is rehearsed by
``ci/gpu-carry.sh --check``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from conformance.report import campaign_summary

ROOT = Path(__file__).resolve().parents[2]
SUITE = Path(__file__).resolve().parents[1] / "areas"
START_MARGIN_S = 25  # of a pytest stage's budget: interpreter, torch and collection, report


@dataclass(frozen=True)
class Stage:
    """One step of the campaign: a pytest selection of the suite, or the benchmark."""

    name: str
    budget_s: int
    purpose: str
    paths: tuple[str, ...] = ()  # suite folders (pytest stages)
    select: str | None = None  # -k
    workers: int = 4  # xdist workers on the GPU host (16 cores, one GPU)
    bench: bool = False


STAGES: tuple[Stage, ...] = (
    Stage("toolchain", 25, "CUDA, arch list, driver, BLAS against the matrix's requirements",
          ("toolchain",), workers=0),
    Stage("attention", 140, "attention on cuda, correctness: every SDPA and FlexAttention "
          "backend, flash-attn-4, our Triton kernels and our FA4 kernels (sm90 runs on an "
          "H200; sm100 reports missing hardware)", ("attention",), workers=8),
    Stage("benchmark", 90, "attention throughput, bf16, S = 4096, D = 128, causal and not, "
          "forward and backward", bench=True),
    Stage("isolation", 45, "device-side assertions and out-of-bounds indexing (crash-prone "
          "cases in child processes)", ("device_assert", "indexing")),
    Stage("graphs", 30, "CUDA graphs, graphed callables, reduce-overhead against eager",
          ("graphs",)),
    Stage("export", 45, "torch.export, .pt2, AOTInductor on cuda", ("export",), workers=2),
    Stage("samplers", 30, "the in-place samplers' goodness of fit on cuda", ("samplers",)),
    Stage("ops", 30, "TopK, GEMM, grid_sample, special.erfcx on cuda",
          ("topk", "gemm", "grid_sample", "special")),
)
NOT_IN_CAMPAIGN = {
    "collectives": "nccl needs one GPU per rank; a lent machine has one GPU (gloo on the "
                   "CPU runs in every CPU qualification)",
}
BENCH_IMPLS = ("sdpa.flash", "flex.compiled", "flex.flash", "fa4.flash_attn_func", "triton_fa",
               "fa4.sm90", "fa4.sm100")


@dataclass
class StageResult:
    name: str
    budget_s: int
    purpose: str
    status: str = "not run"  # ok, tests failed, killed at budget, error, not run
    wall_s: float = 0.0
    returncode: int | None = None
    command: list[str] = field(default_factory=list)
    report: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    skipped_for_time: int = 0
    log_tail: str = ""


def pytest_command(stage: Stage, report: Path, dry_run: bool) -> list[str]:
    soft = 3 if dry_run else max(5, stage.budget_s - START_MARGIN_S)
    cmd = [sys.executable, "-m", "pytest", *(str(SUITE / p) for p in stage.paths),
           "-p", "no:cacheprovider", "-q", f"--device={'cpu' if dry_run else 'cuda'}",
           f"--report={report}", f"--time-budget={soft}"]
    if stage.select:
        cmd += ["-k", stage.select]
    if dry_run:  # on the CPU a GPU stage may by design test nothing (e.g. graphs)
        cmd.append("--allow-empty")
    workers = 0 if dry_run else stage.workers
    return cmd + (["-n", str(workers)] if workers else ["-p", "no:xdist"])


def bench_command(out: Path, budget_s: int, dry_run: bool) -> list[str]:
    script = str(ROOT / "benchmarks" / "attention_gpu.py")
    if dry_run:  # the harness at a tiny size on the CPU
        return [sys.executable, script, "--device", "cpu", "--seqlens", "128", "--head-dims",
                "64", "--impls", "flex.eager,sdpa.math", "--no-backward", "--iters", "10",
                "--time-budget", "20", "--out", str(out)]
    return [sys.executable, script, "--impls", ",".join(BENCH_IMPLS), "--seqlens", "4096",
            "--head-dims", "128", "--dtype", "bfloat16", "--causal", "both",
            "--time-budget", str(max(10, budget_s - 15)), "--out", str(out)]


def run_process(cmd: list[str], budget_s: float, log: Path) -> tuple[int | None, float]:
    """Run cmd in its own process group; kill the group at the budget. (returncode or None
    when killed, wall seconds)."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    start = time.monotonic()
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
        try:
            rc: int | None = proc.wait(timeout=budget_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    return rc, time.monotonic() - start


def run_stage(stage: Stage, work: Path, dry_run: bool) -> StageResult:
    res = StageResult(stage.name, stage.budget_s, stage.purpose)
    log = work / f"{stage.name}.log"
    budget = 60 if dry_run else stage.budget_s
    if stage.bench:
        out = work / "benchmark.json"
        res.command = bench_command(out, stage.budget_s, dry_run)
        res.report = str(out)
    else:
        report = work / stage.name
        res.command = pytest_command(stage, report, dry_run)
        res.report = str(report)
    rc, res.wall_s = run_process(res.command, budget, log)
    res.returncode = rc
    res.log_tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
    if rc is None:
        res.status = "killed at budget"
    elif stage.bench:
        res.status = "ok" if rc == 0 and Path(res.report).is_file() else "error"
    else:
        res.counts, res.skipped_for_time = _counts(Path(res.report))
        res.status = {0: "ok", 1: "tests failed", 2: "incomplete (not every test ran)"}.get(
            rc, "error") if res.counts else "error"
    return res


def _counts(report_dir: Path) -> tuple[dict[str, int], int]:
    path = report_dir / "report.json"
    if not path.is_file():
        return {}, 0
    data = json.loads(path.read_text())
    timed_out = sum(1 for r in data["results"] if r["outcome"] == "not-run"
                    and "time budget spent" in (r.get("reason") or ""))
    return dict(data["summary"]), timed_out


def environment(dry_run: bool) -> str:
    lines = [f"campaign: {'dry run on the CPU' if dry_run else 'GPU'}",
             f"date: {time.strftime('%Y-%m-%d %H:%M:%S %Z')}"]
    if shutil.which("nvidia-smi"):
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,"
                            "memory.total", "--format=csv"], capture_output=True, text=True,
                           check=False)
        lines.append(q.stdout.strip() or q.stderr.strip())
    probe = ("import torch, platform; print('python', platform.python_version()); "
             "print('torch', torch.__version__, 'cuda', torch.version.cuda, 'hip', "
             "torch.version.hip, 'available', torch.cuda.is_available())\n"
             "for m in ('triton', 'cutlass', 'flash_attn.cute', 'numpy'):\n"
             "    try:\n"
             "        mod = __import__(m, fromlist=['x']); print(m, getattr(mod, '__version__', "
             "'present'))\n"
             "    except Exception as e: print(m, 'absent:', type(e).__name__)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=False, cwd=ROOT)
    return "\n".join([*lines, out.stdout.strip(), out.stderr.strip()[-500:]]).strip() + "\n"


def merge(results: list[StageResult], out: Path) -> list[str]:
    """Merge the stage reports into OUT (report.json, summary.md, report.html, junit.xml)."""
    from conformance.report.merge import MergeError, merge_dirs

    dirs = [Path(r.report) for r in results
            if r.report and not r.report.endswith(".json") and
            (Path(r.report) / "report.json").is_file()]
    if not dirs:
        return ["no stage wrote a report: nothing merged"]
    merged = out / ".merged"
    try:
        merge_dirs(dirs, merged)
    except MergeError as exc:
        return [f"merge refused: {exc}"]
    for name in ("report.json", "summary.md", "report.html", "junit.xml"):
        if (merged / name).is_file():
            shutil.move(str(merged / name), out / name)
    shutil.rmtree(merged, ignore_errors=True)
    return []


def run(out: Path, dry_run: bool, only: list[str] | None = None,
        work: Path | None = None) -> list[StageResult]:
    out.mkdir(parents=True, exist_ok=True)
    work = work or out / ".work"
    work.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    (out / "environment.txt").write_text(environment(dry_run))
    results = []
    for stage in STAGES:
        if only and stage.name not in only:
            continue
        res = run_stage(stage, work, dry_run)
        results.append(res)
        print(f"[{time.monotonic() - started:6.1f} s] {stage.name}: {res.status} "
              f"({res.wall_s:.1f} s of {stage.budget_s} s)", flush=True)
        (work / "stages.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    problems = merge(results, out)
    bench = work / "benchmark.json"
    if bench.is_file():
        shutil.copy(bench, out / "benchmark.json")
    with tarfile.open(out / "stages.tar.gz", "w:gz") as tar:
        tar.add(work, arcname="stages")
    (out / "README.md").write_text(campaign_summary.render(
        results, out, dry_run, time.monotonic() - started, problems, NOT_IN_CAMPAIGN))
    if work == out / ".work":
        shutil.rmtree(work, ignore_errors=True)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m conformance.cli.campaign",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, help="results directory (at most eight files)")
    ap.add_argument("--dry-run", action="store_true", help="rehearse on the CPU")
    ap.add_argument("--only", default=None, help="comma list of stages: " +
                    ", ".join(s.name for s in STAGES))
    args = ap.parse_args(argv)
    only = args.only.split(",") if args.only else None
    unknown = set(only or ()) - {s.name for s in STAGES}
    if unknown:
        print(f"error: unknown stage(s) {', '.join(sorted(unknown))}", file=sys.stderr)
        return 4
    results = run(args.out, args.dry_run, only)
    bad = [r for r in results if r.status in ("error", "killed at budget")
           or (r.status == "tests failed" and args.dry_run)]
    print(f"campaign results in {args.out} ({len(results)} stages, {len(bad)} not clean)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
