"""A fresh-seed campaign: run the qualification (or one area) N times, each with a new
seed under a profile (``dev`` by default), and tabulate every failure with its reproduce
line, the time of each run and the tightest margin per area.

    python benchmarks/fresh_seeds.py --runs 10 --out docs/results/fresh-seeds.md
    python benchmarks/fresh_seeds.py --runs 20 --select conformance/areas/attention \
        --label attention

Seeds come from the OS (recorded in the table), or ``--seeds 1 2 3`` to replay. Each run
writes its report under ``--work`` (``report.json``: outcomes, margins, reproduce lines);
a JSONL line per run is appended to ``<out>.jsonl`` as it finishes, so an interrupted
campaign keeps what it measured. Extra pytest arguments follow ``--``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_once(seed: int, args: argparse.Namespace, extra: list[str]) -> dict:
    report = Path(args.work) / f"{args.label}-{seed}"
    cmd = [sys.executable, "-m", "pytest", *args.select, "-n", args.workers, "-q",
           "-p", "no:cacheprovider", f"--device={args.device}", f"--profile={args.profile}",
           f"--seed={seed}", "--report", str(report), *extra]
    start = time.monotonic()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.monotonic() - start
    data = json.loads((report / "report.json").read_text()) if (
        report / "report.json").exists() else None
    row = {"label": args.label, "seed": seed, "profile": args.profile, "wall_s": round(wall, 1),
           "exit": proc.returncode, "command": " ".join(cmd[1:]), "failures": [],
           "summary": None, "worst_margin": {}}
    if data is None:
        row["failures"].append({"nodeid": "(no report)", "detail": proc.stdout[-2000:] +
                                proc.stderr[-2000:], "reproduce": " ".join(cmd[1:])})
        return row
    row["summary"] = data["summary"]
    env = data.get("environment", {})
    row["environment"] = {k: env.get(k) for k in ("torch", "python", "cpu", "platform")}
    for res in data["results"]:
        margin = res.get("worst_margin")
        if margin is not None and res["outcome"] == "passed":
            key = f"{res['area']} {res['impl']}"
            row["worst_margin"][key] = max(row["worst_margin"].get(key, 0.0), margin)
        if res["outcome"] in ("failed", "error", "unexpected-pass"):
            failing = [c for c in res.get("checks", []) if c.get("failures")]
            detail = "; ".join(f"{c['name']}: ratio {c.get('margin')}, case {c.get('case')}"
                               for c in failing) or (res.get("reason") or "")[:300]
            row["failures"].append({"nodeid": res["nodeid"], "outcome": res["outcome"],
                                    "detail": detail, "reproduce": res["reproduce"]})
    return row


def table(rows: list[dict], title: str) -> str:
    envs = sorted({json.dumps(r.get("environment"), sort_keys=True) for r in rows
                   if r.get("environment")})
    lines = [f"# {title}", "", *(f"Environment: `{e}`" for e in envs), "",
             "Reproduce a run: `python -m pytest -n auto -q -p no:cacheprovider --device=cpu "
             "--profile=<profile> --seed=<seed> [<label's paths>]`.", "",
             "| label | seed | profile | wall (s) | passed | failed | errors | xfail | failures |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        s = r["summary"] or {}
        lines.append(f"| {r['label']} | {r['seed']} | {r['profile']} | {r['wall_s']} | "
                     f"{s.get('passed', '-')} | {s.get('failed', '-')} | {s.get('error', '-')} "
                     f"| {s.get('expected-fail', '-')} | {len(r['failures'])} |")
    fails = [(r, f) for r in rows for f in r["failures"]]
    lines += ["", f"## Failures ({len(fails)})", ""]
    for r, f in fails:
        lines += [f"- seed {r['seed']}: `{f['nodeid']}` {f.get('detail', '')}",
                  f"  reproduce: `{f['reproduce']}`"]
    margins: dict[str, float] = {}
    for r in rows:
        for key, m in r["worst_margin"].items():
            margins[key] = max(margins.get(key, 0.0), m)
    lines += ["", "## Tightest passing margin per implementation (over all runs)", "",
              "| area implementation | worst margin |", "|---|---|"]
    lines += [f"| {k} | {v:.3g} |" for k, v in sorted(margins.items())]
    total = sum(r["wall_s"] for r in rows)
    lines += ["", f"{len(rows)} runs, {total / 60:.1f} min in all, {len(fails)} failures.", ""]
    return "\n".join(lines)


NOTES = "## Notes"


def write_table(out: str) -> None:
    lines = Path(out + ".jsonl").read_text().splitlines()
    every = [json.loads(line) for line in lines if line.strip()]
    old = Path(out).read_text() if Path(out).exists() else ""
    notes = old[old.index(NOTES):] if NOTES in old else ""  # hand-written, kept
    Path(out).write_text(table(every, "Fresh-seed campaign") + ("\n" + notes if notes else ""))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--seeds", type=int, nargs="*", help="replay these seeds instead")
    p.add_argument("--select", nargs="*", default=[], help="pytest paths (default: the suite)")
    p.add_argument("--label", default="qualification")
    p.add_argument("--profile", default="dev", choices=["ci", "dev", "thorough"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--workers", default="auto")
    p.add_argument("--work", default=os.environ.get("TMPDIR", "/tmp") + "/fresh-seeds")
    p.add_argument("--out", default=None,
                   help="markdown table of every run recorded in <out>.jsonl (appended to)")
    p.add_argument("--table-only", action="store_true",
                   help="rewrite <out> from <out>.jsonl without running")
    args = p.parse_args(argv)
    if args.table_only:
        write_table(args.out)
        return 0
    seeds = args.seeds or [secrets.randbelow(2**31) for _ in range(args.runs)]
    rows = []
    for i, seed in enumerate(seeds, 1):
        row = run_once(seed, args, extra)
        rows.append(row)
        print(f"[{i}/{len(seeds)}] {args.label} seed {seed}: {row['wall_s']} s, "
              f"{len(row['failures'])} failures", flush=True)
        for f in row["failures"]:
            print(f"    {f['nodeid']}: {f.get('detail', '')}\n    {f['reproduce']}", flush=True)
        if args.out:
            with open(args.out + ".jsonl", "a") as fh:
                fh.write(json.dumps(row) + "\n")
    if args.out:
        write_table(args.out)
    print(table(rows, f"Fresh-seed campaign: {args.label}"))
    return 1 if any(r["failures"] for r in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())
