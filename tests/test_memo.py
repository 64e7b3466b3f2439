"""conformance/harness/memo.py: content addresses, the shared directory's life, and that a memoised
attention reference is the one a fresh computation gives."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from conformance.harness import memo

pytestmark = pytest.mark.harness_only


@pytest.fixture
def session():
    path = memo.start()
    yield path
    memo.stop()


def test_key_sees_every_byte_dtype_shape_and_parameter():
    t = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    base = memo.key("k", t, 1.0, None)
    assert memo.key("k", t.clone(), 1.0, None) == base  # same content, other storage
    bumped = t.clone()
    bumped[2, 3] = torch.nextafter(bumped[2, 3], torch.tensor(100.0))
    assert memo.key("k", bumped, 1.0, None) != base  # one ulp of one element
    assert memo.key("k", t.to(torch.float64), 1.0, None) != base
    assert memo.key("k", t.reshape(4, 3), 1.0, None) != base
    assert memo.key("k", t.t(), 1.0, None) != memo.key("k", t.t().contiguous().reshape(3, 4),
                                                       1.0, None)
    assert memo.key("k", t, 1.0 + 2**-52, None) != base
    assert memo.key("k", t, 1.0, 0) != base
    assert memo.key("k", t.to(torch.bfloat16)) != memo.key("k", t.to(torch.float16))
    assert memo.key("k", np.zeros(3)) != memo.key("k", np.zeros(3, np.float32))


def test_hit_returns_the_stored_value_and_stop_removes_the_directory(session):
    calls = []

    def compute():
        calls.append(1)
        return {"a": np.arange(4.0)}

    first = memo.get_or_compute("x", compute)
    again = memo.get_or_compute("x", compute)
    assert len(calls) == 1 and np.array_equal(first["a"], again["a"])
    again["a"][0] = 99.0  # a hit is a copy: changing it changes nothing stored
    assert memo.get_or_compute("x", compute)["a"][0] == 0.0
    memo.stop()
    assert not os.path.exists(session)
    memo.start()  # the fixture's stop() ends this one


def test_without_a_session_nothing_is_stored():
    memo.attach(None)  # as a library call outside any session
    try:
        assert not memo.active()
        _compute_twice()
    finally:
        memo.stop()


def _compute_twice() -> None:
    calls: list[int] = []
    for _ in range(2):
        memo.get_or_compute("y", lambda: calls.append(1))
    assert len(calls) == 2


def test_nested_sessions_restore_the_outer_one(session):
    inner = memo.start()
    assert memo.directory() == inner != session
    memo.stop()
    assert memo.directory() == session and memo.active()


def test_attach_shares_the_controllers_directory(session):
    memo.get_or_compute("z", lambda: 7)
    memo.attach(session)  # as an xdist worker does
    assert memo.get_or_compute("z", lambda: 8) == 7
    memo.stop()  # a worker's stop leaves the directory to its owner
    assert memo.directory() == session and memo.active()


def test_memoised_attention_reference_equals_a_fresh_one(session):
    from conformance.areas.attention.cases import AttnCase
    from conformance.areas.attention.reference import baseline, oracle_reference, references

    case = AttnCase(1, 2, 1, 17, 33, 16, 16, torch.float16, "causal_br", "softcap", seed=5)
    q, k, v, d_out = case.inputs()
    memo.stop()
    memo.start()
    first = references(case, q, k, v, d_out)  # computed and stored
    hit = references(case, q, k, v, d_out)
    fresh = (oracle_reference(case, q, k, v, d_out), baseline(case, q, k, v, d_out))
    assert memo.stats["hits"] >= 1
    for got in (first, hit):
        for a, b in zip(got, fresh, strict=True):
            for name in ("out", "lse", "dq", "dk", "dv"):
                assert np.array_equal(getattr(a, name), getattr(b, name)), name
            assert a.terms == b.terms and a.score_error == b.score_error
    # other inputs (the same case, one element changed) are another entry
    q2 = q.clone()
    q2[0, 0, 0, 0] = -q2[0, 0, 0, 0] + 1
    assert not np.array_equal(references(case, q2, k, v, d_out)[0].out, first[0].out)
