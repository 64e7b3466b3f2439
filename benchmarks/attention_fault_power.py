"""How hard each planted attention fault fails: run it through the attention area (no -x)
and report the share of its tests that fail and the ratios (error / bound) of the failing
checks. Run on two checkouts to compare rules (the loss of power, if any, shows):

    python benchmarks/attention_fault_power.py                  # this checkout
    python benchmarks/attention_fault_power.py --root /tmp/old  # another one
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
CATALOGUE = ["-k", "catalogue"]
TRITON = ["-k", "forward_lse_catalogue and float32"]
FAULTS = {
    "attention_faults:wrong_scale": CATALOGUE,
    "attention_faults:lse_in_log2": CATALOGUE,
    "attention_faults:causal_top_left": CATALOGUE,
    "attention_faults:mask_after_softmax": CATALOGUE,
    "attention_faults:gqa_head_modulo": CATALOGUE,
    "attention_faults:tiled_no_rescale": CATALOGUE,
    "attention_faults:tf32_scores": CATALOGUE,
    "attention_faults:correct_dense": CATALOGUE,
    "attention_faults:tiled_correct": CATALOGUE,
    "triton_faults:no_rescale": TRITON,
    "triton_faults:off_by_one_key": TRITON,
    "triton_faults:drops_last_partial_block": TRITON,
    "triton_faults:lse_zero_on_masked_rows": TRITON,
}


def measure(root: Path, spec: str, scope: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pytest", "conformance/areas/attention", "-n", "0", "-q",
               "-p", "no:cacheprovider", "--no-builtins", f"--impl=attention=planted.{spec}",
               "--report", tmp, *scope]
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True,
                              env={**_env(), "PYTHONPATH": f"{root / 'tests'}:{root}"})
        if not (Path(tmp) / "report.json").exists():
            raise SystemExit(f"{spec}: no report\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
        data = json.loads((Path(tmp) / "report.json").read_text())
    ran = [r for r in data["results"] if r["outcome"] in ("passed", "failed")]
    failed = [r for r in ran if r["outcome"] == "failed"]
    ratios = [float(c["margin"]) for r in failed for c in r["checks"]
              if c.get("failures") and c.get("margin") is not None]  # "inf" comes as text
    worst = [float(r["worst_margin"]) for r in ran
             if r["outcome"] == "passed" and r["worst_margin"] is not None]
    return {"spec": spec, "ran": len(ran), "failed": len(failed),
            "median_failing_ratio": statistics.median(ratios) if ratios else None,
            "min_failing_ratio": min(ratios) if ratios else None,
            "max_passing_margin": max(worst) if worst else None}


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g}"


def _env() -> dict:
    import os
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=HERE)
    p.add_argument("--json", type=Path)
    p.add_argument("--specs", nargs="*", help="only these faults")
    args = p.parse_args()
    rows = []
    print("| fault | tests ran | failed | median failing ratio | min failing ratio |"
          " worst passing margin |\n|---|---|---|---|---|---|")
    for spec, scope in FAULTS.items():
        if args.specs and spec not in args.specs:
            continue
        if not (args.root / "tests/planted" / (spec.split(":")[0] + ".py")).exists():
            continue
        row = measure(args.root, spec, scope)
        rows.append(row)
        print(f"| {spec} | {row['ran']} | {row['failed']} | {fmt(row['median_failing_ratio'])} "
              f"| {fmt(row['min_failing_ratio'])} | {fmt(row['max_passing_margin'])} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
