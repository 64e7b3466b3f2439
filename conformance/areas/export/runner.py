"""The parent side of a round trip: build the case's inputs, run ``cases.roundtrip`` in the
isolation runner's child, and judge what came back (checks.py)."""

from __future__ import annotations

from typing import Any

from conformance.areas.export import cases
from conformance.areas.export.catalogue import EXAMPLE, MODELS, build, make_inputs
from conformance.areas.export.checks import judge, sizes
from conformance.harness.compare import exact
from conformance.harness.outcomes import missing as skip_missing
from conformance.harness.tensors import dtype_name

TIMEOUT = 300.0  # one round trip: an AOTInductor build of a 2-layer LSTM takes ~20 s here


def run_case(impl: Any, model: str, variant: str, dtype: Any, device: Any, record: Any,
             isolated: Any, *, tf32: bool = False) -> None:
    """One round trip of ``impl`` on catalogue ``model`` with ``variant``'s dynamic shapes."""
    spec = MODELS[model]
    name = dtype_name(dtype)
    at = sizes(spec)
    inputs = [make_inputs(spec, b, s, name) for b, s in at]
    example = make_inputs(spec, *EXAMPLE, name)
    record.case(model=model, variant=variant, example=list(EXAMPLE))
    outcome = isolated(cases.roundtrip, impl.spec, model, variant, name, str(device), at,
                       inputs, example, tf32, timeout=TIMEOUT)
    if outcome.kind != "returned":
        record.require(exact("the round trip returns (no crash, no hang)", 1, 1,
                             isolated.explain().replace("\n", " | ")))
    if "missing" in outcome.value:
        skip_missing(f"implementation {impl.name}: {outcome.value['missing']}")
    judge(record, spec, variant, name, build(spec, dtype), outcome.value, inputs,
          eager_is_baseline=impl.spec != "impls.export:eager", tf32=tf32)
