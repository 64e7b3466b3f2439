"""Attention conformance: forward output, lse and gradients against the float64 oracle
under the FlashAttention rule (conformance/areas/attention/checks.py).

Every test runs per registered attention implementation and dtype; cases an
implementation does not declare (masks, score mods, GQA, lse, backward, head dims) are
reported as unsupported, never as passed.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.areas.attention.cases import AttnCase
from conformance.areas.attention.checks import check_backward, check_forward, require_claimed
from conformance.areas.attention.strategies import attn_cases
from conformance.harness.profiles import examples

pytestmark = pytest.mark.area("attention")


@examples(0.5)
@given(data=st.data())
def test_forward_random(impl, dtype, device, record, data):
    """Random geometry (GQA, Sq != Sk, awkward lengths, head dims), masks and mods."""
    case = data.draw(attn_cases(impl, dtype, device), label="case")
    check_forward(record, impl, case, lse=False)


@pytest.mark.needs("lse")
@examples(0.5)
@given(data=st.data())
def test_forward_lse_random(impl, dtype, device, record, data):
    """As test_forward_random, also checking the natural-log logsumexp."""
    case = data.draw(attn_cases(impl, dtype, device, lse=True), label="case")
    check_forward(record, impl, case, lse=True)


@pytest.mark.needs("backward")
@examples(0.5)
@given(data=st.data())
def test_backward_random(impl, dtype, device, record, data):
    """dQ, dK, dV of random cases."""
    case = data.draw(attn_cases(impl, dtype, device, backward=True), label="case")
    check_backward(record, impl, case)


CATALOGUE = [
    (None, None),  # dense: an implementation without masks or mods meets the shapes too
    ("causal_tl", None), ("causal_br", None), ("sliding_window", None), ("prefix_lm", None),
    ("document", None), ("block_sparse", None),
    (None, "alibi"), (None, "softcap"), (None, "rel_bias"), (None, "bias_lookup"),
    (None, "head_scale"),
    ("causal_br", "softcap"), ("document", "alibi"), ("block_sparse", "bias_lookup"),
    ("sliding_window", "rel_bias"),
]
CATALOGUE_IDS = [f"{m or 'nomask'}+{s or 'nomod'}" for m, s in CATALOGUE]


def _catalogue_case(impl, dtype, device, mask, score_mod, sq=113, sk=239) -> AttnCase:
    batch, hq = 2, 4
    if 2 * 4 * sq * sk > impl.caps.limits.get("max_scores", 2 * 4 * sq * sk):
        batch, hq = 1, 2  # the implementation asks for small cases (an interpreter)
    hkv = hq // 2 if impl.caps.claims("gqa") else hq
    dims = impl.caps.limits.get("head_dims", [64])
    d = 64 if 64 in dims else dims[0]
    return AttnCase(batch, hq, hkv, sq, sk, d, d, dtype, mask, score_mod, None, seed=11,
                    device=device)


@pytest.mark.parametrize("mask,score_mod", CATALOGUE, ids=CATALOGUE_IDS)
def test_forward_catalogue(impl, dtype, device, record, mask, score_mod):
    """Dense attention and every mask and score mod of the catalogue (Sq = 113 != Sk = 239,
    GQA where declared)."""
    case = _catalogue_case(impl, dtype, device, mask, score_mod)
    require_claimed(impl, case)
    check_forward(record, impl, case, lse=False)


@pytest.mark.needs("lse")
@pytest.mark.parametrize("mask,score_mod", CATALOGUE, ids=CATALOGUE_IDS)
def test_forward_lse_catalogue(impl, dtype, device, record, mask, score_mod):
    """The catalogue again, with the natural-log logsumexp (-inf on fully masked rows)."""
    case = _catalogue_case(impl, dtype, device, mask, score_mod)
    require_claimed(impl, case, lse=True)
    check_forward(record, impl, case, lse=True)


@pytest.mark.needs("backward")
@pytest.mark.parametrize("mask,score_mod", CATALOGUE, ids=CATALOGUE_IDS)
def test_backward_catalogue(impl, dtype, device, record, mask, score_mod):
    """Gradients for every catalogue entry."""
    case = _catalogue_case(impl, dtype, device, mask, score_mod, sq=129, sk=127)
    require_claimed(impl, case, backward=True)
    check_backward(record, impl, case)
