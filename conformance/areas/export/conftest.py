"""The export area's profile plan (plan.py): deselect the round trips a profile leaves out,
and say how many in the header."""

from __future__ import annotations

import pytest

from conformance.areas.export.plan import planned, planned_calls, planned_shape, planned_tf32
from conformance.harness.runstate import ProfilePlan


def _planned(item: pytest.Item, profile: str) -> bool:
    spec = getattr(item, "callspec", None)
    params = spec.params if spec else {}
    test = getattr(item, "originalname", "")
    dtype = str(params.get("dtype", "")).removeprefix("torch.")
    name = getattr(params.get("impl"), "name", "")
    if test == "test_calls":
        return planned_calls(name, dtype, profile)
    if test not in ("test_roundtrip", "test_roundtrip_tf32", "test_shape") or (
            "model" not in params and "shape" not in params):
        return True
    if test == "test_roundtrip_tf32":
        return planned_tf32(name, profile)
    if test == "test_shape":
        return planned_shape(name, params["shape"], dtype, profile)
    return planned(name, params["model"], params["variant"], dtype, profile)


PLAN = ProfilePlan("export", "round trips",
                   "conformance/areas/export/plan.py; --profile thorough runs them", _planned)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    PLAN.deselect(config, items)


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    return PLAN.header(config)
