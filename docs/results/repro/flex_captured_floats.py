"""Eager flex_attention with a score mod that captures a Python float, called with three
distinct values in one process (torch 2.15.0: fails from the second value on).

Exit 0: every call matches a float64 softmax reference; 1: a call raised or was wrong.
Needs torch only (CPU). Found by torch-conformance (test_distinct_captured_floats).
"""

import sys
import warnings

import torch
from torch.nn.attention.flex_attention import flex_attention


def softcap(cap: float):
    def score_mod(score, b, h, q_idx, kv_idx):
        return cap * torch.tanh(score / cap)
    return score_mod


def main() -> int:
    warnings.filterwarnings("ignore")
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 33, 16, dtype=torch.float64) for _ in range(3))
    failed = 0
    for cap in (5.0, 20.0, 50.0):
        s = (q @ k.transpose(-1, -2)) / 16 ** 0.5
        ref = torch.softmax(cap * torch.tanh(s / cap), dim=-1) @ v
        try:
            out = flex_attention(q, k, v, score_mod=softcap(cap))
        except Exception as exc:
            failed += 1
            print(f"cap {cap}: raised {type(exc).__name__}: {str(exc).splitlines()[0]}")
            continue
        err = float((out - ref).abs().max())
        failed += err > 1e-12
        print(f"cap {cap}: max error {err:.3g}")
    print(f"torch {torch.__version__}: {'FAIL' if failed else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
