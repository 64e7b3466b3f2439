"""The export area's profile plan (plan.py): deselect the round trips a profile leaves out,
and say how many in the header."""

from __future__ import annotations

import pytest

from conformance.areas.export.plan import planned, planned_calls, planned_shape, planned_tf32
from conformance.harness.runstate import STATE, left_out_by_profile

LEFT_OUT = pytest.StashKey[int]()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    profile = config.stash[STATE].profile
    keep, drop = [], []
    for item in items:
        spec = getattr(item, "callspec", None)
        params = spec.params if spec else {}
        test = getattr(item, "originalname", "")
        if test == "test_calls":
            dtype = str(params.get("dtype", "")).removeprefix("torch.")
            name = getattr(params.get("impl"), "name", "")
            (keep if planned_calls(name, dtype, profile) else drop).append(item)
            continue
        if test not in ("test_roundtrip", "test_roundtrip_tf32", "test_shape") or (
                "model" not in params and "shape" not in params):
            keep.append(item)
            continue
        impl = params.get("impl")
        dtype = str(params.get("dtype", "")).removeprefix("torch.")
        name = getattr(impl, "name", "")
        if test == "test_roundtrip_tf32":
            ok = planned_tf32(name, profile)
        elif test == "test_shape":
            ok = planned_shape(name, params["shape"], dtype, profile)
        else:
            ok = planned(name, params["model"], params["variant"], dtype, profile)
        (keep if ok else drop).append(item)
    if drop:
        items[:] = keep
        config.hook.pytest_deselected(items=drop)
        left_out_by_profile(config, drop)
    config.stash[LEFT_OUT] = len(drop)


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    left = config.stash.get(LEFT_OUT, 0)
    profile = config.stash[STATE].profile
    if not left:
        return []
    return [f"torch-conformance export: {left} round trips left out by the {profile} profile "
            f"(conformance/areas/export/plan.py; --profile thorough runs them)"]
