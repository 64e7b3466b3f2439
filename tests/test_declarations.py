"""Declared names are checked against the area's vocabulary: a typo in an implementation's
declaration or in a matrix capability entry is a one-line usage error (exit 4) naming the
implementation, the attribute, the bad name and the closest valid one."""

from __future__ import annotations

import pytest
import yaml

from conformance.harness.errors import ConfigError
from conformance.harness.matrix import DEFAULT_MATRIX, load_matrix
from tests.conftest import SUITE

pytestmark = pytest.mark.harness_only  # no torch behaviour: newest torch only in CI

CASES = [
    ("attention", "backwards_typo",
     "conformance_features: unknown feature 'backwards' for area attention "
     "(did you mean 'backward'?)"),
    ("attention", "fp32_dtype",
     "conformance_dtypes: unknown dtype 'fp32' for area attention (did you mean 'float32'?)"),
    ("attention", "head_dim_limit",
     "conformance_limits: unknown limit 'head_dim' for area attention "
     "(did you mean 'head_dims'?)"),
    ("topk", "gpu_device",
     "conformance_devices: unknown device 'gpu' for area topk (did you mean 'cuda'?)"),
    ("topk", "topk_feature", "conformance_features: unknown feature '2d' for area topk "
                             "(valid: none)"),
]


@pytest.mark.parametrize("area,attr,expected", CASES, ids=[c[1] for c in CASES])
def test_misspelled_declaration_is_a_usage_error(suite, area, attr, expected):
    spec = f"planted.contract_typos:{attr}"
    run = suite(str(SUITE / area), "--device=cpu", "--co", "-q", f"--impl={area}={spec}",
                report=False)
    assert run.returncode == 4, run.output[-2000:]
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert lines == [f"ERROR: --impl '{area}={spec}': {spec}: {expected}"], lines


def test_matrix_capability_entries_use_the_vocabulary(tmp_path):
    data = yaml.safe_load(DEFAULT_MATRIX.read_text())
    data["unsupported"].append({"area": "attention", "impls": ["sdpa.*"],
                                "features": ["backwards"], "reason": "a vendor's typo"})
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_matrix(path)
    n = len(data["unsupported"]) - 1
    assert str(info.value) == (f"{path}: unsupported[{n}].features: unknown feature "
                               "'backwards' for area attention (did you mean 'backward'?)")


def test_vocabulary_covers_what_the_tests_and_builtins_use():
    """Every feature a built-in declares is in its area's vocabulary (the registry would
    refuse it otherwise), and every name in the vocabulary is asked for by some test: the
    attention catalogue's masks and mods, and the needs markers."""
    from conformance.areas.attention.catalogue import MASKS, SCORE_MODS

    matrix = load_matrix()
    att = matrix.areas["attention"].features
    catalogue = {f"mask.{m}" for m in MASKS} | {
        f"score_mod.{e.kind}.{name}" for name, e in SCORE_MODS.items()}
    assert catalogue <= att, catalogue - att
    fixed = {"gqa", "dv_ne_d", "fully_masked_rows", "scale", "lse", "backward",
             "fa4_algorithm"}
    assert att == catalogue | fixed
    assert matrix.areas["gemm"].features == {"2d", "batched", "broadcast"}
    assert not matrix.areas["topk"].features
