"""The GPU campaign's stages, in order of value, and the command each runs.

A pytest stage's window is test time: ``--time-budget`` counts from the stage's first test
(conformance/run/deadline.py), so the interpreter's start, xdist's workers and collection
are not charged to it. Tests run in collection order until the window closes; those not
started are not-run (time budget): a time-budgeted stage is partial by design and says so.
Each test also has a per-test timeout (the watchdog: a hung or deadlocked test becomes
timed-out, and its worker is replaced). A benchmark stage's window is its ``--time-budget``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "conformance" / "areas"
MIN_WINDOW_S = 20  # no stage runs with less test time than this (GPU)
DRY_WINDOW_S = 3  # the dry run's test window: the time-budget path, a few tests
# what the CuTe DSL stack's kernels are called in the attention test ids
CUTE_IMPLS = ("fa4.sm90", "fa4.flash_attn_func", "flex.flash", "fa4.sm100")


@dataclass(frozen=True)
class Stage:
    """One step: a pytest selection of the suite, or the attention benchmark."""

    name: str
    window_s: int  # test time (pytest) or the benchmark's time budget
    purpose: str
    paths: tuple[str, ...] = ()  # suite folders (pytest stages)
    select: str | None = None  # -k
    workers: int = 4  # xdist workers on the GPU host (16 cores, one GPU)
    bench: tuple[str, ...] = ()  # the benchmark's implementations (a benchmark stage)
    needs_cute: bool = False  # waits for a call where cutlass.cute imports
    test_timeout_s: int | None = None  # per test; None: the matrix's (attention: 300 s)
    startup_s: int = 40  # allowed for start-up and collection before the first test

    def wall_cap(self, window: float) -> float:
        """The longest the stage may take: start-up, its window, one last test started just
        before the window closed, and its report."""
        return self.startup_s + window + (self.test_timeout_s or 60) + 15


ATTENTION = ("attention",)
STAGES: tuple[Stage, ...] = (
    Stage("fa4_sm90", 100, "our FA4 sm90 kernels (CuTe DSL) against the float64 oracle: "
          "forward, lse, backward and the FA4 algorithm checks", ATTENTION,
          select="fa4.sm90", workers=4, needs_cute=True, test_timeout_s=120, startup_s=45),
    Stage("triton", 60, "our Triton FlashAttention kernels against the float64 oracle",
          ATTENTION, select="triton_fa", workers=8, test_timeout_s=90),
    Stage("bench_cute", 75, "throughput of our FA4 sm90 kernels against flash-attn-4 and "
          "sdpa.flash: bf16, S = 4096, D = 128, causal and not, forward and backward, every "
          "result checked against the oracle", bench=("sdpa.flash", "fa4.sm90",
                                                      "fa4.flash_attn_func"),
          needs_cute=True, startup_s=20),
    Stage("bench", 45, "throughput of our Triton kernels against sdpa.flash, as bench_cute",
          bench=("sdpa.flash", "triton_fa"), startup_s=20),
    Stage("toolchain", 20, "CUDA, arch list, driver, BLAS against the matrix's requirements",
          ("toolchain",), workers=0, startup_s=20),
    Stage("attention", 60, "SDPA (math, flash, efficient, cuDNN), FlexAttention (eager, "
          "compiled) and the FA4 numerics models against the float64 oracle", ATTENTION,
          select="not (" + " or ".join(("triton_fa", *CUTE_IMPLS)) + ")", workers=8,
          test_timeout_s=120),
    Stage("attention_cute", 45, "flash-attn-4, FlexAttention's FLASH backend, our FA4 sm100 "
          "kernels (report missing hardware on an H200)", ATTENTION,
          select=" or ".join(CUTE_IMPLS[1:]), workers=4, needs_cute=True, test_timeout_s=120),
    Stage("isolation", 30, "device-side assertions and out-of-bounds indexing (crash-prone "
          "cases in child processes)", ("device_assert", "indexing")),
    Stage("graphs", 20, "CUDA graphs, graphed callables, reduce-overhead against eager",
          ("graphs",)),
    Stage("export", 30, "torch.export, .pt2, AOTInductor on cuda", ("export",), workers=2),
    Stage("samplers", 20, "the in-place samplers' goodness of fit on cuda", ("samplers",)),
    Stage("ops", 25, "TopK, GEMM, grid_sample, special.erfcx on cuda",
          ("topk", "gemm", "grid_sample", "special")),
)
NOT_IN_CAMPAIGN = {
    "collectives": "nccl needs one GPU per rank; a lent machine has one GPU (gloo on the "
                   "CPU runs in every CPU qualification)",
}


def pytest_command(stage: Stage, report: Path, window: float, dry_run: bool) -> list[str]:
    cmd = [sys.executable, "-m", "pytest", *(str(SUITE / p) for p in stage.paths),
           "-p", "no:cacheprovider", "-q", f"--device={'cpu' if dry_run else 'cuda'}",
           f"--report={report}", f"--time-budget={window:g}"]
    if stage.select:
        cmd += ["-k", stage.select]
    if stage.test_timeout_s and not dry_run:
        cmd.append(f"--test-timeout={stage.test_timeout_s}")
    if dry_run:  # on the CPU a GPU stage may by design test nothing (e.g. graphs)
        cmd.append("--allow-empty")
    workers = 0 if dry_run else stage.workers
    return cmd + (["-n", str(workers)] if workers else ["-p", "no:xdist"])


def bench_command(stage: Stage, out: Path, window: float, dry_run: bool) -> list[str]:
    script = str(ROOT / "benchmarks" / "attention_gpu.py")
    if dry_run:  # the harness at a tiny size on the CPU, with its correctness gate
        return [sys.executable, script, "--device", "cpu", "--seqlens", "128", "--head-dims",
                "64", "--impls", "flex.eager,sdpa.math", "--iters", "10",
                "--time-budget", f"{window:g}", "--out", str(out)]
    return [sys.executable, script, "--impls", ",".join(stage.bench), "--seqlens", "4096",
            "--head-dims", "128", "--dtype", "bfloat16", "--causal", "both",
            "--time-budget", f"{window:g}", "--out", str(out)]
