"""Benchmark: the float64 attention oracle (forward + backward) against torch's float64
math SDPA (forward + backward) on the same CPU. Target: the oracle within 2x.

    python benchmarks/attention_oracle.py [--batch 2 --heads 8 --seqlen 1024 --dim 64]

Prints one JSON line: both times (best of --repeat) and their ratio.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from oracles import attention as oracle


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seqlen", type=int, default=1024)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--causal", action="store_true", help="causal mask (default: none)")
    args = ap.parse_args()
    shape = (args.batch, args.heads, args.seqlen, args.dim)
    rng = np.random.default_rng(0)
    q, k, v, d_out = (rng.standard_normal(shape) for _ in range(4))
    mask = np.tril(np.ones((args.seqlen, args.seqlen), bool)) if args.causal else None

    def run_oracle() -> None:
        fwd = oracle.forward(q, k, v, mask=mask)
        oracle.backward(q, k, v, d_out, fwd)

    tq, tk, tv = (torch.from_numpy(x).requires_grad_(True) for x in (q, k, v))
    tdo = torch.from_numpy(d_out)

    def run_torch() -> None:
        with sdpa_kernel(SDPBackend.MATH):
            out = F.scaled_dot_product_attention(tq, tk, tv, is_causal=args.causal)
        torch.autograd.grad(out, (tq, tk, tv), tdo)

    t_oracle = _best(run_oracle, args.repeat)
    t_torch = _best(run_torch, args.repeat)
    print(json.dumps({"shape": shape, "mask": "causal" if args.causal else "none",
                      "oracle_s": round(t_oracle, 3), "torch_math_sdpa_s": round(t_torch, 3),
                      "ratio": round(t_oracle / t_torch, 2),
                      "torch_threads": torch.get_num_threads()}))


if __name__ == "__main__":
    main()
