"""Regressions that need a process history, which each test builds itself from a fresh
compile state (conformance/harness/history.py): every other attention check starts each
call from a fresh state, so its verdict never depends on what ran before it.

- Distinct Python floats captured by a score mod, one after another in one process (a
  model whose layers softcap at different caps; a sweep over caps). Dynamo specialises a
  captured float on its first value and, by automatic dynamic, traces it as a SymFloat
  from the second distinct value on: torch 2.15.0's eager ``flex_attention`` (which
  traces the score mod with Dynamo) then refuses it ("can only be of (Tensor, int,
  SymInt) but got (SymFloat,)"), where 2.14.1 computes every value. Reproducer:
  docs/results/torch-2.15.0.md.
"""

from __future__ import annotations

import pytest

from conformance.areas.attention.cases import AttnCase
from conformance.areas.attention.checks import check_forward, require_claimed
from conformance.harness.history import fresh_compile_state

pytestmark = pytest.mark.area("attention")

CAPS = (5.0, 20.0, 50.0)  # the catalogue's softcap values


@pytest.mark.parametrize("order", ["ascending", "descending"])
def test_distinct_captured_floats(impl, dtype, device, record, order):
    """softcap at three distinct caps in turn, in one process from a fresh compile state,
    each against the float64 oracle (Sq = 33, Sk = 65); the same calls in the other order
    too (the first value is the one Dynamo specialises on)."""
    dims = impl.caps.limits.get("head_dims", [64])
    d = 64 if 64 in dims else dims[0]
    caps = CAPS if order == "ascending" else CAPS[::-1]
    cases = []
    for cap in caps:
        case = AttnCase(1, 2, 2, 33, 65, d, d, dtype, None, "softcap", seed=41, device=device)
        case.params["score_mod"]["cap"] = cap
        cases.append(case)
    require_claimed(impl, cases[0])
    record.note(caps_in_turn=list(caps))
    fresh_compile_state()
    for case in cases:
        check_forward(record, impl, case, lse=False, fresh=False)
