"""The run's verdict and its not-run tests in pytest's JUnit XML (``--junitxml``, or
``DIR/junit.xml`` with ``--report DIR``): a ``conformance_verdict`` property on the test
suite, and one skipped test case per collected test that never ran, so that the XML counts
every collected test as the report does."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.harness.outcomes import NOT_RUN_TAG


def _logxml(config: pytest.Config) -> Any:
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - a pytest without it writes no XML of ours
        return None
    return config.stash.get(xml_key, None)


def add_verdict(config: pytest.Config, verdict: str, collected: int) -> None:
    xml = _logxml(config)
    if xml is None:
        return
    xml.add_global_property("conformance_verdict", verdict)
    xml.add_global_property("conformance_collected", str(collected))


def add_not_run(config: pytest.Config, entries: list[Any]) -> None:
    """One skipped case per test that never reported (not-run), with its reason."""
    xml = _logxml(config)
    if xml is None:
        return
    for entry in entries:
        path = entry.nodeid.split("::", 1)[0]
        for when, outcome, longrepr in (
                ("setup", "skipped", (path, 0, f"Skipped: {NOT_RUN_TAG} {entry.reason}")),
                ("teardown", "passed", None)):
            xml.pytest_runtest_logreport(pytest.TestReport(
                nodeid=entry.nodeid, location=(path, None, entry.nodeid), keywords={},
                outcome=outcome, longrepr=longrepr, when=when))
