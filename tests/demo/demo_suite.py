"""Demo area: one test per outcome the harness must account for."""

import pytest

from conformance.harness.compare import Measurement
from conformance.harness.outcomes import missing

pytestmark = pytest.mark.area("demo")


def test_pass(impl, dtype, record):
    record.require(Measurement("half the bound", 0.5, 1.0))


def test_fail(impl, dtype, record):
    record.case(size=3)
    record.require(Measurement("twice the bound", 2.0, 1.0, detail="planted"))


def test_known_bug(impl, dtype, record):
    record.require(Measurement("twice the bound", 2.0, 1.0))


def test_not_applicable(impl, dtype, record):
    raise AssertionError("must not run")


@pytest.mark.needs("fancy")
def test_needs_feature(impl, dtype, record):
    raise AssertionError("must not run")


def test_loose(impl, dtype, record):
    record.require(Measurement("three times the bound", 3.0, 1.0))


def test_missing_hardware(impl, record):
    missing("needs two GPUs")
