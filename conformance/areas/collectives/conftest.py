"""The collectives areas' profile plan for the size sweep (scale.py): test_sizes runs the
profile's dtypes, and in ci the shipped ``torch.distributed.nn`` adapters (the same c10d
transport as the functional ones) sit it out; the header says how many were left out."""

from __future__ import annotations

import pytest

from conformance.areas.collectives.scale import PROFILE_SIZE_DTYPES
from conformance.harness.runstate import STATE, deselect_by_profile

LEFT_OUT = pytest.StashKey[int]()


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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    profile = config.stash[STATE].profile
    config.stash[LEFT_OUT] = deselect_by_profile(config, items,
                                                 lambda item: _planned(item, profile))


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    left = config.stash.get(LEFT_OUT, 0)
    if not left:
        return []
    profile = config.stash[STATE].profile
    return [f"torch-conformance collectives: {left} size cases left out by the {profile} "
            f"profile (its dtypes and implementations: conformance/areas/collectives/"
            f"scale.py)"]
