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
from conformance.areas.export.catalogue import MODELS, build
from conformance.areas.export.runner import run_case
from conformance.harness.compare import exact

pytestmark = pytest.mark.area("export")


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
    run_case(impl, model, variant, dtype, device, record, isolated)


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
