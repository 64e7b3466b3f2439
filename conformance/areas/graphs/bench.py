"""Replay against eager launch overhead, per catalogue workload (what graphs exist for).

    python -m conformance.areas.graphs.bench --device cuda [--impl impls.graphs:cuda_graph]
        [--iters 200] [--out bench.json]

For each workload: the median over 5 rounds of ``iters`` eager steps and of ``iters``
replays, each round timed from a device synchronize to a device synchronize; prints a table
and writes JSON (seconds per step, and eager / replay). A workload the runtime does not
declare, or whose capture fails, is listed with the reason instead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import torch

from conformance.areas.graphs import cases
from conformance.areas.graphs.catalogue import WORKLOADS
from conformance.harness.errors import ConfigError
from conformance.harness.registry import load_object

ROUNDS = 5


def _timed(step: Any, sync: Any, iters: int) -> float:
    times = []
    for _ in range(ROUNDS):
        sync()
        start = time.perf_counter()
        for _ in range(iters):
            step()
        sync()
        times.append((time.perf_counter() - start) / iters)
    return statistics.median(times)


def bench(spec: str, device: torch.device, iters: int) -> list[dict[str, Any]]:
    runtime = load_object(spec, "--impl")
    features = set(getattr(runtime, "conformance_features", None) or ())
    rows: list[dict[str, Any]] = []
    for name, w in WORKLOADS.items():
        missing = [f for f in w.needs if features and f not in features]
        if missing:
            rows.append({"workload": name, "skipped": f"runtime lacks {', '.join(missing)}"})
            continue
        g, e = w.build(device, torch.float32, 0), w.build(device, torch.float32, 0)
        try:
            graph, _ = cases.capture(runtime, g, e)
        except Exception as exc:
            rows.append({"workload": name, "skipped": f"capture failed: {type(exc).__name__}: "
                                                      f"{str(exc).splitlines()[0][:200]}"})
            continue
        e.load_inputs(g.step_inputs(1))

        def sync() -> None:
            cases.sync(runtime, device)

        eager = _timed(lambda: e.fn(*e.inputs), sync, iters)  # noqa: B023 - used at once
        replay = _timed(graph.replay, sync, iters)
        rows.append({"workload": name, "eager_s": eager, "replay_s": replay,
                     "eager_over_replay": eager / replay if replay > 0 else None})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m conformance.areas.graphs.bench")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--impl", default="impls.graphs:cuda_graph")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    try:
        device = torch.device(args.device)
        if args.iters < 1:
            raise ConfigError("--iters must be at least 1")
        rows = bench(args.impl, device, args.iters)
    except (ConfigError, RuntimeError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 4
    for r in rows:
        if "skipped" in r:
            print(f"{r['workload']:14s} skipped: {r['skipped']}")
        else:
            print(f"{r['workload']:14s} eager {r['eager_s'] * 1e6:9.1f} us  replay "
                  f"{r['replay_s'] * 1e6:9.1f} us  eager/replay {r['eager_over_replay']:.2f}")
    if args.out:
        meta = {"impl": args.impl, "device": str(device), "torch": torch.__version__,
                "iters": args.iters, "rounds": ROUNDS}
        with open(args.out, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
