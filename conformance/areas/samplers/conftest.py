"""The samplers' false-alarm budget: the statistical checks the collected tests declare
(``stat_checks``) must fit in ``conformance.stats.gof.CHECK_BUDGET``, so that a run's
family-wise false-alarm rate is at most ``FAMILY_ALPHA`` at the fixed per-check level."""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np
import pytest

from conformance.stats import gof
from conformance.stats.gof import ALPHA, CHECK_BUDGET, FAMILY_ALPHA

RANDOMISER_SALT = 0x5C0E  # keeps the score uniforms' stream apart from the data's (rng)


@pytest.fixture(autouse=True)
def randomised_scores(request: pytest.FixtureRequest, conformance_state) -> Iterator[None]:
    """The chi-squares of a sampler test score their links with seeded uniforms (exact
    level, ``conformance.stats.tails.randomised_score``), drawn from --seed and the test id:
    reproducible, and independent of the sample."""
    salt = zlib.crc32(request.node.nodeid.encode())
    token = gof.RANDOMISER.set(
        np.random.default_rng([conformance_state.seed, salt, RANDOMISER_SALT]))
    yield
    gof.RANDOMISER.reset(token)


def declared_checks(items: list[pytest.Item]) -> int:
    return sum(getattr(getattr(i, "function", None), "stat_checks", 0) for i in items)


@pytest.hookimpl(trylast=True)  # after -k / -m deselection: only the tests that will run
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    total = declared_checks(items)
    config.stash[BUDGET_KEY] = total
    if total + 1 > CHECK_BUDGET:  # one more: all support checks together (checks.py)
        message = (f"the collected sampler tests declare {total} statistical checks, more "
                   f"than the budget of {CHECK_BUDGET} (per-check level {ALPHA:.3g} keeps the "
                   f"run's false-alarm rate below {FAMILY_ALPHA:g}); run fewer "
                   "implementations at once")
        if not hasattr(config, "workerinput"):
            raise pytest.UsageError(message)
        # an xdist worker cannot end the run with a usage error (xdist reports a lost
        # worker instead): every sampler test errors at setup with the message
        config.stash[OVER_BUDGET] = message


OVER_BUDGET = pytest.StashKey[str]()


def pytest_runtest_setup(item: pytest.Item) -> None:
    message = item.config.stash.get(OVER_BUDGET, None)
    if message is not None and getattr(item, "function", None) is not None \
            and hasattr(item.function, "stat_checks"):
        raise RuntimeError(message)


BUDGET_KEY = pytest.StashKey[int]()


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"torch-conformance samplers: per-check level {ALPHA:.3g}, budget {CHECK_BUDGET} "
            f"checks, family-wise false-alarm rate <= {FAMILY_ALPHA:g}"]


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    total = config.stash.get(BUDGET_KEY, 0)
    return [f"torch-conformance samplers: {total} statistical checks declared "
            f"(budget {CHECK_BUDGET}, level {ALPHA:.3g} each)"]
