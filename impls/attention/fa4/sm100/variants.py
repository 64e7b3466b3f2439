"""Compile-time variants of the sm100 forward and a compile check that needs no GPU.

A variant is (dtype, head dim, mask, score_mod); GQA ratio, sequence lengths, batch, heads,
window, softcap, ALiBi slopes and document ids are runtime arguments.
``python -m impls.attention.fa4.sm100.variants --table`` compiles all of them for sm_100a and
writes docs/results/fa4-sm100-compile.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from impls.attention.fa4 import ptxas_log

DTYPES = ("float16", "bfloat16")
HEAD_DIMS = (64, 128)
MASKS = ("none", "causal", "sliding_window", "document")
SCORE_MODS = ("none", "softcap", "alibi")
VARIANTS: list[str] = [f"{dt}-d{d}-{m}-{s}" for dt, d, m, s in
                       itertools.product(DTYPES, HEAD_DIMS, MASKS, SCORE_MODS)]
# remarks{ptx}: ptxas -v on stderr; artefacts go to a temporary --dump-dir, not the cwd
OPTIONS = "--gpu-arch {arch} --keep-ptx --keep-cubin --dump-dir {dump} remarks{{ptx}}"


def parse(name: str) -> tuple[str, int, str, str]:
    """'float16-d128-causal-softcap' -> ('float16', 128, 'causal', 'softcap')."""
    dt, d, rest = name.split("-", 2)
    mask = next(m for m in sorted(MASKS, key=len, reverse=True) if rest.startswith(m + "-"))
    mod = rest[len(mask) + 1:]
    if dt not in DTYPES or int(d[1:]) not in HEAD_DIMS or mod not in SCORE_MODS:
        raise ValueError(f"unknown variant {name!r}")
    return dt, int(d[1:]), mask, mod


def make_kernel(name: str) -> Any:
    import cutlass

    from impls.attention.fa4.sm100.fwd import Fa4Sm100Forward

    dt, d, mask, mod = parse(name)
    return Fa4Sm100Forward(cutlass.Float16 if dt == "float16" else cutlass.BFloat16, d, mask,
                           mod)


def fake_args(name: str) -> tuple[Any, ...]:
    """Fake (B, H, S, D) tensors with dynamic B/H/S, 16-byte aligned rows; fp32 lse (B, H, S);
    fp32 slopes (H,) and int32 document ids (S,) where the variant uses them."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_tensor
    from cutlass.runtime import make_fake_stream

    dt, d, mask, mod = parse(name)
    dtype = cutlass.Float16 if dt == "float16" else cutlass.BFloat16

    def bhsd() -> Any:
        shape = (cute.sym_int32(), cute.sym_int32(), cute.sym_int32(), d)
        stride = (*(cute.sym_int64(divisibility=8) for _ in range(3)), 1)
        return make_fake_tensor(dtype, shape, stride, assumed_align=16)

    def vec(dtype: Any, rank: int) -> Any:
        shape = tuple(cute.sym_int32() for _ in range(rank))
        stride = (*(cute.sym_int64() for _ in range(rank - 1)), 1)
        return make_fake_tensor(dtype, shape, stride, assumed_align=4)

    slopes = vec(cutlass.Float32, 1) if mod == "alibi" else None
    docs = (vec(cutlass.Int32, 1), vec(cutlass.Int32, 1)) if mask == "document" else (None, None)
    return (bhsd(), bhsd(), bhsd(), bhsd(), vec(cutlass.Float32, 3), slopes, *docs,
            cutlass.Float32(1.0), cutlass.Float32(1.0), cutlass.Float32(1.0), cutlass.Int32(1),
            make_fake_stream())


def compile_variant(name: str, arch: str = "sm_100a") -> dict[str, Any]:
    """Compile one variant; resources from the cubin (cubin_info) and ptxas -v where printed.
    Unavailable numbers are "n/a", never guessed."""
    import cutlass.cute as cute

    from impls.attention.fa4 import cubin_info

    kernel = make_kernel(name)
    args = fake_args(name)
    with tempfile.TemporaryDirectory() as dump, ptxas_log.capture_stderr() as err:
        start = time.perf_counter()
        compiled = cute.compile(kernel, *args, options=OPTIONS.format(arch=arch, dump=dump))
        seconds = time.perf_counter() - start
        cubin = compiled.__cubin__
    log = "".join(err)
    spills = ptxas_log.spills(log)
    kernels = cubin_info.kernel_resources(cubin)
    main = max(kernels.values(), key=lambda k: k.get("registers") or 0) if kernels else {}
    static_smem = main.get("static_shared_bytes") or 0
    dyn_smem = getattr(kernel, "smem_bytes", None)

    def known(value: Any) -> Any:
        return "n/a" if value is None else value

    return {
        "name": name, "arch": arch, "seconds": round(seconds, 2), "cubin_bytes": len(cubin),
        "registers": known(main.get("registers")),
        "shared_memory_bytes": "n/a" if dyn_smem is None else static_smem + dyn_smem,
        "spill_stores": sum(s[0] for s in spills) if spills else known(main.get("spill_stores")),
        "spill_loads": sum(s[1] for s in spills) if spills else known(main.get("spill_loads")),
        "ptxas_registers": max(ptxas_log.registers(log), default="n/a"),
    }


def _row(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"| {r['name']} | error: {r['error'][:150]} | | | | |"
    return (f"| {r['name']} | {r['registers']} | {r['shared_memory_bytes']} | "
            f"{r['spill_stores']}/{r['spill_loads']} | {r['cubin_bytes'] / 1024:.0f} | "
            f"{r['seconds']:.1f} |")


def _compile_in_subprocess(name: str) -> dict[str, Any]:
    """One variant per process: memory stays bounded over the 48 compiles."""
    proc = subprocess.run([sys.executable, "-m", __spec__.name, "--json", name],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "CUTE_DSL_ARCH": "sm_100a"})
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode == 0 and lines:
        return json.loads(lines[-1])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"name": name, "error": f"exit {proc.returncode}: {tail}"}


def write_table(path: Path, names: list[str]) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        r = _compile_in_subprocess(name)
        rows.append(r)
        print(_row(r), flush=True)
    lines = [
        "# FA4-style sm100 forward: compile check (sm_100a, no GPU)",
        "",
        "Generated by `python -m impls.attention.fa4.sm100.variants --table` on a 2-core CPU",
        "machine with nvidia-cutlass-dsl (its bundled PTX compiler), no GPU and no CUDA toolkit.",
        "registers: the cubin's EIATTR_REGCOUNT (launch allocation; the warpgroups re-balance",
        "with setmaxnreg: softmax 240, correction 96, others 32). smem: dynamic shared memory the",
        "launch requests plus static. spills: ptxas -v (bytes). Compiled only: never run on a GPU.",
        "",
        "| variant | registers | smem bytes | spill st/ld (bytes) | cubin KB | compile s |",
        "|---|---|---|---|---|---|",
    ]
    lines += [_row(r) for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--table", action="store_true", help="compile all, write the table")
    ap.add_argument("--out", default="docs/results/fa4-sm100-compile.md")
    ap.add_argument("--only", nargs="*", help="variant names (default: all)")
    ap.add_argument("--json", metavar="NAME", help="compile one variant, print its JSON")
    args = ap.parse_args(argv)
    if args.json:
        print(json.dumps(compile_variant(args.json)), flush=True)
        return 0
    names = args.only or VARIANTS
    if args.table:
        return int(any("error" in r for r in write_table(Path(args.out), names)))
    for name in names:
        print(_row(compile_variant(name)), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_100a")
    sys.exit(main())
