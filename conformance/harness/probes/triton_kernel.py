"""A tiny kernel for the Triton interpreter probe: a loop with a run-time trip count, a
masked load and a store (the constructs that broke on triton 3.6 with numpy 2.4). Only
builtins: ``tl.zeros`` and friends are jit functions that need TRITON_INTERPRET=1 at
import time."""

import triton.language as tl


def loop_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    acc = tl.load(x_ptr + offs)
    for i in range(1, n):
        acc += tl.load(x_ptr + i * BLOCK + offs, mask=offs < BLOCK, other=0.0)
    tl.store(out_ptr + offs, acc)
