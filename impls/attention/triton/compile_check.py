"""Compile our Triton attention kernels to cubin for NVIDIA targets, without a GPU.

The interpreter that runs the kernels on CPU accepts code a GPU compile rejects (it found
non-constexpr globals once), so CI also compiles every kernel, every catalogue mod and both
16-bit dtypes for sm_90 and sm_100 with Triton's bundled ptxas. Run it in a process
without TRITON_INTERPRET (the kernels must be JIT functions, not interpreted ones):

    python -m impls.attention.triton.compile_check [--arch 90 100]

Prints one JSON line per compiled variant (kernel, arch, dtype, head dim, mods, shared
memory bytes, seconds) and exits non-zero if any variant fails to compile.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time
from typing import Any

if os.environ.get("TRITON_INTERPRET") == "1":
    sys.exit("compile_check: unset TRITON_INTERPRET (it must compile, not interpret)")

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from impls.attention.triton import mods
from impls.attention.triton.bwd import attn_bwd_dkdv, attn_bwd_dq, attn_bwd_preprocess
from impls.attention.triton.fwd import attn_fwd

FLOAT_PTRS = {"Q", "K", "V", "OUT", "DO", "DQ", "DK", "DV_OUT"}
F32_PTRS = {"LSE", "DELTA", "AUXF"}
I32_PTRS = {"KV_CNT", "KV_IDX", "Q_CNT", "Q_IDX", "AUXI"}
SCORE = {"none": (mods.no_score_mod, mods.unit_grad), "alibi": (mods.alibi, mods.unit_grad),
         "softcap": (mods.softcap, mods.softcap_grad), "rel_bias": (mods.rel_bias, mods.unit_grad),
         "bias_lookup": (mods.bias_lookup, mods.unit_grad),
         "head_scale": (mods.head_scale, mods.head_scale_grad)}
MASK = {"none": mods.no_mask, "causal_tl": mods.causal_tl, "causal_br": mods.causal_br,
        "sliding_window": mods.sliding_window, "prefix_lm": mods.prefix_lm,
        "document": mods.document, "block_sparse": mods.block_sparse}


def compile_kernel(kernel: Any, arch: int, dtype: str, consts: dict[str, Any]) -> dict[str, Any]:
    params = list(inspect.signature(kernel.fn).parameters)
    sig = {}
    for p in params:
        if p in consts:
            sig[p] = "constexpr"
        elif p in FLOAT_PTRS:
            sig[p] = "*" + dtype
        elif p in F32_PTRS:
            sig[p] = "*fp32"
        elif p in I32_PTRS:
            sig[p] = "*i32"
        else:
            sig[p] = "fp32" if p == "sm_scale" else "i32"
    src = ASTSource(fn=kernel, signature=sig,
                    constexprs={(params.index(k),): v for k, v in consts.items() if k in params})
    start = time.perf_counter()
    compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32))
    return {"shared_bytes": int(compiled.metadata.shared), "has_cubin": "cubin" in compiled.asm,
            "seconds": round(time.perf_counter() - start, 2)}


def variants(arch: int) -> list[tuple[Any, str, int, str, str]]:
    """(kernel, dtype, head dim, score mod, mask): every mod and mask once forward (fp16,
    D = 64), bf16 at D = 128, and the backward kernels on the most demanding pair in both
    dtypes; on other archs the bf16 variants only."""
    out = [(attn_fwd, "fp16", 64, s, "causal_br") for s in SCORE]
    out += [(attn_fwd, "fp16", 64, "none", m) for m in MASK if m != "causal_br"]
    out += [(attn_fwd, "bf16", 128, "softcap", m) for m in ("causal_br", "block_sparse")]
    for kernel in (attn_bwd_preprocess, attn_bwd_dkdv, attn_bwd_dq):
        out += [(kernel, dt, 128, "softcap", "block_sparse") for dt in ("fp16", "bf16")]
    if arch != 90:
        out = [v for v in out if v[1] == "bf16" and v[4] in ("block_sparse", "causal_br")]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description="compile the Triton attention kernels to cubin")
    ap.add_argument("--arch", type=int, nargs="+", default=[90, 100])
    args = ap.parse_args()
    failures = 0
    for arch in args.arch:
        for kernel, dtype, d, score, mask in variants(arch):
            block = 64 if d <= 128 else 32
            consts = {"D": d, "DV": d, "BLOCK_D": d, "BLOCK_DV": d, "BLOCK_M": block,
                      "BLOCK_N": block, "SCORE_MOD": SCORE[score][0], "SCORE_GRAD": SCORE[score][1],
                      "MASK_MOD": MASK[mask], "PRECISION": "ieee", "FAULT": 0}
            row = {"kernel": kernel.fn.__name__, "arch": f"sm_{arch}", "dtype": dtype,
                   "head_dim": d, "score_mod": score, "mask": mask}
            try:
                row.update(compile_kernel(kernel, arch, dtype, consts))
                row["ok"] = True
            except Exception as exc:  # report every failing variant, then exit non-zero
                failures += 1
                row.update(ok=False, error=" ".join(str(exc).split())[:400])
            print(json.dumps(row), flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
