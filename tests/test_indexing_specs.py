"""The indexing specs (conformance/areas/indexing/ops.py) against the oracle, the matrix and
the test module: adding an op is one spec entry and one matrix line, so these are the checks
that the rest follows from them."""

from __future__ import annotations

import numpy as np
import pytest

from conformance.areas.indexing import test_indexing
from conformance.areas.indexing.ops import SPECS, corrupt, invalid_params, kinds
from conformance.harness.matrix import load_matrix


def _arrays(case):
    return {name: values for name, (_, values) in case.arrays.items()}


@pytest.mark.parametrize("op", sorted(op for op, spec in SPECS.items() if spec.base_kinds))
def test_negative_rule_agrees_with_the_oracle(op):
    """``negative_ok`` says -1 is a valid index exactly when the oracle takes it; below -n
    every op raises (the oracle encodes torch's documented rule independently). The
    masked ops have no index (their invalid cases are size checks)."""
    spec = SPECS[op]
    case = spec.build(invalid_params(spec, spec.invalid[0], seed=3))
    rng = np.random.default_rng(0)
    minus_one = corrupt(case, "-1", "int64", rng)
    assert minus_one is not None
    if spec.negative_ok:
        spec.oracle(_arrays(minus_one), minus_one.scalars, False)
        assert "-1" not in kinds(spec)
    else:
        with pytest.raises(IndexError):
            spec.oracle(_arrays(minus_one), minus_one.scalars, False)
        assert "-1" in kinds(spec)
    below = corrupt(case, "-n-1", "int64", rng)
    with pytest.raises(IndexError):
        spec.oracle(_arrays(below), below.scalars, False)


def test_every_spec_is_an_area_of_the_matrix_and_of_every_device_listing_the_family():
    matrix = load_matrix(None)
    areas = {a for a in matrix.areas if a.startswith("indexing.")}
    assert areas == {f"indexing.{op}" for op in SPECS}
    for op in SPECS:
        assert matrix.areas[f"indexing.{op}"].builtins == (f"impls.indexing:{op}",)
    for name, device in matrix.devices.items():
        assert areas <= device.areas, name


def test_every_spec_has_its_test_class():
    classes = {name: cls for name, cls in vars(test_indexing).items()
               if isinstance(cls, type) and issubclass(cls, test_indexing.IndexingTests)
               and cls is not test_indexing.IndexingTests}
    assert {cls.op for cls in classes.values()} == set(SPECS)
    for name, cls in classes.items():
        assert cls.pytestmark.args == (f"indexing.{cls.op}",)
        assert cls.__module__ == test_indexing.__name__, name
    assert "TestIndexSelect" in classes and "TestScatter" in classes  # the ids of before


def test_invalid_option_sets_are_options_of_the_op():
    for op, spec in SPECS.items():
        assert spec.invalid, op
        for variant in spec.invalid:
            for name, value in variant.items():
                if name in spec.options:
                    assert value in spec.options[name], (op, name, value)
