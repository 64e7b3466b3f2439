"""Time each sampler's powered goodness-of-fit check at its sample size, and state the
smallest parameter error it detects with probability 0.99.

    python benchmarks/samplers.py [--dtype float32] [--repeat 3] [--out FILE.md]

The check is ``conformance.areas.samplers.checks.goodness_of_fit`` as the suite runs it (draw on
the CPU, support, omnibus tests, targeted tests), timed end to end, best of ``--repeat``.
"Detectable error" is the relative parameter error (location in units of the scale) the
targeted test detects with power 0.99 at the per-check level ALPHA.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from conformance.areas.samplers.checks import Family, draw, fmt_of, goodness_of_fit
from conformance.areas.samplers.data import SPECS
from conformance.harness.record import Record
from conformance.stats.gof import ALPHA, FORMATS
from impls import samplers
from oracles.samplers import detectable, oracle


def detectable_errors(method: str, params: tuple, n: int, fmt_name: str) -> str:
    fmt = FORMATS.get(fmt_name) if fmt_name in ("float16", "bfloat16") else None
    z = sps.norm.isf(ALPHA / 2) + sps.norm.isf(0.01)
    best: dict[str, float] = {}
    for kind, _test, shift, sd in detectable(method, params, fmt):
        if abs(shift) > 0:
            eps = 0.01 * z * sd / (abs(shift) * n ** 0.5)  # linear in the error
            best[kind] = min(best.get(kind, 1.0), eps)
    return ", ".join(f"{k} {100 * v:.2f} %" for k, v in best.items())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    rows = []
    for name, spec in SPECS.items():
        params = tuple(int(p) for p in spec.main) if name == "random" else spec.main
        times = []
        for rep in range(args.repeat + 1):  # the first run fills the oracle caches
            rec = Record(nodeid=f"bench::{name}", area=spec.area, impl="torch", device="cpu",
                         dtype=args.dtype, repro_args=[])
            t0 = time.perf_counter()
            x = draw(getattr(samplers, name), (spec.n,), dtype, torch.device("cpu"), params,
                     rep, rec)
            from conformance.areas.samplers.checks import to_numpy

            fam = Family(rec, 6)
            goodness_of_fit(fam, oracle(spec.method, spec.main), to_numpy(x), fmt_of(dtype))
            if rep:
                times.append(time.perf_counter() - t0)
        rows.append((f"{spec.method}{params}", spec.n, min(times), statistics.median(times),
                     len(fam.results), detectable_errors(spec.method, spec.main, spec.n,
                                                         args.dtype)))
    head = (f"Sampler goodness-of-fit checks, {args.dtype}, CPU: {platform.processor() or '?'} "
            f"({os.cpu_count()} cores, torch threads {torch.get_num_threads()}), torch "
            f"{torch.__version__}; per-check level {ALPHA:.3g}; best / median of {args.repeat}")
    lines = [head, "", "| distribution | n | seconds (best) | seconds (median) | stat. checks "
             "| detectable error (power 0.99) |", "|---|---|---|---|---|---|"]
    for dist, n, best, med, k, det in rows:
        lines.append(f"| `{dist}` | {n:,} | {best:.2f} | {med:.2f} | {k} | {det} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
