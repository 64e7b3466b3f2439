"""The collectives areas' profile plan: test_sizes runs the profile's dtypes, and in ci
the shipped ``torch.distributed.nn`` adapters (the same c10d transport as the functional
ones) sit it out; test_first_collective (a pool of its own per test, ~4 s) runs in ci for
the shipped functional adapters of the ops with a gather / scatter dim or splits and of
all_reduce, and for every implementation in dev and thorough; the header says how many
were left out."""

from __future__ import annotations

import pytest

from conformance.areas.collectives.scale import PROFILE_SIZE_DTYPES
from conformance.harness.runstate import ProfilePlan

FIRST_COLLECTIVE_CI = ("all_reduce", "all_gather_tensor", "reduce_scatter_tensor",
                       "all_to_all_single")


def _shipped_nn(impl: object) -> bool:
    return getattr(impl, "origin", "") == "builtin" and \
        getattr(impl, "name", "").startswith("nn.")


def _planned(item: pytest.Item, profile: str) -> bool:
    name = getattr(item, "originalname", "")
    params = item.callspec.params if hasattr(item, "callspec") else {}
    impl = params.get("impl")
    if name == "test_first_collective":
        if profile != "ci" or getattr(impl, "origin", "") != "builtin":
            return True
        return not _shipped_nn(impl) and getattr(item.cls, "op", "") in FIRST_COLLECTIVE_CI
    if name != "test_sizes":
        return True
    dtype = str(params.get("dtype", "")).removeprefix("torch.")
    if profile == "ci" and _shipped_nn(impl):
        return False
    return dtype in PROFILE_SIZE_DTYPES[profile]


PLAN = ProfilePlan("collectives", "size and first-collective cases",
                   "its dtypes and implementations: conformance/areas/collectives/conftest.py",
                   _planned)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    PLAN.deselect(config, items)


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    return PLAN.header(config)
