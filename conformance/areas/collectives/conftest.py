"""The collectives areas' profile plan for the size sweep (scale.py): test_sizes runs the
profile's dtypes, and in ci the shipped ``torch.distributed.nn`` adapters (the same c10d
transport as the functional ones) sit it out; the header says how many were left out."""

from __future__ import annotations

import pytest

from conformance.areas.collectives.scale import PROFILE_SIZE_DTYPES
from conformance.harness.runstate import STATE, left_out_by_profile

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
    keep = [i for i in items if _planned(i, profile)]
    drop = [i for i in items if not _planned(i, profile)]
    if drop:
        items[:] = keep
        config.hook.pytest_deselected(items=drop)
        left_out_by_profile(config, drop)
    config.stash[LEFT_OUT] = len(drop)


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    left = config.stash.get(LEFT_OUT, 0)
    if not left:
        return []
    profile = config.stash[STATE].profile
    return [f"torch-conformance collectives: {left} size cases left out by the {profile} "
            f"profile (conformance/areas/collectives/scale.py; --profile dev runs them)"]
