"""The FA4 numerics model (impls/attention/fa4/model.py): its building blocks against
mpmath and analytic values, and the planted faults of issue 5 flagged by the suite."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import torch

from conformance.areas.attention.test_fa4_algorithm import expected_rescales, spec_poly_error
from impls.attention.fa4 import spec
from impls.attention.fa4.model import fma32, hardware_exp2, software_exp2
from tests.conftest import SUITE


def test_polynomial_is_a_faithful_exp2_on_the_unit_interval():
    """p(0) = 1 and p(1) = 2 exactly in fp32 (so exp2 is continuous across integers), and
    the grid bound of the check agrees with mpmath's maximum to 1 %."""
    c = [mpmath.mpf(float(np.float32(x))) for x in spec.EXP2_POLY]
    one = torch.ones(1, dtype=torch.float32)
    c3 = torch.tensor([spec.EXP2_POLY[3]], dtype=torch.float32)
    p1 = fma32(fma32(fma32(c3, one, spec.EXP2_POLY[2]), one, spec.EXP2_POLY[1]), one, 1.0)
    assert float(p1[0]) == 2.0  # the kernel's Horner with fp32 FMAs at f = 1

    def rel(f):
        return abs((c[0] + f * (c[1] + f * (c[2] + f * c[3]))) / mpmath.power(2, f) - 1)

    # the error of a minimax cubic equioscillates; find each local maximum with mpmath
    fs = np.linspace(0, 1, 2001)
    vals = [float(rel(mpmath.mpf(float(f)))) for f in fs]
    peaks = [i for i in range(1, 2000) if vals[i] >= vals[i - 1] and vals[i] >= vals[i + 1]]
    best = max(float(rel(mpmath.findroot(
        lambda f: mpmath.diff(rel, f), mpmath.mpf(float(fs[i]))))) for i in peaks)
    assert best < 2.0**-13
    assert abs(spec_poly_error() - best) <= 0.01 * best


@pytest.mark.parametrize("y", [-126.0, -100.5, -1.0, -0.25, 0.0, 0.5, 3.75, 7.999])
def test_software_exp2_against_mpmath(y):
    got = float(software_exp2(torch.tensor([y], dtype=torch.float32))[0])
    want = float(mpmath.power(2, mpmath.mpf(y)))
    assert abs(got / want - 1) <= spec_poly_error() + 4 * 2.0**-24


def test_exp2_edges():
    """-inf (masked) gives 0 on both paths; the hardware one flushes subnormals to zero."""
    minus_inf = torch.tensor([-math.inf], dtype=torch.float32)
    assert float(software_exp2(minus_inf)[0]) == 0.0
    assert float(hardware_exp2(minus_inf)[0]) == 0.0
    assert float(hardware_exp2(torch.tensor([-126.5]))[0]) == 0.0
    assert float(hardware_exp2(torch.tensor([-126.0]))[0]) == 2.0**-126


def test_fma32_rounds_once():
    """fma(a, b, -a*b) recovers the product's rounding error, which two roundings lose."""
    a = torch.tensor([1.0 + 2.0**-12], dtype=torch.float32)
    prod = a * a  # rounded
    assert float(fma32(a, a, -prod)[0]) == 2.0**-24
    assert float((a * a - prod)[0]) == 0.0


def test_expected_rescales_follows_the_stale_max_rule():
    c = 1.0  # maxima in log2 units
    assert expected_rescales([0, 3, 6, 9, 12], c) == (1, 6.0)  # 9 - 0 > 8: rescale once
    assert expected_rescales([0, 10, 20], c) == (2, 0.0)
    assert expected_rescales([0, 7.9, 15.8, 23.7], c) == (1, 7.9)


FAULTS = [
    ("rescale_skip_uncorrected", "catalogue", "out within"),
    ("threshold_in_ln", "rescale_threshold", "at most 2**threshold"),
    ("poly_wrong_coefficient", "software_exp2", "software exp2"),  # (the lse checks too)
    ("p_not_rounded", "p_rounded", "P rounded to the input dtype"),
    # the backward (issue 20): the sm100 kernel's arithmetic
    ("ds_from_unrounded_p", "ds_from_declared_p", "dS from the rounded P"),
    ("dq_missing_scale", "backward_catalogue and float16", "dQ within"),
    ("gqa_reduce_one_head", "gqa_head_mapping", "dK within"),
    ("softcap_grad_wrong_sign", "softcap_formula", "dQ within"),
]


@pytest.mark.parametrize("fault,scope,expected", FAULTS, ids=[f[0] for f in FAULTS])
def test_fa4_planted_fault_is_flagged(suite, fault, scope, expected):
    spec_ = f"planted.fa4_faults:{fault}"
    run = suite(str(SUITE / "attention"), "-n", "0", "-q", "-x", "--no-builtins", "-k", scope,
                f"--impl=attention={spec_}")
    assert run.returncode == 1, run.output[-3000:]
    assert expected in run.stdout, run.stdout[-3000:]
    assert f"--impl=attention={spec_}" in run.stdout
    failed = [r for r in run.report["results"] if r["outcome"] == "failed"]
    assert failed and all(r["impl"] == f"planted.fa4_{fault}" for r in failed)


def test_backward_follows_the_kernels_statement():
    """Each model's backward is its kernel's (spec.BWD): tiles and the P that dS uses."""
    from impls.attention.fa4.model import fa4_model_sm90, fa4_model_sm100

    for model in (fa4_model_sm90, fa4_model_sm100):
        bwd = spec.BWD[model.arch]
        assert model.config.bwd_tile == bwd["tile"]
        assert model.config.ds_from_rounded_p == bwd["ds_from_rounded_p"]
        assert (model.config.dq_scale, model.config.gqa_reduce,
                model.config.softcap_grad_sign) == (True, "sum", 1.0)
    assert fa4_model_sm100.with_config("x", dq_scale=False).arch == "sm100"


def test_fa4_correct_config_passes(suite):
    """The control: the spec's configuration under a planted name passes the same scopes."""
    run = suite(str(SUITE / "attention"), "-n", "0", "-q", "--no-builtins", "-k",
                "catalogue or fa4_algorithm or gqa_head_mapping or softcap_formula",
                "--impl=attention=planted.fa4_faults:correct")
    assert run.returncode == 0, run.stdout[-3000:]
    assert run.report["summary"]["passed"] > 80
