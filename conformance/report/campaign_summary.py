"""The GPU campaign's README.md: what ran, what failed, what was not run for time, and the
benchmark ratios against the targets the project states for them."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

# (name, numerator impl, denominator impl, direction, low, high, where the target comes from)
TARGETS: tuple[tuple[str, str, str, str, float, float | None, str], ...] = (
    ("our Triton forward / sdpa.flash", "triton_fa", "sdpa.flash", "fwd", 0.8, None,
     "docs/guides/gpu-campaign.md"),
    ("our FA4 sm90 forward / flash-attn-4", "fa4.sm90", "fa4.flash_attn_func", "fwd", 0.9, None,
     "docs/guides/gpu-campaign.md"),
    ("our FA4 sm90 backward / flash-attn-4", "fa4.sm90", "fa4.flash_attn_func", "bwd", None,
     None, "reported, no target"),
    ("flex FLASH / flex TRITON forward", "flex.flash", "flex.compiled", "fwd", 1.2, 3.2,
     "the seed's claim for FlexAttention's FLASH backend"),
    ("flex FLASH / flex TRITON backward", "flex.flash", "flex.compiled", "bwd", 1.2, 3.2,
     "the seed's 1.2-3.2x claim"),
)
SHAPE = {"S": 4096, "D": 128}


def _row(rows: list[dict[str, Any]], impl: str, causal: bool) -> dict[str, Any] | None:
    return next((r for r in rows if r.get("impl") == impl and r.get("status") == "ok"
                 and r.get("S") == SHAPE["S"] and r.get("D") == SHAPE["D"]
                 and bool(r.get("causal")) == causal), None)


def ratios(bench: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target at S = 4096, D = 128, causal and not: the measured ratio of TFLOP/s (None
    where either side did not run) and whether it meets the target."""
    rows = bench.get("results") or []
    out = []
    for name, num, den, direction, low, high, source in TARGETS:
        for causal in (False, True):
            a, b = _row(rows, num, causal), _row(rows, den, causal)
            key = f"{direction}_tflops"
            value = (a[key] / b[key] if a and b and a.get(key) and b.get(key) else None)
            meets = None
            if value is not None and low is not None:
                meets = value >= low and (high is None or value <= high)
            out.append({"name": name, "causal": causal, "ratio": value, "low": low,
                        "high": high, "meets": meets, "source": source,
                        "missing": [i for i, r in ((num, a), (den, b)) if r is None]})
    return out


def _fmt(x: float | None) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3g}"


def _bench_section(out: Path) -> list[str]:
    path = out / "benchmark.json"
    if not path.is_file():
        return ["No benchmark results (the stage did not write benchmark.json)."]
    bench = json.loads(path.read_text())
    lines = ["| impl | S | D | causal | status | fwd TFLOP/s | bwd TFLOP/s | why not |",
             "|---|---|---|---|---|---|---|---|"]
    for r in bench.get("results") or []:
        lines.append(f"| {r.get('impl')} | {r.get('S')} | {r.get('D')} | {r.get('causal')} | "
                     f"{r.get('status')} | {_fmt(r.get('fwd_tflops'))} | "
                     f"{_fmt(r.get('bwd_tflops'))} | {(r.get('reason') or '')[:80]} |")
    lines += ["", "Ratios against the targets (TFLOP/s, bf16, S = 4096, D = 128):", "",
              "| ratio | causal | measured | target | meets | source |",
              "|---|---|---|---|---|---|"]
    for t in ratios(bench):
        target = ("-" if t["low"] is None else f">= {t['low']}" if t["high"] is None
                  else f"{t['low']}-{t['high']}")
        meets = ("not measured: " + ", ".join(t["missing"]) if t["ratio"] is None
                 else "-" if t["meets"] is None else "yes" if t["meets"] else "**no**")
        lines.append(f"| {t['name']} | {t['causal']} | {_fmt(t['ratio'])} | {target} | "
                     f"{meets} | {t['source']} |")
    return lines


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n", 1)[0][:160]


def _failures(out: Path, limit: int = 40) -> list[str]:
    path = out / "report.json"
    if not path.is_file():
        return []
    bad = [r for r in json.loads(path.read_text())["results"]
           if r["outcome"] in ("failed", "error", "unexpected-pass")]
    lines = [f"- `{r['nodeid']}`: {r['outcome']}: {_first_line(r.get('reason'))}"
             for r in bad[:limit]]
    if len(bad) > limit:
        lines.append(f"- ... and {len(bad) - limit} more (report.json)")
    return lines or ["None."]


def render(results: list[Any], out: Path, dry_run: bool, wall_s: float, problems: list[str],
           not_in_campaign: dict[str, str]) -> str:
    kind = "a dry run on the CPU (every GPU stage replaced by its CPU-runnable part)" \
        if dry_run else "a GPU run"
    lines = [f"# GPU campaign: {kind}", "",
             f"Wall time {wall_s:.0f} s for {len(results)} stages (the budgets add up to "
             f"{sum(r.budget_s for r in results)} s). The environment is in environment.txt; "
             "the merged report in report.json, summary.md, report.html and junit.xml; each "
             "stage's own report and log in stages.tar.gz.", "",
             "| stage | budget s | wall s | status | passed | failed | crashed / timed out "
             "| xfail | unsupported | skipped | not run | of them for time |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        c = r.counts
        broke = c.get("crashed", 0) + c.get("timed-out", 0) if c else "-"
        lines.append(f"| {r.name} | {r.budget_s} | {r.wall_s:.0f} | {r.status} | "
                     f"{c.get('passed', '-')} | {c.get('failed', '-')} | {broke} | "
                     f"{c.get('expected-fail', '-')} | {c.get('unsupported', '-')} | "
                     f"{c.get('skipped', '-')} | {c.get('not-run', '-')} | "
                     f"{r.skipped_for_time if c else '-'} |")
    lines += ["", "What each stage is for:", ""]
    lines += [f"- **{r.name}**: {r.purpose}" for r in results]
    lines += ["", "## Failures", "", *_failures(out), "", "## Benchmark", "",
              *_bench_section(out), "", "## Not in the campaign", ""]
    lines += [f"- {area}: {why}" for area, why in not_in_campaign.items()]
    for r in results:
        if r.status in ("error", "killed at budget"):
            lines += ["", f"## {r.name}: {r.status}", "", "```", r.log_tail, "```"]
    if problems:
        lines += ["", "## Problems", "", *[f"- {p}" for p in problems]]
    return "\n".join(lines) + "\n"
