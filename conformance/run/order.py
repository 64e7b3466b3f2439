"""``--test-order``: run the collection forward (the default), reversed, or shuffled with a
recorded seed. No verdict may depend on it (docs/reference/outcomes.md, order
independence): ``ci/order-proof.sh`` runs the qualification each way and at several ``-n``
and compares every test's outcome; ``tests/test_order_independence.py`` does it in small.

A plugin of its own (``conformance.plugin``'s ``pytest_plugins``): its reordering runs after
every deselection. Every xdist worker must collect the same list in the same order, so the
shuffle's seed is part of the option (``shuffle:SEED``); a bare ``shuffle`` draws one in the
controller and hands it to the workers, and the header prints the option that reproduces
the order.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

ORDERS = ("forward", "reverse", "shuffle")
_KEY = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("torch-conformance").addoption(
        "--test-order", dest="conformance_test_order", default="forward",
        metavar="forward|reverse|shuffle[:SEED]",
        help="the order tests run in: forward (collection order, the default), reverse, or "
             "shuffled (shuffle:SEED; shuffle draws and prints a seed). No verdict depends on it")


def parse(text: str) -> str:
    """The order ``text`` names, a bare shuffle given a drawn seed; UsageError if malformed."""
    kind, _, seed = text.partition(":")
    if kind not in ORDERS or (seed and (kind != "shuffle" or not seed.isdigit())):
        raise pytest.UsageError(f"--test-order: {text!r} is not forward, reverse, shuffle or "
                                f"shuffle:SEED (a non-negative integer)")
    if kind == "shuffle" and not seed:
        return f"shuffle:{random.SystemRandom().randrange(2**31)}"
    return text


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    given = getattr(config, "workerinput", {}).get("conformance_test_order")
    config.stash[_KEY] = given or parse(
        str(getattr(config.option, "conformance_test_order", None) or "forward"))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: every worker shuffles with the controller's seed."""
    node.workerinput["conformance_test_order"] = node.config.stash[_KEY]


def pytest_report_header(config: pytest.Config) -> list[str]:
    text = config.stash.get(_KEY, "forward")
    return [] if text == "forward" else [f"torch-conformance: test order {text} "
                                         f"(reproduce with --test-order={text})"]


@pytest.hookimpl(trylast=True)  # after every deselection (-k, -m, shards, profile plans)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    text = config.stash.get(_KEY, "forward")
    if text == "reverse":
        items.reverse()
    elif text.startswith("shuffle:"):
        random.Random(int(text.split(":", 1)[1])).shuffle(items)
