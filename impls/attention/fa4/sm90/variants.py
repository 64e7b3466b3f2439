"""The compile-time variants of the sm90 kernels and a compile check that needs no GPU.

``python -m impls.attention.fa4.sm90.variants --table`` compiles every variant for sm_90a
(forward, and the backward where there is one) and writes docs/results/fa4-sm90-compile.md;
``--table --merge --only NAME ...`` compiles only those and merges their rows into the table.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from impls.attention.fa4 import ptxas_log
from impls.attention.fa4.catalogue_map import COVER_PAIRS, COVER_SHAPES
from impls.attention.fa4.sm90.common import MASKS, SCORE_MODS, Variant

DTYPES = ("float16", "bfloat16")
# D = Dv = 64, 128: the full product (48 variants).
FULL: list[Variant] = [
    Variant(dtype, d, mask, mod)
    for dtype, d, mask, mod in itertools.product(DTYPES, (64, 128), MASKS, SCORE_MODS)
]
# The other shapes, to bound compile time: a covering set with every mask and every score_mod
# at each shape and dtype (8 variants per shape).
COVER: list[Variant] = [
    Variant(dtype, d, mask, mod, dv)
    for (d, dv), dtype, (mask, mod) in itertools.product(COVER_SHAPES, DTYPES, COVER_PAIRS)
]
VARIANTS: list[Variant] = FULL + COVER  # 72: every variant compile-checked
BY_NAME: dict[str, Variant] = {v.name: v for v in VARIANTS}


def parse(name: str) -> Variant:
    """A compile-checked variant by name ('bfloat16-d192v128-causal-softcap'); KeyError if it
    is not one of VARIANTS, ValueError if the name is malformed."""
    variant = Variant.parse(name)
    if variant.name not in BY_NAME:
        raise KeyError(f"{name!r} is not a compiled sm90 variant")
    return variant
KERNELS = ("fwd", "bwd")
# remarks{{ptx}} makes the DSL print ptxas -v ("N bytes spill stores, ...") on stderr; the kept
# artefacts go to a temporary --dump-dir, not the working directory.
COMPILE_OPTIONS = "--gpu-arch {arch} --keep-ptx --keep-cubin --dump-dir {dump} remarks{{ptx}}"


def fake_args(variant: Variant, kernel: str = "fwd") -> tuple[Any, ...]:
    """Fake tensors (dynamic B, H, S; static D; 16-byte aligned rows) and scalars."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_tensor
    from cutlass.runtime import make_fake_stream

    dt, (d, dv) = variant.cutlass_dtype, variant.shape

    def qkv(d: int = d) -> Any:
        shape = (cute.sym_int32(), cute.sym_int32(), cute.sym_int32(), d)
        stride = (*tuple(cute.sym_int64(divisibility=8) for _ in range(3)), 1)
        return make_fake_tensor(dt, shape, stride, assumed_align=16)

    def rows(dtype: Any, rank: int) -> Any:
        shape = tuple(cute.sym_int32() for _ in range(rank))
        stride = (*tuple(cute.sym_int64() for _ in range(rank - 1)), 1)
        return make_fake_tensor(dtype, shape, stride, assumed_align=4)

    alibi = rows(cutlass.Float32, 1) if variant.score_mod == "alibi" else None
    docs = (rows(cutlass.Int32, 1), rows(cutlass.Int32, 1)) if variant.mask == "document" \
        else (None, None)
    scalars = (cutlass.Float32(1.0), cutlass.Float32(1.0), cutlass.Int32(1),
               cutlass.Float32(1.0))
    if kernel == "fwd":  # q, k, v, o, lse
        tensors = (qkv(), qkv(), qkv(dv), qkv(dv), rows(cutlass.Float32, 3))
    else:  # q, k, v, do, l2, delta, dq, dk, dv (fp32, per query head)
        tensors = (qkv(), qkv(), qkv(dv), qkv(dv), rows(cutlass.Float32, 3),
                   rows(cutlass.Float32, 3), rows(cutlass.Float32, 4),
                   rows(cutlass.Float32, 4), rows(cutlass.Float32, 4))
    return (*tensors, *scalars, alibi, *docs, make_fake_stream())


def make_kernel(variant: Variant, kernel: str) -> Any:
    if kernel == "fwd":
        from impls.attention.fa4.sm90.fwd import FwdSm90
        return FwdSm90(variant)
    from impls.attention.fa4.sm90.bwd import BwdSm90
    return BwdSm90(variant)


def compile_variant(name: str, arch: str = "sm_90a", kernel: str = "fwd",
                    return_compiled: bool = False) -> dict[str, Any]:
    """Compile one variant for ``arch`` and read the resources from the cubin."""
    import cutlass.cute as cute

    from impls.attention.fa4 import cubin_info

    variant = BY_NAME[name]
    obj = make_kernel(variant, kernel)
    args = fake_args(variant, kernel)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as dump, ptxas_log.capture_stderr() as err:
        compiled = cute.compile(obj, *args, options=COMPILE_OPTIONS.format(arch=arch, dump=dump))
        seconds = time.perf_counter() - start
        cubin = compiled.__cubin__  # read while the dump directory exists
        ptx = compiled.__ptx__ if return_compiled else None
    ptxas = "".join(err)
    spills = ptxas_log.spills(ptxas)
    ptxas_regs = ptxas_log.registers(ptxas)
    kernels = cubin_info.kernel_resources(cubin)
    main = max(kernels.values(), key=lambda k: k["registers"]) if kernels else {}
    result: dict[str, Any] = {
        "name": name, "kernel": kernel, "arch": arch, "seconds": round(seconds, 2),
        "cubin_bytes": len(cubin),
        "registers": main.get("registers"),
        "static_shared_memory_bytes": main.get("static_shared_bytes"),
        "dynamic_shared_memory_bytes": obj.smem_bytes,
        "shared_memory_bytes": (main.get("static_shared_bytes") or 0) + obj.smem_bytes,
        # ptxas -v when it printed (bytes, summed over kernels), else the cubin's derivation
        "spill_stores": sum(x[0] for x in spills) if spills else main.get("spill_stores"),
        "spill_loads": sum(x[1] for x in spills) if spills else main.get("spill_loads"),
        "spill_source": "ptxas -v" if spills else "cubin (no local memory)"
        if main.get("spill_stores") == 0 else "not available",
        "ptxas_registers": max(ptxas_regs) if ptxas_regs else None,
        "max_threads": main.get("max_threads"),
        "kernels": kernels,
    }
    if return_compiled:
        result["compiled"], result["ptx"] = compiled, ptx
    return result


def _has_bwd() -> bool:
    return (Path(__file__).parent / "bwd.py").exists()


HEADER = """\
# FA4-style sm90 kernels: compile check (sm_90a, no GPU)

Generated by `python -m impls.attention.fa4.sm90.variants --table` on a 2-core CPU machine
with nvidia-cutlass-dsl 4.8 (its bundled PTX compiler), no GPU and no CUDA toolkit. Compiled
only: never run on a GPU.

Variants: D = Dv in {64, 128}, every mask and score_mod; D = Dv = 96, D = Dv = 192 and
(D, Dv) = (192, 128) (named d192v128), the (mask, score_mod) pairs none-none,
causal-softcap, document-alibi and sliding_window-none. Budgets per shape:
`impls/attention/fa4/sm90/README.md`.

* registers: EIATTR_REGCOUNT from the cubin (`impls/attention/fa4/cubin_info.py`), the
  larger of the kernel's kernels (bwd: dK/dV and dQ), equal to ptxas -v. Forward: the launch
  allocation of 384 threads (168); the warpgroups re-balance with setmaxnreg (producer 40,
  consumers 232 at D = 64; 32 and 240 at the other shapes). Backward: no setmaxnreg.
* smem: the dynamic shared memory the launch requests plus the cubin's static
  .nv.shared.<kernel> section (1024 bytes, reserved by the DSL).
* spills: ptxas -v, bytes of spill stores / loads (all kernels of the variant).
* compile s: wall time of `cute.compile` (tracing, MLIR, ptxas) on a machine shared with other
  jobs: indicative only.

| variant | kernel | registers | smem bytes | spill st/ld | cubin KB | compile s |
|---|---|---|---|---|---|---|"""


def write_table(path: Path, names: list[str], kernels: tuple[str, ...],
                merge: bool = False) -> list[dict[str, Any]]:
    """Compile ``names`` and write the table; with ``merge`` keep the rows of the existing table
    for the variants not compiled now (rows in VARIANTS order, summary over all rows)."""
    rows = []
    for name in names:
        for kernel in kernels:
            try:
                r = compile_variant(name, kernel=kernel)
            except Exception as exc:  # reported in the table
                r = {"name": name, "kernel": kernel, "error": f"{type(exc).__name__}: {exc}"}
            rows.append(r)
            print(_row(r), flush=True)
    by_key = {}
    if merge and path.exists():
        by_key = {(c[0], c[1]): line for line in path.read_text().splitlines()
                  if (c := _cells(line))}
    by_key.update({(r["name"], r["kernel"]): _row(r) for r in rows})
    order = [(v.name, k) for v in VARIANTS for k in KERNELS]
    table = [by_key[key] for key in order if key in by_key]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join([*HEADER.splitlines(), *table, "", summary(table)]) + "\n")
    return rows


def _cells(line: str) -> list[str] | None:
    """The cells of a table row of a known variant, else None."""
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    return cells if len(cells) == 7 and cells[0] in BY_NAME else None


def summary(lines: list[str]) -> str:
    """One line over the table rows: kernels compiled, seconds, max registers, spills."""
    rows = [c for c in map(_cells, lines) if c]
    ok = [c for c in rows if not c[2].startswith("error")]
    spilling = [f"{c[0]} {c[1]}" for c in ok if c[4] not in ("0/0", "n/a")]
    total = sum(float(c[6]) for c in ok)
    return (f"{len(ok)} of {len(rows)} kernels compiled in {total:.0f} s in all; max registers "
            f"{max((int(c[2]) for c in ok), default=0)}; spills: "
            f"{', '.join(spilling) if spilling else 'none'}.")


def _row(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"| {r['name']} | {r['kernel']} | error: {r['error'][:120]} | | | | |"
    spills = ("n/a" if r["spill_stores"] is None
              else f"{r['spill_stores']}/{r['spill_loads']}")
    return (f"| {r['name']} | {r['kernel']} | {r['registers']} | {r['shared_memory_bytes']} | "
            f"{spills} | {r['cubin_bytes'] / 1024:.0f} | {r['seconds']:.1f} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--table", action="store_true", help="compile and write the table")
    ap.add_argument("--merge", action="store_true",
                    help="with --table: keep the table's rows of the variants not compiled now")
    ap.add_argument("--out", default="docs/results/fa4-sm90-compile.md")
    ap.add_argument("--only", nargs="*", help="variant names (default: all)")
    ap.add_argument("--kernel", choices=("fwd", "bwd", "both"), default="both")
    args = ap.parse_args(argv)
    names = args.only or [v.name for v in VARIANTS]
    kernels = KERNELS if args.kernel == "both" else (args.kernel,)
    if not _has_bwd():
        kernels = tuple(k for k in kernels if k != "bwd")
    if args.table:
        rows = write_table(Path(args.out), names, kernels, merge=args.merge)
        return int(any("error" in r for r in rows))
    for name in names:
        for kernel in kernels:
            print(_row(compile_variant(name, kernel=kernel)), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_90a")
    sys.exit(main())
