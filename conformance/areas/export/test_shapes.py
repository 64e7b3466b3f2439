"""Export round trips of the input shapes beyond the catalogue (shapes.py: no biases,
unbatched, ``Dim.DYNAMIC``, a derived dim, packed sequences) through every path, each in the
isolation child like test_roundtrip, with the same oracles and rule (checks.py): at every
point the program accepted, each output satisfies the error-ratio rule against the float64
oracle (base: the plain same-precision baselines and, where it passes against them, eager
on a copy made before the path saw the module, pooled over the points no longer than the
one checked); a refusal fails where the point lies in the range the export asked for (or
under ``Dim.DYNAMIC``); the example must run; the module must be left as it was. A packed
sequence may also be refused at export (pytorch#112044: right, or a clear refusal).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conformance.areas.export import shapes
from conformance.areas.export.checks import RATIO, _compare, _max_err
from conformance.harness.compare import exact
from conformance.harness.outcomes import missing as skip_missing
from conformance.harness.tensors import dtype_name

pytestmark = pytest.mark.area("export")
TIMEOUT = 300.0


def _eager_fails(shape: shapes.Shape, runs: list, refs: list, plain: list, dtype: str
                 ) -> str | None:
    eps = torch.finfo(getattr(torch, dtype)).eps
    for run, point, ref, base in zip(runs, shape.points, refs, plain, strict=True):
        for name, e, r, b in zip(shape.outputs, run["eager"], ref, base, strict=False):
            if e.shape != r.shape:
                return f"{name} at {point.label} has shape {e.shape}, expected {r.shape}"
            err, bound = _max_err(e, r), RATIO * b + eps * float(np.max(np.abs(r), initial=0))
            if not err <= bound:
                return f"{name} at {point.label}: max|eager - ref| {err:.3g} > {bound:.3g}"
    return None


def _pooled(shape: shapes.Shape, errs: list[list[float]], point: shapes.Point) -> list[float]:
    rows = [e for p, e in zip(shape.points, errs, strict=True) if p.seq <= point.seq]
    return [max(col) for col in zip(*rows, strict=True)]


def judge(record, shape: shapes.Shape, dtype: str, module: torch.nn.Module,
          result: dict, inputs: list, *, eager_is_baseline: bool) -> None:
    t = getattr(torch, dtype)
    record.note(build_seconds=round(result.get("build_s", 0.0), 3),
                dynamic_dims=result.get("dynamic_dims"), trace=result.get("trace"))
    if result.get("delegated") is not None:
        record.note(delegated=result["delegated"])
    if "build_error" in result and shape.form == "packed":  # refusing at export is allowed
        record.note(export="refused", error=result["build_error"])
        return
    if "build_error" in result:
        record.require(exact("round trip builds", 1, 1, result["build_error"]))
    changed = result.get("mutated") or []
    if changed:
        record.require(exact("leaves the module it was given as it was", len(changed),
                             len(module.state_dict()), "; ".join(changed[:6])))
    refs = [shapes.oracle(shape, module, a) for a in inputs]
    errs = [[max(_max_err(b[k], r) for b in shapes.same_precision(shape, module, a, t))
             for k, r in enumerate(ref)] for a, ref in zip(inputs, refs, strict=True)]
    baseline = "plain baseline"
    if eager_is_baseline and result["runs"]:
        why = _eager_fails(shape, result["runs"], refs, errs, dtype)
        if why:
            record.note(eager_baseline=f"left out: {why}")
        else:
            errs = [[max(b, _max_err(e, r)) for b, e, r in zip(err, run["eager"], ref,
                                                                strict=True)]
                    for err, run, ref in zip(errs, result["runs"], refs, strict=True)]
            baseline = "plain and eager baselines"
    accepted, refused = [], {}
    for point, run, ref in zip(shape.points, result["runs"], refs, strict=True):
        if "refused" in run:
            refused[point.label] = run["refused"]
            if point.must:
                record.require(exact("accepts the sizes it was exported for", 1, 1,
                                     f"refused {point.label} although it lies in the range "
                                     f"the export asked for: {run['refused']}"))
            continue
        accepted.append(point.label)
        record.case(point=point.label)
        _compare(record, shape, run["outputs"], ref, _pooled(shape, errs, point), dtype,
                 baseline)
    if result["runs"] and shape.example.label not in accepted:
        record.require(exact("runs at the example size", 1, 1,
                             f"refused the example {shape.example.label}: {refused}"))
    record.note(accepted=accepted, refused=refused)


@pytest.mark.parametrize("shape", list(shapes.SHAPES))
def test_shape(impl, shape, dtype, device, record, isolated):
    spec = shapes.SHAPES[shape]
    name = dtype_name(dtype)
    inputs = [shapes.make_inputs(spec, p, name) for p in spec.points]
    example = shapes.make_inputs(spec, spec.example, name)
    record.case(shape=shape, dynamic=spec.dynamic, example=spec.example.label)
    outcome = isolated(shapes.roundtrip, impl.spec, shape, name, str(device), inputs, example,
                       timeout=TIMEOUT)
    if outcome.kind != "returned":
        record.require(exact("the round trip returns (no crash, no hang)", 1, 1,
                             isolated.explain().replace("\n", " | ")))
    if "missing" in outcome.value:
        skip_missing(f"implementation {impl.name}: {outcome.value['missing']}")
    judge(record, spec, name, shapes.build(spec, dtype), outcome.value, inputs,
          eager_is_baseline=impl.spec != "impls.export:eager")
