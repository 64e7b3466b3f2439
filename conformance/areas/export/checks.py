"""Verdicts on a round trip (cases.roundtrip's data), in the parent.

At every size the program accepted, each output (the sequence output and the final states)
must satisfy the error-ratio rule against the float64 oracle,

    max|out - ref| <= 2 max|base - ref| + eps max|ref|,

where base is the worst of the same-precision computations of the same model: the plain
ones of baseline.py (two evaluation forms for a GRU, see there) and, for every path but
eager itself, the eager module on the run's device, run on a deep copy made before the
implementation saw the module (cases.py), and admitted only where it passes this rule
against the plain baselines alone at every size and output (else it is left out, and the
notes say why): a wrong eager LSTM cannot vouch for itself, and a round trip that changed
the module it was given cannot move its own bound. A round trip that changed that module
(weights, dtypes, submodules, training flags) fails "leaves the module it was given as it
was", whatever its numbers. eps is one rounding step of the output dtype at the
output's magnitude (storing the result costs that much in any algorithm; the baseline can
be exact by luck). The factor 2 is the attention area's: another order of the same
operations may double the rounding, not more.

max|base - ref| is pooled over the sizes no longer than the one checked (every batch size,
the shorter lengths): the outputs of batch 1 or length 1 hold a handful of elements, and
the largest of a handful of rounding errors is a poor estimate of the dtype's rounding (it
can be lucky-small); rounding grows with the length, so shorter lengths never loosen a
longer one's bound. Measured over 40 seeds of weights and inputs, torch's fp16/fp32 GRU
against the plain baseline per size alone reached a margin of 1.09 (a false alarm); pooled,
0.70 at most (docs/results/export-2026-12-02.md). The output's dtype and shape must be the
module's.

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

from conformance.areas.export.catalogue import (
    BATCHES,
    EXAMPLE,
    MAX_BATCH,
    MAX_SEQ,
    SEQS,
    Model,
    oracle,
    same_precision,
)
from conformance.harness.compare import Measurement, exact
from conformance.harness.record import Record

RATIO = 2.0


def sizes(model: Model) -> list[tuple[int, int]]:
    """The example, every batch size at the example's length, every length at the
    example's batch, two corners that move both, and one past each ``Dim``'s max (a
    program may refuse it, never answer it wrongly: torch.export's ``.module()`` checks the
    range, an AOTInductor package only under AOTI_RUNTIME_CHECK_INPUTS=1)."""
    b0, s0 = EXAMPLE
    out = [EXAMPLE, *((b, s0) for b in BATCHES), (MAX_BATCH + 1, s0)]
    if model.has_seq:
        out += [*((b0, s) for s in SEQS), (7, 33), (1, 1), (b0, MAX_SEQ + 1)]
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
        if variant == which and value <= (MAX_BATCH if which == "batch" else MAX_SEQ):
            reasons.append(f"it was exported with a dynamic {which} (Dim {which!r}, 1..max)")
        elif reported:
            reasons.append(f"it reports the {which} dim dynamic ({', '.join(reported)})")
        else:
            return None
    return "; ".join(reasons) or None


def _max_err(a: np.ndarray, r: np.ndarray) -> float:
    with np.errstate(invalid="ignore"):
        return float(np.nan_to_num(np.max(np.abs(a - r), initial=0.0), nan=np.inf))


def _pooled(base_err: dict[tuple[int, int], list[float]], size: tuple[int, int]
            ) -> list[float]:
    """Per output, the largest baseline error over the sizes no longer than ``size``."""
    rows = [errs for (b, s), errs in base_err.items() if s <= size[1]]
    return [max(col) for col in zip(*rows, strict=True)]


def _compare(record: Record, model: Model, got: list[dict[str, Any]], ref: tuple,
             base_err: list[float], dtype: str, baseline: str, prefix: str = "") -> None:
    """Check each output of one size (check names start with ``prefix``)."""
    if len(got) != len(ref):
        names = ", ".join(model.outputs)
        record.require(exact(f"{prefix}output structure", 1, 1,
                             f"{len(got)} outputs, expected {len(ref)} ({names})"))
    for name, g, r, b in zip(model.outputs, got, ref, base_err, strict=True):
        if g["dtype"] != dtype:
            record.require(exact(f"{prefix}output dtype", 1, 1,
                                 f"{name} is {g['dtype']}, not {dtype}"))
        values = g["values"]
        if values is None or values.shape != r.shape:
            shape = None if values is None else values.shape
            record.require(exact(f"{prefix}output shape", 1, 1, f"{name} has shape {shape}, "
                                                      f"expected {r.shape}"))
        err = _max_err(values, r)
        atol = torch.finfo(getattr(torch, dtype)).eps * float(np.max(np.abs(r), initial=0.0))
        record.require(Measurement(
            f"{prefix}{name} (error ratio rule)", err, RATIO * b + atol,
            f"max|out - ref| {err:.3g}, max|base - ref| {b:.3g} ({baseline}; x{RATIO:g} "
            f"+ eps max|ref| {atol:.3g})"))


def _eager_fails(model: Model, runs: list[dict[str, Any]], refs: dict, plain_err: dict,
                 dtype: str) -> str | None:
    """Why eager may not serve as a baseline (it fails the rule against the plain baselines
    at some size), or None."""
    eps = torch.finfo(getattr(torch, dtype)).eps
    for run in runs:
        size = tuple(run["size"])
        pooled = _pooled(plain_err, size)
        for name, e, r, b in zip(model.outputs, run["eager"], refs[size], pooled, strict=False):
            if e.shape != r.shape:
                return f"{name} at {size[0]}x{size[1]} has shape {e.shape}, expected {r.shape}"
            err, bound = _max_err(e, r), RATIO * b + eps * float(np.max(np.abs(r), initial=0.0))
            if not err <= bound:
                return (f"{name} at {size[0]}x{size[1]}: max|eager - ref| {err:.3g} > "
                        f"{bound:.3g} (x{RATIO:g} the plain baseline's error + eps max|ref|)")
    return None


def judge(record: Record, model: Model, variant: str, dtype: str, module: torch.nn.Module,
          result: dict[str, Any], inputs: list[list[np.ndarray]], *,
          eager_is_baseline: bool, tf32: bool = False) -> None:
    """Apply the module docstring's rules to a round trip's result."""
    t = getattr(torch, dtype)
    dims = result.get("dynamic_dims")
    record.note(build_seconds=round(result.get("build_s", 0.0), 3), dynamic_dims=dims,
                artefact_kind=(result.get("artefact") or "").rsplit(".", 1)[-1] or None)
    record.note(trace=result.get("trace"), tf32=result.get("tf32"))
    if result.get("delegated") is not None:
        record.note(delegated=result["delegated"])
    if "build_error" in result:
        record.require(exact("round trip builds", 1, 1, result["build_error"]))
    changed = result.get("mutated") or []
    if changed:
        record.require(exact("leaves the module it was given as it was", len(changed),
                             len(module.state_dict()), "; ".join(changed[:6])))
    refs, base_err = {}, {}
    for run, arrays in zip(result["runs"], inputs, strict=True):
        size = tuple(run["size"])
        refs[size] = oracle(model, module, arrays)
        base_err[size] = [max(_max_err(b[k], r)
                              for b in same_precision(model, module, arrays, t, tf32))
                          for k, r in enumerate(refs[size])]
    baseline = "TF32 plain baseline" if tf32 else "plain baseline"
    if eager_is_baseline and result["runs"]:
        why = _eager_fails(model, result["runs"], refs, base_err, dtype)
        if why:
            record.note(eager_baseline=f"left out: {why}")
        else:
            for run in result["runs"]:
                size = tuple(run["size"])
                base_err[size] = [max(b, _max_err(e, r)) for b, e, r
                                  in zip(base_err[size], run["eager"], refs[size], strict=True)]
            baseline = f"{baseline} and eager"
    refused, accepted, vs_eager = {}, [], 0.0
    for run in result["runs"]:
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
        _compare(record, model, run["outputs"], refs[size], _pooled(base_err, size), dtype,
                 baseline)
        accepted.append(f"{size[0]}x{size[1]}")
        for o, e in zip(run["outputs"], run["eager"], strict=False):
            if o["values"] is not None and o["values"].shape == e.shape:
                vs_eager = max(vs_eager, _max_err(o["values"], e))
    if tuple(EXAMPLE) not in [tuple(r["size"]) for r in result["runs"] if "outputs" in r]:
        record.require(exact("runs at the example size", 1, 1,
                             f"refused the example {EXAMPLE}: {refused}"))
    record.note(accepted=accepted, refused=refused, max_abs_vs_eager=vs_eager)
