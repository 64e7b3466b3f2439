"""GPU benchmark of attention backends: forward and forward+backward throughput.

For each implementation x sequence length S x head dim D x causal it records the median time
of the forward and of forward+backward (torch.autograd.grad) over --iters CUDA-event-timed
calls after warm-up, and the TFLOP/s they imply: forward 4*B*H*S*S*D FLOPs (halved when
causal), backward 2.5x forward (FlashAttention's convention; backward time = forward+backward
time - forward time). The first call, where torch.compile / JIT compilation happens, is timed
separately. Every output, and every backward's dQ, dK, dV, is checked at its size under the
suite's FlashAttention rule against the float64 oracle on two (batch, head) slices
(conformance/areas/attention/gate.py): a rate is reported only for a result that passed
(``fwd_check``/``bwd_check``: pass, or why not). Each rate is also given as a percentage of
the GPU's dense bf16/fp16 tensor-core peak (PEAK_TFLOPS, from the vendor's data sheet) and
of a bf16 GEMM measured in the same run. Implementations are the adapters in
impls/attention (FlexAttention's signature, tensors (B, H, S, D)).

On a GPU host (torch 2.11+ with CUDA and triton; flash-attn-4 optional), from the repo root:

    python benchmarks/attention_gpu.py                  # defaults: under 8 minutes on one H200
    python benchmarks/attention_gpu.py --impls sdpa.flash,flex.flash --seqlens 4096

--time-budget (default 420 s) stops launching measurements once spent (those left are
recorded as skipped; list the sizes that matter most first in --seqlens), so a default run
stays under 8 minutes on one H200. Results go to docs/results/attention-gpu-<gpu>-<date>.json
(--out; rewritten after every measurement) and a table is printed. CPU smoke test of the
plumbing (wall-clock timing, batch tokens 256):

    python benchmarks/attention_gpu.py --device cpu --seqlens 128 --head-dims 64 \\
        --impls flex.eager,sdpa.math --no-backward --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import importlib.metadata
import importlib.util
import json
import math
import re
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from conformance.areas.attention.catalogue import MASKS, Geometry
from conformance.areas.attention.gate import Gate

Fn = Callable[..., Any]
Row = dict[str, Any]
QKV = tuple[torch.Tensor, ...]
# name -> ("module:attr", the causal mask kind the adapter is given; Sq == Sk, so they agree)
IMPLS: dict[str, tuple[str, str]] = {
    "sdpa.math": ("impls.attention.sdpa:sdpa_math", "causal_tl"),
    "sdpa.flash": ("impls.attention.sdpa:sdpa_flash", "causal_tl"),
    "sdpa.efficient": ("impls.attention.sdpa:sdpa_efficient", "causal_tl"),
    "sdpa.cudnn": ("impls.attention.sdpa:sdpa_cudnn", "causal_tl"),
    "flex.eager": ("impls.attention.flex:flex_eager", "causal_br"),
    "flex.compiled": ("impls.attention.flex:flex_compiled", "causal_br"),
    "flex.flash": ("impls.attention.flex:flex_flash", "causal_br"),
    "fa4.flash_attn_func": ("impls.attention.fa4_peer:flash_attn_func", "causal_br"),
    "triton_fa": ("impls.attention.triton_fa:triton_attention", "causal_br"),
    "fa4.sm90": ("impls.attention.fa4.sm90.api:fa4_sm90", "causal_br"),
    "fa4.sm100": ("impls.attention.fa4.sm100.api:fa4_sm100", "causal_br"),
}
DEFAULT_IMPLS = ["sdpa.flash", "sdpa.efficient", "sdpa.cudnn", "flex.compiled", "flex.flash",
                 "fa4.flash_attn_func"]
SKIP_MARKERS = ("No available kernel", "No viable backend", "No module named", "not supported",
                "does not support")
COLUMNS = {"impl": 20, "S": 6, "D": 4, "causal": 6, "B": 4, "status": 8, "fwd_ms": 9,
           "fwd_tflops": 10, "fwd_pct_peak": 12, "bwd_tflops": 10, "fwd_vs_sdpa_flash": 17,
           "compile_fwd_s": 13, "fwd_check": 9, "bwd_check": 0}
# dense (no sparsity) bf16/fp16 tensor-core peak, TFLOP/s, by device name (the vendor's
# data sheets: H100 SXM and H200 SXM 989.4, H100 PCIe 756.5, H100 NVL 835.5, B200 2250)
PEAK_TFLOPS = {"H200": 989.4, "H100 80GB HBM3": 989.4, "H100 SXM": 989.4, "H100 NVL": 835.5,
               "H100 PCIe": 756.5, "B200": 2250.0}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--seqlens", type=ints, default=[4096, 1024, 2048, 8192, 16384])
    ap.add_argument("--head-dims", type=ints, default=[64, 128])
    ap.add_argument("--batch-tokens", type=int, default=None,
                    help="batch = max(1, this // S); default 16384 (256 off CUDA)")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--causal", choices=["both", "yes", "no"], default="both")
    ap.add_argument("--backward", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--check", action=argparse.BooleanOptionalAction, default=True,
                    help="check every result against the float64 oracle (the gate of the "
                         "ratios)")
    ap.add_argument("--impls", default=None, help=f"comma list of {', '.join(IMPLS)}")
    ap.add_argument("--iters", type=int, default=20, help="timed calls (median; at least 10)")
    ap.add_argument("--warmup", type=int, default=3, help="untimed calls after the first")
    ap.add_argument("--time-budget", type=float, default=420.0, help="seconds")
    ap.add_argument("--out", default=None, help="default docs/results/attention-gpu-<gpu>-<date>")
    args = ap.parse_args(argv)
    if args.impls is None:  # our Triton kernel only where its module exists
        has_triton = importlib.util.find_spec("impls.attention.triton_fa") is not None
        args.impls = ",".join(DEFAULT_IMPLS + ["triton_fa"] * has_triton)
    unknown = sorted(set(args.impls.split(",")) - set(IMPLS))
    if unknown:
        ap.error(f"unknown --impls {unknown}; known: {', '.join(IMPLS)}")
    if not isinstance(getattr(torch, args.dtype, None), torch.dtype):
        ap.error(f"--dtype {args.dtype!r} is not a torch dtype")
    args.iters = max(10, args.iters)
    if args.batch_tokens is None:
        args.batch_tokens = 16384 if torch.device(args.device).type == "cuda" else 256
    return args


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment(device: torch.device) -> Row:
    env: Row = {"python": sys.version.split()[0], "torch": torch.__version__,
                "cuda": torch.version.cuda, "device": str(device)}
    if device.type == "cuda":
        driver_api = getattr(torch._C, "_cuda_getDriverVersion", None)
        env.update(device_name=torch.cuda.get_device_name(device),
                   capability=".".join(map(str, torch.cuda.get_device_capability(device))),
                   cuda_driver_api=driver_api() if driver_api else None)
    env.update(triton=_version("triton"), flash_attn_4=_version("flash-attn-4"),
               cutlass_dsl=_version("nvidia-cutlass-dsl"))
    name = env.get("device_name") or ""
    peak = next((v for k, v in PEAK_TFLOPS.items() if k in name), None)
    env.update(peak_tflops=peak, peak_source="vendor data sheet, dense bf16/fp16 tensor core"
               if peak else f"no peak known for {name or device.type}")
    return env


def gemm_tflops(device: torch.device, dtype: torch.dtype) -> float | None:
    """A square GEMM's rate in this run (8192 on CUDA): what the chip gives a plain kernel."""
    if device.type != "cuda":
        return None
    n = 8192
    a, b = (torch.randn(n, n, device=device, dtype=dtype) for _ in range(2))
    for _ in range(3):  # warm-up
        a @ b
    ms = median_ms(lambda: a @ b, 10, device)
    return round(2 * n**3 / ms / 1e9, 1)


def block_mask(kind: str | None, geo: Geometry, device: torch.device) -> Any:
    if kind is None:
        return None
    from torch.nn.attention.flex_attention import create_block_mask

    fn = MASKS[kind].make({}, geo, device)
    return create_block_mask(fn, None, None, geo.sq, geo.sk, device=device)


def median_ms(fn: Fn, iters: int, device: torch.device) -> float:
    """Median milliseconds per call: CUDA events on CUDA, wall clock elsewhere."""
    if device.type != "cuda":
        return statistics.median(wall_s(fn)[1] * 1e3 for _ in range(iters))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(iters)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize(device)
    return statistics.median(start.elapsed_time(end) for start, end in events)


def wall_s(fn: Fn, sync: bool = False) -> tuple[Any, float]:
    if sync:
        torch.cuda.synchronize()
    start = time.perf_counter()
    result = fn()
    if sync:
        torch.cuda.synchronize()
    return result, time.perf_counter() - start


def timed(fn: Fn, args: argparse.Namespace, device: torch.device) -> tuple[Any, float, float]:
    """(first result, compile s = first call (compilation happens there) - median, median ms)."""
    first, first_s = wall_s(fn, sync=device.type == "cuda")
    for _ in range(args.warmup):
        fn()
    ms = median_ms(fn, args.iters, device)
    return first, max(0.0, first_s - ms / 1e3), ms


def _check(gate: Gate | None, causal: bool, **given: Any) -> Row:
    """The gate's verdicts as row fields (fwd_check / bwd_check), or why none was made."""
    if gate is None:
        return {f"{side}_check": "not checked (--no-check)" for side in
                (("fwd",) if "out" in given else ("bwd",))}
    try:
        got = gate.check(causal, **given)
        return {f"{k}_check" if k in ("fwd", "bwd") else k: v for k, v in got.items()}
    except Exception as exc:  # a failed check must not stop the run; it blocks the rate
        why = f"not checked: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
        return {f"{side}_check": why for side in (("fwd",) if "out" in given else ("bwd",))}


def forward(fn: Fn, qkv: QKV, bm: Any, gate: Gate | None, causal: bool,
            args: argparse.Namespace, device: torch.device) -> Row:
    out, compile_s, ms = timed(lambda: fn(*qkv, block_mask=bm), args, device)
    return {"compile_fwd_s": compile_s, "fwd_ms": ms, **_check(gate, causal, out=out)}


def backward(fn: Fn, qkv: QKV, bm: Any, gate: Gate | None, causal: bool,
             args: argparse.Namespace, device: torch.device) -> Row:
    """Forward + torch.autograd.grad for dQ, dK, dV (the first call's gradients checked)."""
    leaves = tuple(t.detach().requires_grad_(True) for t in qkv)
    d_out = gate.d_out if gate is not None else torch.randn_like(qkv[0])
    step = lambda: torch.autograd.grad(fn(*leaves, block_mask=bm), leaves, d_out)  # noqa: E731
    grads, compile_s, ms = timed(step, args, device)
    return {"compile_fwdbwd_s": compile_s, "fwdbwd_ms": ms,
            **_check(gate, causal, grads=tuple(grads))}


def failure(exc: BaseException) -> Row:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [""]
    first = lines[0] + (f" {lines[1]}" if lines[0].endswith(":") and len(lines) > 1 else "")
    skipped = isinstance(exc, ImportError | NotImplementedError) or any(
        marker in str(exc) for marker in SKIP_MARKERS)
    return {"status": "skipped" if skipped else "error",
            "reason": f"{type(exc).__name__}: {first}"[:300]}


def guarded(call: Callable[[], Row], device: torch.device) -> Row:
    """call()'s result with status "ok", or its failure; frees cached memory after an OOM."""
    try:
        return {"status": "ok", **call()}
    except Exception as exc:  # one combination failing must not stop the run
        result, oom = failure(exc), isinstance(exc, torch.OutOfMemoryError)
    if oom and device.type == "cuda":
        torch.cuda.empty_cache()
    return result


def run_one(name: str, qkv: QKV, geo: Geometry, causal: bool, gate: Gate | None,
            args: argparse.Namespace, device: torch.device) -> Row:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module, attr = IMPLS[name][0].split(":")
            fn = getattr(importlib.import_module(module), attr)
            bm = block_mask(IMPLS[name][1] if causal else None, geo, device)
        except Exception as exc:
            return failure(exc)
        row = guarded(lambda: forward(fn, qkv, bm, gate, causal, args, device), device)
        if args.backward and row["status"] == "ok":  # a failed backward keeps the forward
            bwd = guarded(lambda: backward(fn, qkv, bm, gate, causal, args, device), device)
            status = bwd.pop("status")
            row.update(bwd if status == "ok" else {"bwd_status": status,
                                                    "bwd_reason": bwd["reason"]})
    seen = list(dict.fromkeys((str(w.message).strip().splitlines() or [""])[0][:200]
                              for w in caught))  # first lines, in order
    return {**row, "warnings": seen[:4]} if seen else row


def add_rates(row: Row, env: Row) -> None:
    """TFLOP/s (causal: half the FLOPs) and their share of the peak and of the GEMM."""
    flops = 4 * row["B"] * row["H"] * row["S"] ** 2 * row["D"] / (2 if row["causal"] else 1)
    row["fwd_tflops"] = flops / row["fwd_ms"] / 1e9  # FLOP per ms / 1e9 = TFLOP/s
    if "fwdbwd_ms" in row:
        row["bwd_ms"] = row["fwdbwd_ms"] - row["fwd_ms"]
        row["bwd_tflops"] = 2.5 * flops / row["bwd_ms"] / 1e9 if row["bwd_ms"] > 0 else None
        row["fwdbwd_tflops"] = 3.5 * flops / row["fwdbwd_ms"] / 1e9
    for side in ("fwd", "bwd"):
        rate = row.get(f"{side}_tflops")
        for key, ref in (("pct_peak", env.get("peak_tflops")),
                         ("pct_gemm", env.get("gemm_tflops"))):
            if rate and ref:
                row[f"{side}_{key}"] = round(100 * rate / ref, 1)


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def passed(row: Row | None, side: str) -> bool:
    """The row's rate for ``side`` (fwd, bwd) stands: measured, and its result passed."""
    return bool(row and row.get(f"{side}_tflops") and row.get(f"{side}_check") == "pass")


def find(rows: list[Row], impl: str, s: int, d: int, causal: bool) -> Row | None:
    return next((r for r in rows if r["impl"] == impl and r["status"] == "ok" and r["S"] == s
                 and r["D"] == d and r["causal"] == causal), None)


def gated_ratio(a: Row | None, b: Row | None, side: str) -> float | None:
    """a's rate over b's, only where both results passed the rule at that size."""
    if not (passed(a, side) and passed(b, side)):
        return None
    return _ratio(a[f"{side}_tflops"], b[f"{side}_tflops"])  # type: ignore[index]


def add_ratios(rows: list[Row]) -> None:
    for row in rows:
        flash = find(rows, "sdpa.flash", row["S"], row["D"], row["causal"])
        if row["status"] == "ok" and flash:
            row["fwd_vs_sdpa_flash"] = gated_ratio(row, flash, "fwd")
            row["bwd_vs_sdpa_flash"] = gated_ratio(row, flash, "bwd")


def summary(rows: list[Row], dtype: str) -> Row:
    out: Row = {}
    for causal in (False, True):
        tri, flash = (find(rows, i, 4096, 128, causal) for i in ("triton_fa", "sdpa.flash"))
        if dtype == "bfloat16" and tri and flash:
            key = "triton fwd / sdpa.flash at bf16 S=4096 D=128" + " causal" * causal
            out[key] = gated_ratio(tri, flash, "fwd")
    pairs = {f"S={a['S']} D={a['D']} causal={a['causal']}": (a, b) for a in rows
             if a["impl"] == "fa4.flash_attn_func" and a["status"] == "ok"
             and (b := find(rows, "flex.flash", a["S"], a["D"], a["causal"]))}
    ratios = {key: {"fwd": gated_ratio(a, b, "fwd"), "bwd": gated_ratio(a, b, "bwd")}
              for key, (a, b) in pairs.items()}
    if ratios:
        fwd = [math.log(r["fwd"]) for r in ratios.values() if r["fwd"]]
        geomean = round(math.exp(statistics.fmean(fwd)), 3) if fwd else None
        out["fa4 vs flex.flash (TFLOP/s ratio)"] = {"geomean_fwd": geomean, **ratios}
    return out


def table_line(row: Row) -> str:
    cell = lambda v: f"{v:.4g}" if isinstance(v, float) else "-" if v is None else str(v)  # noqa: E731
    line = " ".join(cell(row.get(c)).ljust(w) for c, w in COLUMNS.items())
    why = row.get("reason") or ("bwd " + row["bwd_reason"] if "bwd_reason" in row else "")
    return f"{line.rstrip()} {why}".rstrip()


def default_out(env: Row) -> Path:
    slug = re.sub(r"[^a-z0-9]+", "-", env.get("device_name", env["device"]).lower()).strip("-")
    return Path("docs/results") / f"attention-gpu-{slug}-{datetime.date.today():%Y%m%d}.json"


def write(path: Path, env: Row, args: argparse.Namespace, rows: list[Row],
          elapsed: float) -> None:
    payload = {"environment": env, "args": vars(args), "elapsed_s": round(elapsed, 1),
               "summary": summary(rows, args.dtype), "results": rows}
    path.write_text(json.dumps(payload, indent=1, default=str) + "\n")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: this benchmark needs a GPU (or --device cpu for a smoke test)")
    if device.type != "cuda" and max(args.seqlens) > 1024:
        sys.exit(f"no CUDA device: on {device} only a smoke test runs; pass --seqlens <= 1024")
    torch._dynamo.config.recompile_limit = max(64, torch._dynamo.config.recompile_limit)
    env, dtype = environment(device), getattr(torch, args.dtype)
    env["gemm_tflops"] = gemm_tflops(device, dtype)
    out_path = Path(args.out) if args.out else default_out(env)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    causals = {"both": [False, True], "yes": [True], "no": [False]}[args.causal]
    rows: list[Row] = []
    start = time.monotonic()
    print(" ".join(c.ljust(w) for c, w in COLUMNS.items()), flush=True)
    for s in args.seqlens:
        for d in args.head_dims:
            b = max(1, args.batch_tokens // s)
            geo = Geometry(b, args.heads, s, s)
            torch.manual_seed(0)
            qkv = tuple(torch.randn(b, args.heads, s, d, device=device, dtype=dtype)
                        for _ in range(3))
            gate = Gate(qkv, torch.randn_like(qkv[0])) if args.check else None
            for causal in causals:
                torch._dynamo.reset()  # few compiled entries at a time: small guard overhead
                for name in args.impls.split(","):
                    row = {"impl": name, "S": s, "D": d, "causal": causal, "B": b,
                           "H": args.heads, "dtype": args.dtype}
                    if time.monotonic() - start > args.time_budget:
                        row.update(status="skipped", reason="time budget exceeded")
                    else:
                        row.update(run_one(name, qkv, geo, causal, gate, args, device))
                    if row["status"] == "ok":
                        add_rates(row, env)
                    rows.append(row)
                    add_ratios(rows)
                    print(table_line(row), flush=True)
                    write(out_path, env, args, rows, time.monotonic() - start)
            del qkv, gate
    print(json.dumps(summary(rows, args.dtype), indent=1))
    print(f"wrote {out_path} ({len(rows)} rows, {time.monotonic() - start:.0f} s)")


if __name__ == "__main__":
    main()
