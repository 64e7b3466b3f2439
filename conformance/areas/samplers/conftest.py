"""The samplers' false-alarm budget: the statistical checks the collected tests declare
(``stat_checks``) must fit in ``conformance.stats.gof.CHECK_BUDGET``, so that a run's
family-wise false-alarm rate is at most ``FAMILY_ALPHA`` at the fixed per-check level."""

from __future__ import annotations

import pytest

from conformance.stats.gof import ALPHA, CHECK_BUDGET, FAMILY_ALPHA


def declared_checks(items: list[pytest.Item]) -> int:
    return sum(getattr(getattr(i, "function", None), "stat_checks", 0) for i in items)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    total = declared_checks(items)
    if total + 1 > CHECK_BUDGET:  # one more: all support checks together (checks.py)
        raise pytest.UsageError(
            f"the collected sampler tests declare {total} statistical checks, more than the "
            f"budget of {CHECK_BUDGET} (per-check level {ALPHA:.3g} keeps the run's "
            f"false-alarm rate below {FAMILY_ALPHA:g}); run fewer implementations at once")
    config.stash[BUDGET_KEY] = total


BUDGET_KEY = pytest.StashKey[int]()


def pytest_report_header(config: pytest.Config) -> list[str]:
    return [f"torch-conformance samplers: per-check level {ALPHA:.3g}, budget {CHECK_BUDGET} "
            f"checks, family-wise false-alarm rate <= {FAMILY_ALPHA:g}"]


def pytest_report_collectionfinish(config: pytest.Config, items: list[pytest.Item]) -> list[str]:
    total = config.stash.get(BUDGET_KEY, 0)
    return [f"torch-conformance samplers: {total} statistical checks declared "
            f"(budget {CHECK_BUDGET}, level {ALPHA:.3g} each)"]
