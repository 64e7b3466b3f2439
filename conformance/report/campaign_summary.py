"""The GPU campaign's README.md: what ran, what failed, what did not run and why, and the
benchmark's rates (checked results only) against the targets the project states. Rewritten
after every stage, so a campaign cut short still says how far it got."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The project's performance targets (TFLOP/s ratios, bf16, S = 4096, D = 128, causal and
# not; docs/guides/gpu-campaign.md renders this table): (name, numerator, denominator,
# direction, at least). None: reported, no target. A miss is reported, not failed: these
# are performance claims, not conformance.
TARGETS: tuple[tuple[str, str, str, str, float | None], ...] = (
    ("our Triton forward / sdpa.flash", "triton_fa", "sdpa.flash", "fwd", 0.8),
    ("our Triton backward / sdpa.flash", "triton_fa", "sdpa.flash", "bwd", None),
    ("our FA4 sm90 forward / flash-attn-4", "fa4.sm90", "fa4.flash_attn_func", "fwd", 0.9),
    ("our FA4 sm90 backward / flash-attn-4", "fa4.sm90", "fa4.flash_attn_func", "bwd", None),
)
SHAPE = {"S": 4096, "D": 128}
PARTIAL = ("Time-budgeted stages are partial by design: tests run in collection order for "
           "the stage's window (counted from its first test), and those not started are "
           "not-run (time budget), so such a stage's verdict is INCOMPLETE, never PASS.")


@dataclass
class State:
    """What the campaign knows when it writes the README."""

    dry_run: bool
    call: int
    results: list[Any]  # campaign_run.StageResult, in stage order
    planned: list[str] = field(default_factory=list)  # not yet reached
    running: str | None = None
    ended: str | None = None  # None: still running
    deadline_s: float = 0.0
    wall_s: float = 0.0
    cute_why: str | None = None
    work: str = ""
    not_in_campaign: dict[str, str] = field(default_factory=dict)


def _row(rows: list[dict[str, Any]], impl: str, causal: bool) -> dict[str, Any] | None:
    return next((r for r in rows if r.get("impl") == impl and r.get("status") == "ok"
                 and r.get("S") == SHAPE["S"] and r.get("D") == SHAPE["D"]
                 and bool(r.get("causal")) == causal), None)


def _stands(row: dict[str, Any] | None, side: str) -> bool:
    return bool(row and row.get(f"{side}_tflops") and row.get(f"{side}_check") == "pass")


def ratios(bench: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target, causal and not: the ratio of TFLOP/s where both results passed the
    FlashAttention rule at that size (None otherwise, with why) and whether it meets."""
    rows = bench.get("results") or []
    out = []
    for name, num, den, side, low in TARGETS:
        for causal in (False, True):
            a, b = _row(rows, num, causal), _row(rows, den, causal)
            why = [f"{i} not measured" for i, r in ((num, a), (den, b))
                   if r is None or not r.get(f"{side}_tflops")]
            why += [f"{i}'s result {r.get(f'{side}_check') or 'not checked'}"[:120]
                    for i, r in ((num, a), (den, b))
                    if r is not None and r.get(f"{side}_tflops") and not _stands(r, side)]
            value = (a[f"{side}_tflops"] / b[f"{side}_tflops"]  # type: ignore[index]
                     if not why else None)
            meets = None if value is None or low is None else value >= low
            out.append({"name": name, "causal": causal, "ratio": value, "low": low,
                        "meets": meets, "why": why})
    return out


def _fmt(x: Any) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.3g}" if isinstance(x, float) else str(x)


def _bench_section(out: Path) -> list[str]:
    path = out / "benchmark.json"
    if not path.is_file():
        return ["No benchmark results yet."]
    bench = json.loads(path.read_text())
    lines = ["| stage | impl | S | D | causal | status | fwd TFLOP/s | % peak | fwd check | "
             "bwd TFLOP/s | % peak | bwd check | why not |", "|---" * 13 + "|"]
    for r in bench.get("results") or []:
        checks = [str(r.get(f"{s}_check") or "-")[:60]
                  + (f" ({r[f'{s}_margin']:.2g} of the bound)" if f"{s}_margin" in r else "")
                  for s in ("fwd", "bwd")]
        lines.append(
            f"| {r.get('stage')} | {r.get('impl')} | {r.get('S')} | {r.get('D')} | "
            f"{r.get('causal')} | {r.get('status')} | {_fmt(r.get('fwd_tflops'))} | "
            f"{_fmt(r.get('fwd_pct_peak'))} | {checks[0]} | {_fmt(r.get('bwd_tflops'))} | "
            f"{_fmt(r.get('bwd_pct_peak'))} | {checks[1]} | "
            f"{(r.get('reason') or r.get('bwd_reason') or '')[:80]} |")
    envs = [run.get("environment", {}) for run in (bench.get("stages") or {}).values()]
    env = envs[0] if envs else {}
    lines += ["", f"% peak: of {_fmt(env.get('peak_tflops'))} TFLOP/s "
              f"({env.get('peak_source', 'no peak known')}); a bf16 GEMM of 8192 ran at "
              f"{_fmt(env.get('gemm_tflops'))} TFLOP/s in the same run. FLOPs: 4 B H S^2 D "
              "forward, halved when causal; backward 2.5x forward.", "",
              f"Ratios against the targets (TFLOP/s, bf16, S = {SHAPE['S']}, "
              f"D = {SHAPE['D']}); a ratio is given only where both results passed the "
              "FlashAttention rule at that size:", "",
              "| ratio | causal | measured | target | meets |", "|---|---|---|---|---|"]
    for t in ratios(bench):
        target = "-" if t["low"] is None else f">= {t['low']}"
        meets = ("not given: " + "; ".join(t["why"]) if t["ratio"] is None
                 else "-" if t["meets"] is None else "yes" if t["meets"] else "**no**")
        lines.append(f"| {t['name']} | {t['causal']} | {_fmt(t['ratio'])} | {target} | "
                     f"{meets} |")
    return lines


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n", 1)[0][:160]


def _failures(out: Path, limit: int = 40) -> list[str]:
    path = out / "report.json"
    if not path.is_file():
        return ["No merged report yet."]
    bad = [r for r in json.loads(path.read_text())["results"]
           if r["outcome"] in ("failed", "error", "crashed", "timed-out", "unexpected-pass")]
    lines = [f"- `{r['nodeid']}`: {r['outcome']}: {_first_line(r.get('reason'))}"
             for r in bad[:limit]]
    if len(bad) > limit:
        lines.append(f"- ... and {len(bad) - limit} more (report.json)")
    return lines or ["None."]


def _status_line(state: State) -> str:
    if state.ended is None:
        doing = f"stage {state.running} is running" if state.running else "between stages"
        return (f"**In progress** ({doing}, {state.wall_s:.0f} s of the {state.deadline_s:.0f}"
                " s deadline): this file is rewritten after every stage; if it ends here, "
                "the campaign was killed from outside at this point.")
    return f"**{state.ended[0].upper() + state.ended[1:]}** after {state.wall_s:.0f} s " \
           f"(deadline {state.deadline_s:.0f} s)."


def render(state: State, out: Path, problems: list[str]) -> str:
    kind = ("a dry run on the CPU (every GPU stage replaced by its CPU-runnable part)"
            if state.dry_run else "a GPU run")
    cute = ("imports" if state.cute_why is None else f"does not import ({state.cute_why}); "
            "the stages that need it wait for a call that carries the bundle")
    lines = [f"# GPU campaign: {kind}", "", _status_line(state), "",
             f"Call {state.call} on this machine with this checkout (work folder "
             f"{state.work}: a later call runs only what is not done). CuTe DSL "
             f"(cutlass.cute): {cute}. The environment is in environment.txt; the stage "
             "reports merged in report.json, summary.md and report.html; every stage's "
             "report, junit.xml and log in stages.tar.gz; SHA256SUMS lists the others.", "",
             "| stage | call | window s | wall s | status | passed | failed | crashed / "
             "timed out | xfail | unsupported | skipped | not run | of them for time |",
             "|---" * 13 + "|"]
    for r in state.results:
        c = r.counts
        broke = c.get("crashed", 0) + c.get("timed-out", 0) if c else "-"
        lines.append(f"| {r.name} | {r.call} | {r.window_s:.0f} | {r.wall_s:.0f} | "
                     f"{r.status} | {c.get('passed', '-')} | {c.get('failed', '-')} | {broke} "
                     f"| {c.get('expected-fail', '-')} | {c.get('unsupported', '-')} | "
                     f"{c.get('skipped', '-')} | {c.get('not-run', '-')} | "
                     f"{r.skipped_for_time if c else '-'} |")
    for name in state.planned:
        now = "running" if name == state.running else "not reached"
        lines.append(f"| {name} | - | - | - | {now} | - | - | - | - | - | - | - | - |")
    lines += ["", PARTIAL, "", "What each stage is for, and why one did not run:", ""]
    lines += [f"- **{r.name}**: {r.purpose}" + (f" — *{r.status}: {r.why}*" if r.why else "")
              for r in state.results]
    lines += ["", "## Failures", "", *_failures(out), "", "## Benchmark", "",
              *_bench_section(out), "", "## Not in the campaign", ""]
    lines += [f"- {area}: {why}" for area, why in state.not_in_campaign.items()]
    for r in state.results:
        if r.status in ("error", "killed at its cap", "cut at the deadline", "interrupted"):
            lines += ["", f"## {r.name}: {r.status}", "", "```", r.log_tail, "```"]
    if problems:
        lines += ["", "## Problems", "", *[f"- {p}" for p in problems]]
    return "\n".join(lines) + "\n"
