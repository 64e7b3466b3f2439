"""Verdicts on a round trip (cases.roundtrip's data), in the parent.

At every size the program accepted, each output (the sequence output and the final states)
must satisfy the error-ratio rule against the float64 oracle,

    max|out - ref| <= 2 max|base - ref| + eps max|ref|,

with base the same-precision baseline (baseline.py) on the same inputs and eps one rounding
step of the output dtype at the output's magnitude (storing the result in the dtype costs
that much in any algorithm; the baseline can be exact by luck). The factor 2 is the one the
attention area uses: a different order of the same operations may double the rounding,
not more. The output's dtype and shape must be the module's.

A size the program refused (it raised) is a failure when the program had to accept it:
the variant asked for that dim with a named ``Dim`` whose range holds the size, or the
program reports the dim as dynamic. Otherwise the refusal is recorded (the dim was
specialised) and passes: a specialised program must refuse, never answer wrongly.
The largest difference to eager at the accepted sizes is recorded as a fact.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from conformance.compare import Measurement, exact
from conformance.export.catalogue import BATCHES, EXAMPLE, SEQS, Model, oracle, same_precision
from conformance.record import Record

RATIO = 2.0
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7, "float32": 2.0**-23, "float64": 2.0**-52}


def sizes(model: Model) -> list[tuple[int, int]]:
    """The example, every batch size at the example's length, every length at the
    example's batch, and two corners that move both."""
    b0, s0 = EXAMPLE
    out = [EXAMPLE, *((b, s0) for b in BATCHES)]
    if model.has_seq:
        out += [*((b0, s) for s in SEQS), (7, 33), (1, 1)]
    return out


def _must_accept(model: Model, variant: str, size: tuple[int, int],
                 dims: dict[str, list[int]] | None) -> str | None:
    """Why the program had to accept ``size`` (None: a refusal is allowed, because some dim
    that differs from the example was neither asked for by name nor reported dynamic)."""
    reasons = []
    for which, value, base in (("batch", size[0], EXAMPLE[0]), ("seq", size[1], EXAMPLE[1])):
        if value == base:
            continue
        reported = [f"{name}.{i} in [{lo}, {hi}]" for name, i in model.dims(which).items()
                    for lo, hi in [(dims or {}).get(name, {}).get(i, ("-", "-"))]
                    if lo != "-" and (lo is None or lo <= value) and (hi is None or value <= hi)]
        if variant == which:
            reasons.append(f"it was exported with a dynamic {which} (Dim {which!r}, 1..max)")
        elif reported:
            reasons.append(f"it reports the {which} dim dynamic ({', '.join(reported)})")
        else:
            return None
    return "; ".join(reasons) or None


def _compare(record: Record, model: Model, got: list[dict[str, Any]], ref: tuple, base: tuple,
             dtype: str) -> float:
    """Check each output; returns the worst ratio."""
    if len(got) != len(ref):
        names = ", ".join(model.outputs)
        record.require(exact("output structure", 1, 1,
                             f"{len(got)} outputs, expected {len(ref)} ({names})"))
    worst = 0.0
    for name, g, r, b in zip(model.outputs, got, ref, base, strict=True):
        if g["dtype"] != dtype:
            record.require(exact("output dtype", 1, 1, f"{name} is {g['dtype']}, not {dtype}"))
        values = g["values"]
        if values is None or values.shape != r.shape:
            shape = None if values is None else values.shape
            record.require(exact("output shape", 1, 1, f"{name} has shape {shape}, "
                                                      f"expected {r.shape}"))
        with np.errstate(invalid="ignore"):
            err = float(np.nan_to_num(np.max(np.abs(values - r)), nan=np.inf))
            base_err = float(np.max(np.abs(b - r)))
        atol = EPS[dtype] * float(np.max(np.abs(r)))
        bound = RATIO * base_err + atol
        m = record.require(Measurement(
            f"{name} (error ratio rule)", err, bound,
            f"max|out - ref| {err:.3g}, max|base - ref| {base_err:.3g} (x{RATIO:g} "
            f"+ eps max|ref| {atol:.3g})"))
        worst = max(worst, m.ratio)
    return worst


def judge(record: Record, model: Model, variant: str, dtype: str, module: torch.nn.Module,
          result: dict[str, Any], inputs: list[list[np.ndarray]]) -> None:
    """Apply the module docstring's rules to a round trip's result."""
    t = getattr(torch, dtype)
    dims = result.get("dynamic_dims")
    record.note(build_seconds=round(result.get("build_s", 0.0), 3), dynamic_dims=dims,
                artefact_kind=(result.get("artefact") or "").rsplit(".", 1)[-1] or None)
    if "build_error" in result:
        record.require(exact("round trip builds", 1, 1, result["build_error"]))
    refused, accepted, vs_eager = {}, [], 0.0
    for run, arrays in zip(result["runs"], inputs, strict=True):
        size = tuple(run["size"])
        record.case(batch=size[0], seq=size[1], variant=variant)
        if "refused" in run:
            why = _must_accept(model, variant, size, dims)
            if why:
                record.require(exact("accepts the sizes it was exported for", 1, 1,
                                     f"refused batch={size[0]} seq={size[1]} although "
                                     f"{why}: {run['refused']}"))
            refused[f"{size[0]}x{size[1]}"] = run["refused"]
            continue
        ref = oracle(model, module, arrays)
        base = same_precision(model, module, arrays, t)
        _compare(record, model, run["outputs"], ref, base, dtype)
        accepted.append(f"{size[0]}x{size[1]}")
        for o, e in zip(run["outputs"], run["eager"], strict=False):
            if o["values"] is not None and o["values"].shape == e.shape:
                vs_eager = max(vs_eager, float(np.max(np.abs(o["values"] - e), initial=0.0)))
    if tuple(EXAMPLE) not in [tuple(r["size"]) for r in result["runs"] if "outputs" in r]:
        record.require(exact("runs at the example size", 1, 1,
                             f"refused the example {EXAMPLE}: {refused}"))
    record.note(accepted=accepted, refused=refused, max_abs_vs_eager=vs_eager)
