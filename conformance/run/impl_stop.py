"""``--stop-impl-after-failure``: ``-x`` for each implementation on its own. Once a test of an
implementation has failed, that implementation's later tests in the process are skipped
(saying why); the other implementations run on. One run can then judge many deliberately
wrong implementations of an area (``torch-conformance selftest``, the project's fault tests)
at the cost of one start-up, each stopping where ``-x`` would have stopped it alone.

A plugin of its own (``conformance.plugin``'s ``pytest_plugins``). Per process: under xdist
each worker stops an implementation after the failures it saw, so use it with ``-n 0``
where the count of an implementation's tests matters.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from conformance.run.keys import ITEM_META

_FAILED = pytest.StashKey[set]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("torch-conformance").addoption(
        "--stop-impl-after-failure", dest="conformance_stop_impl", action="store_true",
        default=False,
        help="skip an implementation's remaining tests once one of them failed (-x per "
             "implementation; for runs that judge many deliberately wrong implementations)")


def _key(item: pytest.Item) -> tuple[str, str] | None:
    meta = item.stash.get(ITEM_META, None)
    if not meta or not meta.get("impl"):
        return None
    return meta["area"], meta["impl"]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if not item.config.getoption("conformance_stop_impl", False):
        return
    key = _key(item)
    if key is not None and key in item.config.stash.get(_FAILED, set()):
        pytest.skip(f"[skipped] {key[1]} failed an earlier test of {key[0]} "
                    "(--stop-impl-after-failure)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Generator[None, Any, None]:
    outcome = yield
    if not item.config.getoption("conformance_stop_impl", False):
        return
    report = outcome.get_result()
    key = _key(item)
    if report.failed and key is not None:
        if _FAILED not in item.config.stash:
            item.config.stash[_FAILED] = set()
        item.config.stash[_FAILED].add(key)
