"""Demo tests for expected failures that state their failure, and version-gated entries
(matrix: demo_expect_matrix.yaml)."""

import pytest

from conformance.harness.compare import Measurement

pytestmark = pytest.mark.area("demo")


def test_value_as_expected(impl, record):
    record.require(Measurement("twice the bound", 2.0, 1.0))


def test_crash_where_value_expected(impl, record):
    raise TypeError("planted crash in the implementation")


def test_other_check_fails(impl, record):
    record.require(Measurement("another check", 2.0, 1.0))


def test_crash_as_expected(impl, record):
    raise RuntimeError("device lost: planted")


def test_crash_other_message(impl, record):
    raise RuntimeError("something else")


def test_plain_assert_is_no_check(impl, record):
    raise AssertionError("a bare assert, not a conformance check")


def test_gated_applies(impl, record):
    record.require(Measurement("twice the bound", 2.0, 1.0))


def test_gated_not_here(impl, record):
    record.require(Measurement("twice the bound", 2.0, 1.0))


def test_gated_missing_package(impl, record):
    record.require(Measurement("twice the bound", 2.0, 1.0))


def test_gated_tolerance(impl, record):
    record.require(Measurement("three times the bound", 3.0, 1.0))


def test_gated_unsupported(impl, record):
    raise AssertionError("must not run")

