"""Compile-time variants of the sm100 forward and a compile check that needs no GPU.

A variant is (dtype, head dims, mask, score_mod, schedule): ``float16-d128-causal-softcap``
(single tile, D = Dv), ``bfloat16-d192v128-causal-none`` (Dv != D) and a schedule suffix
``-persistent`` / ``-pingpong`` / ``-pingpong_persistent``. The 48 base variants are the full
product of dtype x D 64/128 x mask x score_mod; the others are a covering set (``NEW_GROUPS``
x dtype x ``COVER_PAIRS``: every mask and every score_mod per group and dtype). GQA ratio,
sequence lengths, batch, heads, window, softcap, ALiBi slopes, document ids and the SM count
(persistent grid) are runtime arguments.
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
from typing import Any, NamedTuple

from impls.attention.fa4 import ptxas_log
from impls.attention.fa4.catalogue_map import COVER_PAIRS

DTYPES = ("float16", "bfloat16")
HEAD_DIMS = (64, 128)
KERNELS = ("fwd", "bwd")
MASKS = ("none", "causal", "sliding_window", "document")
SCORE_MODS = ("none", "softcap", "alibi")
VARIANTS: list[str] = [f"{dt}-d{d}-{m}-{s}" for dt, d, m, s in
                       itertools.product(DTYPES, HEAD_DIMS, MASKS, SCORE_MODS)]
# The backward (Dv = D): the 48 base variants, then D = 96's covering set (dtype x COVER_PAIRS).
BWD_VARIANTS: tuple[str, ...] = (*VARIANTS, *(f"{dt}-d96-{m}-{s}" for dt, (m, s) in
                                              itertools.product(DTYPES, COVER_PAIRS)))
BWD_HEAD_DIMS = (64, 96, 128)  # the head dims with a backward kernel (bwd.HEAD_DIMS)
SCHEDULES = ("single", "persistent", "pingpong", "pingpong_persistent")
# (D, Dv) -> the schedules whose TMEM (512 columns) and shared memory (227 KB) hold it
# (README "Shapes and budgets").
FITS = {(64, 64): SCHEDULES, (96, 96): SCHEDULES, (128, 128): SCHEDULES,
        (192, 192): ("single", "persistent"), (192, 128): ("single", "persistent")}
# Compile-checked groups beyond the base 48: each new schedule at D = 128, each new shape in
# the single schedule and in its best schedule (the one the adapter prefers).
NEW_GROUPS = (((128, 128), "persistent"), ((128, 128), "pingpong"),
              ((128, 128), "pingpong_persistent"),
              ((96, 96), "single"), ((96, 96), "pingpong_persistent"),
              ((192, 192), "single"), ((192, 192), "persistent"),
              ((192, 128), "single"), ((192, 128), "persistent"))


class Variant(NamedTuple):
    dtype: str
    d: int
    dv: int
    mask: str
    mod: str
    schedule: str


def variant_name(dt: str, d: int, dv: int, mask: str, mod: str, schedule: str = "single") -> str:
    dims = f"d{d}" if d == dv else f"d{d}v{dv}"
    return f"{dt}-{dims}-{mask}-{mod}" + ("" if schedule == "single" else f"-{schedule}")


VARIANTS += [variant_name(dt, d, dv, m, s, sch) for ((d, dv), sch), dt, (m, s) in
             itertools.product(NEW_GROUPS, DTYPES, COVER_PAIRS)]
# remarks{ptx}: ptxas -v on stderr; artefacts go to a temporary --dump-dir, not the cwd
OPTIONS = "--gpu-arch {arch} --keep-ptx --keep-cubin --dump-dir {dump} remarks{{ptx}}"


def parse_variant(name: str) -> Variant:
    """'bfloat16-d192v128-causal-none-persistent' -> Variant('bfloat16', 192, 128, 'causal',
    'none', 'persistent'); no suffix: schedule 'single'; 'dN': Dv = D. Any combination that
    fits (FITS) parses; VARIANTS lists the compile-checked ones."""
    try:
        dt, dims, rest = name.split("-", 2)
        mask = next(m for m in sorted(MASKS, key=len, reverse=True) if rest.startswith(m + "-"))
        mod, _, schedule = rest[len(mask) + 1:].partition("-")
        d_text, _, dv_text = dims[1:].partition("v")
        d = int(d_text)
        dv = int(dv_text) if dv_text else d
    except (ValueError, StopIteration):
        raise ValueError(f"unknown variant {name!r}") from None
    schedule = schedule or "single"
    if (not dims.startswith("d") or dt not in DTYPES or mod not in SCORE_MODS
            or schedule not in FITS.get((d, dv), ()) or name != variant_name(
                dt, d, dv, mask, mod, schedule)):
        raise ValueError(f"unknown variant {name!r}")
    return Variant(dt, d, dv, mask, mod, schedule)


def parse(name: str) -> tuple[str, int, str, str]:
    """'float16-d128-causal-softcap' -> ('float16', 128, 'causal', 'softcap'); any variant
    name (parse_variant gives Dv and the schedule too)."""
    v = parse_variant(name)
    return v.dtype, v.d, v.mask, v.mod


def make_kernel(name: str, kernel: str = "fwd") -> Any:
    """The forward (kernel "fwd") or the backward ("bwd": BWD_VARIANTS only) of a variant."""
    import cutlass

    if kernel == "bwd":
        from impls.attention.fa4.sm100.bwd import Fa4Sm100Backward

        if name not in BWD_VARIANTS:
            raise ValueError(f"no backward variant {name!r}")
        dt, d, mask, mod = parse(name)
        return Fa4Sm100Backward(cutlass.Float16 if dt == "float16" else cutlass.BFloat16, d,
                                mask, mod)
    if kernel != "fwd":
        raise ValueError(f"kernel {kernel!r} not in {KERNELS}")
    from impls.attention.fa4.sm100.fwd import Fa4Sm100Forward

    v = parse_variant(name)
    return Fa4Sm100Forward(cutlass.Float16 if v.dtype == "float16" else cutlass.BFloat16, v.d,
                           v.mask, v.mod, head_dim_v=v.dv, schedule=v.schedule)


def fake_args(name: str, kernel: str = "fwd") -> tuple[Any, ...]:
    """Fake (B, H, S, D) tensors with dynamic B/H/S, 16-byte aligned rows (v, o: Dv); fp32
    lse (B, H, S); fp32 slopes (H,) and int32 document ids (S,) where the variant uses them;
    the SM count of a B200 from a fake HardwareInfo (no driver call). kernel "bwd": q, k, v,
    do, fp32 l2 and delta (B, H, S), fp32 dq, dk, dv (B, H, S, D), slopes, doc ids, scale, c,
    softcap, window, stream (Fa4Sm100Backward.__call__)."""
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_tensor
    from cutlass.runtime import make_fake_stream

    from impls.attention.fa4.sm100.scheduler import FakeHardwareInfo

    dt, d, dv, mask, mod, _ = parse_variant(name)
    dtype = cutlass.Float16 if dt == "float16" else cutlass.BFloat16

    def bhsd(d: int = d) -> Any:
        shape = (cute.sym_int32(), cute.sym_int32(), cute.sym_int32(), d)
        stride = (*(cute.sym_int64(divisibility=8) for _ in range(3)), 1)
        return make_fake_tensor(dtype, shape, stride, assumed_align=16)

    def vec(dtype: Any, rank: int) -> Any:
        shape = tuple(cute.sym_int32() for _ in range(rank))
        stride = (*(cute.sym_int64() for _ in range(rank - 1)), 1)
        return make_fake_tensor(dtype, shape, stride, assumed_align=4)

    slopes = vec(cutlass.Float32, 1) if mod == "alibi" else None
    docs = (vec(cutlass.Int32, 1), vec(cutlass.Int32, 1)) if mask == "document" else (None, None)
    if kernel == "bwd":
        return (bhsd(), bhsd(), bhsd(), bhsd(), vec(cutlass.Float32, 3), vec(cutlass.Float32, 3),
                *(vec(cutlass.Float32, 4) for _ in range(3)), slopes, *docs,
                cutlass.Float32(1.0), cutlass.Float32(1.0), cutlass.Float32(1.0),
                cutlass.Int32(1), make_fake_stream())
    sms = FakeHardwareInfo().get_device_multiprocessor_count()
    return (bhsd(), bhsd(), bhsd(dv), bhsd(dv), vec(cutlass.Float32, 3), slopes, *docs,
            cutlass.Float32(1.0), cutlass.Float32(1.0), cutlass.Float32(1.0), cutlass.Int32(1),
            cutlass.Int32(sms), make_fake_stream())


def compile_variant(name: str, arch: str = "sm_100a", kernel: str = "fwd") -> dict[str, Any]:
    """Compile one variant; resources from the cubin (cubin_info) and ptxas -v where printed.
    Unavailable numbers are "n/a", never guessed. Registers: the largest of the cubin's
    kernels; spills: summed over them (ptxas -v)."""
    import cutlass.cute as cute

    from impls.attention.fa4 import cubin_info

    obj = make_kernel(name, kernel)
    args = fake_args(name, kernel)
    with tempfile.TemporaryDirectory() as dump, ptxas_log.capture_stderr() as err:
        start = time.perf_counter()
        compiled = cute.compile(obj, *args, options=OPTIONS.format(arch=arch, dump=dump))
        seconds = time.perf_counter() - start
        cubin = compiled.__cubin__
    log = "".join(err)
    spills = ptxas_log.spills(log)
    kernels = cubin_info.kernel_resources(cubin)
    main = max(kernels.values(), key=lambda k: k.get("registers") or 0) if kernels else {}
    static_smem = main.get("static_shared_bytes") or 0
    dyn_smem = getattr(obj, "smem_bytes", None)

    def known(value: Any) -> Any:
        return "n/a" if value is None else value

    return {
        "name": name, "kernel": kernel, "arch": arch, "seconds": round(seconds, 2),
        "cubin_bytes": len(cubin),
        "registers": known(main.get("registers")),
        "shared_memory_bytes": "n/a" if dyn_smem is None else static_smem + dyn_smem,
        "spill_stores": sum(s[0] for s in spills) if spills else known(main.get("spill_stores")),
        "spill_loads": sum(s[1] for s in spills) if spills else known(main.get("spill_loads")),
        "ptxas_registers": max(ptxas_log.registers(log), default="n/a"),
        "kernel_count": len(kernels),
    }


def _row(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"| {r['name']} | error: {r['error'][:150]} | | | | |"
    return (f"| {r['name']} | {r['registers']} | {r['shared_memory_bytes']} | "
            f"{r['spill_stores']}/{r['spill_loads']} | {r['cubin_bytes'] / 1024:.0f} | "
            f"{r['seconds']:.1f} |")


def _compile_in_subprocess(name: str, kernel: str = "fwd") -> dict[str, Any]:
    """One variant per process: memory stays bounded over the 48 compiles."""
    proc = subprocess.run([sys.executable, "-m", __spec__.name, "--json", name,
                           "--kernel", kernel],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "CUTE_DSL_ARCH": "sm_100a"})
    lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
    if proc.returncode == 0 and lines:
        return json.loads(lines[-1])
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
    return {"name": name, "error": f"exit {proc.returncode}: {tail}"}


BWD_HEADER = [
    "# FA4-style sm100 backward: compile check (sm_100a, no GPU)",
    "",
    "Generated by `python -m impls.attention.fa4.sm100.variants --table --kernel bwd` on a",
    "2-core CPU machine with nvidia-cutlass-dsl (its bundled PTX compiler), no GPU and no CUDA",
    "toolkit. One compile per variant of the host function that launches both kernels (dK/dV",
    "and dQ). registers: the larger of the two kernels' EIATTR_REGCOUNT (192 threads, no",
    "setmaxnreg). smem: the dynamic shared memory either launch requests (the two kernels use",
    "the same storage layout) plus static. spills: ptxas -v, summed over both kernels (bytes).",
    "Compiled only: never run on a GPU.",
    "",
    "| variant | registers | smem bytes | spill st/ld (bytes) | cubin KB | compile s |",
    "|---|---|---|---|---|---|",
]


def write_table(path: Path, names: list[str], kernel: str = "fwd") -> list[dict[str, Any]]:
    rows = []
    for name in names:
        r = _compile_in_subprocess(name, kernel)
        rows.append(r)
        print(_row(r), flush=True)
    if kernel == "bwd":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(BWD_HEADER + [_row(r) for r in rows]) + "\n")
        return rows
    lines = [
        "# FA4-style sm100 forward: compile check (sm_100a, no GPU)",
        "",
        "Generated by `python -m impls.attention.fa4.sm100.variants --table` on a 2-core CPU",
        "machine with nvidia-cutlass-dsl (its bundled PTX compiler), no GPU and no CUDA toolkit.",
        "registers: the cubin's EIATTR_REGCOUNT (launch allocation; the warpgroups re-balance",
        "with setmaxnreg: softmax 240, correction 96, others 32; D = 192: others 64; persistent:",
        "248 / 160 / 96; ping-pong, 512 threads: 2 x 184 / 80 / 64). smem: dynamic shared memory",
        "the launch requests plus static. spills: ptxas -v (bytes). Rows after the 48 base ones",
        "(the schedules and shapes of the covering set) were added with --table --merge --only.",
        "Compiled only: never run on a GPU.",
        "",
        "| variant | registers | smem bytes | spill st/ld (bytes) | cubin KB | compile s |",
        "|---|---|---|---|---|---|",
    ]
    lines += [_row(r) for r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return rows


def merge_table(path: Path, names: list[str], kernel: str = "fwd") -> list[dict[str, Any]]:
    """Compile ``names`` and merge their rows into the existing table at ``path``: a row whose
    variant is already there is replaced in place, the others are appended at the end; the
    header and every other row are kept (so the committed rows are not recompiled)."""
    rows = []
    for name in names:
        r = _compile_in_subprocess(name, kernel)
        rows.append(r)
        print(_row(r), flush=True)
    new = {r["name"]: _row(r) for r in rows}
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and cells[0] in new:
            lines[i] = new.pop(cells[0])
    lines += list(new.values())
    path.write_text("\n".join(lines) + "\n")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--table", action="store_true", help="compile all, write the table")
    ap.add_argument("--out", help="table path (default: docs/results/fa4-sm100-compile.md, "
                    "fa4-sm100-bwd-compile.md with --kernel bwd)")
    ap.add_argument("--only", nargs="*", help="variant names (default: all)")
    ap.add_argument("--merge", action="store_true",
                    help="with --table: merge the rows of --only into the existing table")
    ap.add_argument("--kernel", choices=KERNELS, default="fwd")
    ap.add_argument("--json", metavar="NAME", help="compile one variant, print its JSON")
    args = ap.parse_args(argv)
    if args.json:
        print(json.dumps(compile_variant(args.json, kernel=args.kernel)), flush=True)
        return 0
    names = args.only or (list(BWD_VARIANTS) if args.kernel == "bwd" else VARIANTS)
    if args.table:
        out = args.out or ("docs/results/fa4-sm100-bwd-compile.md" if args.kernel == "bwd"
                           else "docs/results/fa4-sm100-compile.md")
        write = merge_table if args.merge else write_table
        return int(any("error" in r for r in write(Path(out), names, args.kernel)))
    for name in names:
        print(_row(compile_variant(name, kernel=args.kernel)), flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("CUTE_DSL_ARCH", "sm_100a")
    sys.exit(main())
