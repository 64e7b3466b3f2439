"""The cost of the rank pool (conformance.processes.ranks) on this machine: a pool start (W fresh
interpreters, the torch import, the FileStore rendezvous, gloo's connections) and a warm
collective case on every rank (median and p90 over N), for W = 2, 3, 4; plus one eager
all_reduce case of the collectives area (forward and backward). Writes
docs/results/ranks-cost-<date>.json and .md:

    python benchmarks/ranks_cost.py [--cases 100] [--backend gloo] [--device cpu]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from conformance.areas.collectives.catalogue import build  # noqa: E402
from conformance.processes.ranks import run_ranks, shutdown  # noqa: E402

SUM = "tests.planted.rank_cases:rank_sum"
EAGER = "conformance.areas.collectives.cases:eager"


def _ms(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"median_ms": 1e3 * statistics.median(ordered),
            "p90_ms": 1e3 * ordered[int(0.9 * (len(ordered) - 1))]}


def measure(world: int, cases: int, backend: str, device: str) -> dict[str, object]:
    start = time.monotonic()
    first = run_ranks(SUM, world=world, backend=backend, device=device, timeout=60)
    cold = time.monotonic() - start
    assert first.ok, first.describe()
    warm = []
    for _ in range(cases):
        t = time.monotonic()
        out = run_ranks(SUM, world=world, backend=backend, device=device)
        warm.append(time.monotonic() - t)
        assert out.ok, out.describe()
    case = build("all_reduce", world, "float32", np.random.default_rng(0), rows=3, cols=4)
    payload = case.payload("impls.collectives:all_reduce")
    area = []
    for _ in range(cases):
        t = time.monotonic()
        out = run_ranks(EAGER, payload, world=world, backend=backend, device=device)
        area.append(time.monotonic() - t)
        assert out.ok, out.describe()
    return {"world": world, "pool_start_s": cold, "pool_start_reported_s":
            first.info.get("start_seconds"), "trivial_case": _ms(warm),
            "all_reduce_case": _ms(area)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--backend", default="gloo")
    parser.add_argument("--device", default="cpu")
    opts = parser.parse_args()
    import torch

    rows = [measure(w, opts.cases, opts.backend, opts.device) for w in (2, 3, 4)]
    shutdown()
    result = {"date": datetime.date.today().isoformat(), "torch": torch.__version__,
              "python": platform.python_version(), "machine": platform.machine(),
              "backend": opts.backend, "device": opts.device, "cases": opts.cases,
              "rows": rows}
    out = HERE / "docs" / "results" / f"ranks-cost-{result['date']}"
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"# Rank pool cost, {result['date']}", "",
             f"`python benchmarks/ranks_cost.py --cases {opts.cases}`: torch {torch.__version__}, "
             f"{opts.backend} on {opts.device}, Python {result['python']}, this 2-core machine, "
             "nothing else running.", "",
             "| W | pool start (s) | trivial case median / p90 (ms) | "
             "all_reduce area case median / p90 (ms) |", "|---|---|---|---|"]
    for r in rows:
        t, a = r["trivial_case"], r["all_reduce_case"]
        lines.append(f"| {r['world']} | {r['pool_start_s']:.2f} | {t['median_ms']:.2f} / "
                     f"{t['p90_ms']:.2f} | {a['median_ms']:.2f} / {a['p90_ms']:.2f} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
