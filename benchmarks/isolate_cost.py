"""The cost of crash isolation (conformance.processes.isolate) on this machine: a cold start (the
first case: a fresh interpreter, the torch import, the handshake), a warm trivial case
(median over N), and the first case after a retired child (its replacement started in the
background). Writes docs/results/isolate-cost-<date>.json and .md:

    python benchmarks/isolate_cost.py [--cases 200] [--device cpu]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "tests"))

from conformance.processes.isolate import run_isolated, shutdown  # noqa: E402

BUDGET_MS = 50.0  # the budget for a warm isolated case's overhead
TRIVIAL = "operator:add"


def _today() -> str:
    try:
        return subprocess.run(["date", "+%F"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return datetime.date.today().isoformat()


def _timed(*args: object, **kwargs: object) -> tuple[float, object]:
    start = time.perf_counter()
    out = run_isolated(*args, **kwargs)
    return time.perf_counter() - start, out


def measure(cases: int, device: str) -> dict:
    cold, first = _timed(TRIVIAL, 1, 2, device=device)
    assert first.kind == "returned" and first.value == 3, first.describe()
    warm = []
    for i in range(cases):
        seconds, out = _timed(TRIVIAL, i, 1, device=device)
        assert out.pid == first.pid and out.value == i + 1, out.describe()
        warm.append(seconds)
    inproc = []
    import operator

    for i in range(cases):
        start = time.perf_counter()
        operator.add(i, 1)
        inproc.append(time.perf_counter() - start)
    after_retire = []
    for _ in range(3):
        crash = run_isolated("planted.crashers:abort", device=device)
        assert crash.retired, crash.describe()
        seconds, out = _timed(TRIVIAL, 1, 1, device=device)
        assert out.kind == "returned", out.describe()
        after_retire.append(seconds)
    shutdown()
    ms = sorted(1e3 * s for s in warm)
    return {
        "device": device,
        "cases": cases,
        "cold_start_s": cold,
        "warm_median_ms": statistics.median(ms),
        "warm_p90_ms": ms[int(0.9 * (len(ms) - 1))],
        "warm_max_ms": ms[-1],
        "inprocess_median_ms": 1e3 * statistics.median(inproc),
        "after_retire_s": after_retire,
        "budget_warm_ms": BUDGET_MS,
        "within_budget": statistics.median(ms) <= BUDGET_MS,
        "python": platform.python_version(),
        "torch": __import__("torch").__version__,
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
    }


def markdown(result: dict, command: str, date: str) -> str:
    verdict = "within" if result["within_budget"] else "OVER"
    after = ", ".join(f"{s:.2f}" for s in result["after_retire_s"])
    return f"""# Crash isolation cost ({date})

`conformance.processes.isolate.run_isolated` on {result['device']}, torch {result['torch']},
Python {result['python']}, {result['cpu_count']} CPU cores ({result['platform']}).

| measure | value |
|---|---|
| cold start (first case: interpreter, torch import, handshake) | {result['cold_start_s']:.2f} s |
| warm trivial case, median of {result['cases']} | {result['warm_median_ms']:.3f} ms |
| warm trivial case, p90 / max | {result['warm_p90_ms']:.3f} / {result['warm_max_ms']:.3f} ms |
| the same call in process, median | {result['inprocess_median_ms']:.4f} ms |
| first case after a retired child (SIGABRT), 3 times | {after} s |

The issue's budget for a warm isolated case is {result['budget_warm_ms']:.0f} ms of
overhead: {verdict} it. A case right after a retired child waits for the replacement's
start-up (begun in the background at the retirement): up to a cold start.

Command: `{command}`
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=HERE / "docs" / "results")
    opts = parser.parse_args()
    result = measure(opts.cases, opts.device)
    date = _today()
    command = "python benchmarks/isolate_cost.py" + (
        f" --cases {opts.cases}" if opts.cases != 200 else "") + (
        f" --device {opts.device}" if opts.device != "cpu" else "")
    result["command"], result["date"] = command, date
    opts.out.mkdir(parents=True, exist_ok=True)
    stem = opts.out / f"isolate-cost-{date}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(result, command, date))
    print(json.dumps(result, indent=1))
    print(f"wrote {stem}.json and {stem}.md")
    return 0 if result["within_budget"] else 1


if __name__ == "__main__":
    sys.exit(main())
