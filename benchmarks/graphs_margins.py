"""Margin study of the graphs area's eager check: the error-ratio rule (conformance/areas/graphs/
checks.py) over many seeds, per workload and dtype, on this machine's CPU eager kernels.

    python benchmarks/graphs_margins.py [--seeds 60] [--steps 4]

Prints, per workload and dtype, the two tensors with the largest measured/bound ratio over
all seeds (a ratio near 1 would mean false alarms under fresh seeds).
"""

from __future__ import annotations

import argparse

import torch

from conformance.areas.graphs.catalogue import WORKLOADS
from conformance.areas.graphs.checks import OracleJudge, step_errors
from conformance.harness.compare import Measurement
from conformance.harness.tensors import exact_numpy


class _Worst:
    def __init__(self) -> None:
        self.worst: dict[str, float] = {}

    def require(self, m: Measurement) -> Measurement:
        name = m.name.split(": ", 1)[1]
        self.worst[name] = max(self.worst.get(name, 0.0), m.ratio)
        return m


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=60)
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    device = torch.device("cpu")
    for name, spec in WORKLOADS.items():
        if "streams" in spec.needs:
            continue  # needs a device with streams
        for dt in spec.dtypes:
            dtype, worst = getattr(torch, dt), _Worst()
            for seed in range(args.seeds):
                w = spec.build(device, dtype, seed)
                judge = OracleJudge(dtype, "eager")
                for k in range(1, args.steps + 1):
                    values = w.step_inputs(k)
                    w.load_inputs(values)
                    before = [exact_numpy(t) for t in w.state]
                    out = w.fn(*w.inputs)
                    judge.add(k, step_errors(spec.oracle, w, dtype, before, values, out))
                judge.judge(worst)
            top = sorted(worst.worst.items(), key=lambda kv: -kv[1])[:2]
            print(f"{name:13s} {dt:9s} " + ", ".join(f"{k}: {v:.3f}" for k, v in top),
                  flush=True)


if __name__ == "__main__":
    main()
