"""A program across calls and builds in one process (area ``export``; calls.py): new values
in the same input tensors, outputs kept from an earlier call, non-contiguous inputs, a
second module of the same architecture with other weights, and the artefact the program
reports, loaded by a fresh process. The LSTM at the example size, static shapes, in the
isolation child."""

from __future__ import annotations

import pytest

from conformance.areas.export import calls
from conformance.harness.compare import exact
from conformance.harness.outcomes import missing as skip_missing
from conformance.harness.tensors import dtype_name

pytestmark = pytest.mark.area("export")
TIMEOUT = 300.0


def test_calls(impl, dtype, device, record, isolated):
    name = dtype_name(dtype)
    a, b = calls.inputs(name)
    outcome = isolated(calls.child, impl.spec, name, str(device), a, b, timeout=TIMEOUT)
    if outcome.kind != "returned":
        record.require(exact("the case returns (no crash, no hang)", 1, 1,
                             isolated.explain().replace("\n", " | ")))
    if "missing" in outcome.value:
        skip_missing(f"implementation {impl.name}: {outcome.value['missing']}")
    calls.judge(record, name, outcome.value, a, b)
