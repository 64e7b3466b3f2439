"""Export round trips (area ``export``): every path (impls/export.py) on every catalogue
model (catalogue.py), exported at the example size with a variant's dynamic shapes, run at
other batch sizes and lengths, against the float64 oracle with the error-ratio rule
(checks.py). Each round trip is built once and runs in the isolation runner's child, so a
program that crashes at some size fails its test and the session goes on.

Variants: ``static`` (no dynamic dims: every other size must be refused or right),
``batch`` / ``seq`` (a named ``Dim``: the feature ``dynamic.batch`` / ``dynamic.seq``; the
program must accept every size in the range), ``auto`` (``Dim.AUTO`` on both: what stayed
dynamic is recorded, a specialised dim must refuse). The report's notes carry, per model
and path, ``dynamic_dims``, the sizes accepted and refused, and ``build_seconds``.
"""

from __future__ import annotations

import pytest
import torch

from conformance.areas.export import cases
from conformance.areas.export.catalogue import EXAMPLE, MODELS, build, make_inputs
from conformance.areas.export.checks import judge, sizes
from conformance.harness.compare import exact
from conformance.harness.outcomes import missing as skip_missing
from conformance.harness.tensors import dtype_name

pytestmark = pytest.mark.area("export")
TIMEOUT = 300.0  # one round trip: an AOTInductor build of a 2-layer LSTM takes ~20 s here


def _variants() -> list:
    out = []
    for name, model in MODELS.items():
        for variant in cases.VARIANTS:
            if variant == "seq" and not model.has_seq:
                continue
            marks = [pytest.mark.needs(f"dynamic.{variant}")] if variant in ("batch", "seq") \
                else []
            out.append(pytest.param(name, variant, marks=marks, id=f"{name}-{variant}"))
    return out


@pytest.mark.parametrize("model,variant", _variants())
def test_roundtrip(impl, model, variant, dtype, device, record, isolated):
    spec = MODELS[model]
    name = dtype_name(dtype)
    at = sizes(spec)
    inputs = [make_inputs(spec, b, s, name) for b, s in at]
    example = make_inputs(spec, *EXAMPLE, name)
    record.case(model=model, variant=variant, example=list(EXAMPLE))
    outcome = isolated(cases.roundtrip, impl.spec, model, variant, name, str(device), at,
                       inputs, example, timeout=TIMEOUT)
    if outcome.kind != "returned":
        record.require(exact("the round trip returns (no crash, no hang)", 1, 1,
                             isolated.explain().replace("\n", " | ")))
    if "missing" in outcome.value:
        skip_missing(f"implementation {impl.name}: {outcome.value['missing']}")
    judge(record, spec, variant, name, build(spec, dtype), outcome.value, inputs,
          eager_is_baseline=impl.spec != "impls.export:eager")


@pytest.mark.parametrize("model", list(MODELS))
def test_state_dict(model, dtype, record, tmp_path):
    """torch.save -> torch.load(weights_only=True) -> load_state_dict into a module with
    other weights gives back every parameter bit for bit (the weights a deployment ships
    next to its program)."""
    source = build(MODELS[model], dtype)
    torch.save(source.state_dict(), tmp_path / "w.pt")
    target = build(MODELS[model], dtype, seed=1)
    target.load_state_dict(torch.load(tmp_path / "w.pt", weights_only=True))
    a, b = source.state_dict(), target.state_dict()
    record.require(exact("same keys", 0 if sorted(a) == sorted(b) else 1, 1))
    mismatched = [k for k in a if not torch.equal(a[k], b[k])]
    record.require(exact("values bit for bit", len(mismatched), len(a),
                         f"mismatched: {mismatched}"))
