"""Demo tests for expected failures measured on older releases than the installed torch
(matrix: demo_measured_matrix.yaml)."""

import pytest

from conformance.harness.compare import Measurement

pytestmark = pytest.mark.area("demo")


def test_fixed_past_measured(impl, record):
    record.require(Measurement("within the bound", 0.5, 1.0))


def test_fixed_within_measured(impl, record):
    record.require(Measurement("within the bound", 0.5, 1.0))


def test_still_failing_past_measured(impl, record):
    record.require(Measurement("twice the bound", 2.0, 1.0))
