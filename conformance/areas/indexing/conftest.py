"""The indexing areas' profile plan for the invalid-index kinds (ops.py): in ci, the
kinds added for issue 44 (INT64_MAX, 2^32 + 1, a size-0 dim, a stride-0 index) run in one
floating and one integer dtype, and the large tier once per op (test_large and a late bad
index, float32; int64 for one_hot and bincount); dev and thorough run every kind and the
large tier in every dtype; only thorough runs the 64-bit cases (test_wide.py). The
movement ops' integer and bool data dtypes run test_invalid[n / wrap32 / mask_short] in ci,
everything in dev."""

from __future__ import annotations

import pytest
import torch

from conformance.harness.runstate import ProfilePlan

CI_DTYPES = ("float32", "int64")  # the ci dtypes of the kinds below
CI_NARROW_KINDS = ("int64_max", "wrap32", "empty_dim", "expanded")
CI_TIER = "late_in_large"  # the large tier's one case per op in ci (all_in_large: dev)


def _one_case_dtype(item: pytest.Item) -> str:
    """The dtype of an op's one large case in ci: float32, or int64 for the integer-only
    areas (one_hot, bincount)."""
    area = item.get_closest_marker("area")
    name = str(area.args[0]) if area is not None and area.args else ""
    return "int64" if name in ("indexing.one_hot", "indexing.bincount") else "float32"


NARROW_DATA = ("int32", "int8", "uint8", "bool", "complex64")  # the movement ops' (issue 44)
CI_NARROW = ("n", "wrap32", "mask_short")  # the kinds those dtypes run in ci


def _planned(item: pytest.Item, profile: str) -> bool:
    name = getattr(item, "originalname", "")
    if profile == "ci" and "indexing" in item.path.parts and hasattr(item, "callspec") and \
            str(item.callspec.params.get("dtype", "")).removeprefix("torch.") in NARROW_DATA:
        # ci: those dtypes one past the end, 2^32 + 1 and a short mask only (a kernel's
        # bounds check per dtype); their valid cases (Hypothesis, 0.2 s each) run in dev
        return name == "test_invalid" and item.callspec.params.get("kind") in CI_NARROW

    if name == "test_64bit" and "indexing" in item.path.parts:  # 4 GiB operands
        return profile == "thorough"
    if profile != "ci" or name not in ("test_invalid", "test_large") or \
            "indexing" not in item.path.parts:
        return True
    params = item.callspec.params
    kind, dtype = params.get("kind"), str(params.get("dtype", "")).removeprefix("torch.")
    if name == "test_large" or kind == CI_TIER:
        return dtype == _one_case_dtype(item)
    if kind == "all_in_large":
        return False
    return kind not in CI_NARROW_KINDS or dtype in CI_DTYPES


PLAN = ProfilePlan("indexing", "invalid-index cases", "its kinds and dtypes: "
                   "conformance/areas/indexing/conftest.py", _planned)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    PLAN.deselect(config, items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start this process's isolation child for the invalid cases now (a torch import,
    seconds) so that it is warm when the first one runs, not on that test's clock."""
    if session.config.getoption("conformance_isolation", "child") != "child" or \
            not any(getattr(i, "originalname", "") == "test_invalid" and
                    "indexing" in i.path.parts for i in session.items):
        return
    from conformance.harness.runstate import STATE
    from conformance.processes.isolate import prestart

    state = session.config.stash.get(STATE, None)
    if state is None:
        return
    spec = state.matrix.devices.get(state.device.matrix_key)
    if spec is not None and spec.isolate_errors:  # the isolated fixture's key: str(device)
        # where every error retires its child, a spare starts while a case runs
        prestart(str(torch.device(state.device.torch_device)),
                 count=2 if spec.after_error == "poisoned" else 1)


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    return PLAN.header(config)
