"""Demo tests for exceptions: raised by the implementation (forward, or its backward run by
autograd) versus an error of the suite itself."""

import pytest
import torch

pytestmark = pytest.mark.area("demo")


def test_forward_raises(impl, dtype, record):
    record.case(shape=(3,), mode="forward")
    impl(torch.ones(3, dtype=dtype), mode="forward")


def test_backward_raises(impl, dtype, record):
    record.case(shape=(3,), mode="backward")
    x = torch.ones(3, dtype=dtype, requires_grad=True)
    torch.autograd.grad(impl(x, mode="backward").sum(), x)


def test_suite_bug(impl, dtype, record):
    record.case(shape=(3,))
    oracle_table = {}
    oracle_table["missing"]  # a bug in the suite, not in the implementation
