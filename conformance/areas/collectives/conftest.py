"""The collectives areas' profile plan for the size sweep (scale.py): test_sizes runs the
profile's dtypes, and in ci the shipped ``torch.distributed.nn`` adapters (the same c10d
transport as the functional ones) sit it out; the header says how many were left out."""

from __future__ import annotations

import pytest

from conformance.areas.collectives.scale import PROFILE_SIZE_DTYPES
from conformance.harness.runstate import ProfilePlan


def _planned(item: pytest.Item, profile: str) -> bool:
    if getattr(item, "originalname", "") != "test_sizes":
        return True
    params = item.callspec.params
    dtype = str(params.get("dtype", "")).removeprefix("torch.")
    impl = params.get("impl")
    if profile == "ci" and getattr(impl, "origin", "") == "builtin" and \
            getattr(impl, "name", "").startswith("nn."):
        return False
    return dtype in PROFILE_SIZE_DTYPES[profile]


PLAN = ProfilePlan("collectives", "size cases", "its dtypes and implementations: "
                   "conformance/areas/collectives/scale.py", _planned)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    PLAN.deselect(config, items)


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    return PLAN.header(config)
