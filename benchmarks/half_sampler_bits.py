"""How many random bits torch's CPU half-precision samplers use (torch < 2.12 defect).

Prints, per dtype: distinct values of uniform_() in [0, 1) against what the format holds,
the fraction of exact zeros from normal_(0, 1), the largest |z|, and NaNs from
normal_(0, 1e38). Usage: python benchmarks/half_sampler_bits.py [--n N] [--seed S]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch


def representable_in_unit(dtype: torch.dtype) -> int:
    """Values of the format in [0, 1): every bit pattern from +0 up to the one below 1."""
    one = torch.tensor(1.0, dtype=dtype).view(torch.int16).item()
    return int(one)  # patterns 0 .. one-1 are exactly the non-negative values below 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4_000_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, n = {args.n}, seed {args.seed}")
    print("| dtype | distinct uniform_ values in [0, 1) | the format has | normal_ exact zeros "
          "| normal_ max abs | NaN in normal_(0, 1e38) |")
    print("|---|---|---|---|---|---|")
    for dtype in (torch.float16, torch.bfloat16):
        g = torch.Generator().manual_seed(args.seed)
        u = torch.empty(args.n, dtype=dtype).uniform_(0, 1, generator=g)
        distinct = np.unique(u.float().numpy()).size
        z = torch.empty(args.n, dtype=dtype).normal_(0, 1, generator=g)
        zeros = int((z == 0).sum())
        big = torch.empty(args.n // 40, dtype=dtype).normal_(0, 1e38, generator=g)
        nans = int(torch.isnan(big).sum())
        print(f"| {str(dtype).removeprefix('torch.')} | {distinct} | "
              f"{representable_in_unit(dtype)} | {zeros} ({100 * zeros / args.n:.3f} %) | "
              f"{float(z.float().abs().max()):.4g} | {nans} of {big.numel()} |")


if __name__ == "__main__":
    main()
