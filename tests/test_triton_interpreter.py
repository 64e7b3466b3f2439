"""Triton's interpreter, which runs our kernels on CPU: its bfloat16 defects shown on tiny
kernels (so the matrix's expected failures are about the interpreter, not our kernel), and
the guard regions that give it the bounds checks it lacks."""

from __future__ import annotations

import os

import pytest
import torch

triton = pytest.importorskip("triton", reason="[skipped] triton is not installed")
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
import triton.language as tl  # noqa: E402

from impls.attention.triton.guards import Guarded  # noqa: E402

# CI's oldest leg runs it too: the release's own triton runs the kernels (3.6.0 on 2.11, the
# GPU host's)
pytestmark = [pytest.mark.torch_release,
              pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                 reason="[skipped] these tests are about the interpreter")]


@triton.jit
def _dot(A, B, C, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(A + r[:, None] * N + r[None, :])
    b = tl.load(B + r[:, None] * N + r[None, :])
    tl.store(C + r[:, None] * N + r[None, :], tl.dot(a, b))


@triton.jit
def _cast_store(X, Y, N: tl.constexpr):
    r = tl.arange(0, N)
    tl.store(Y + r, tl.load(X + r).to(Y.dtype.element_ty))


@triton.jit
def _copy(X, Y, n, N: tl.constexpr, OFF_BY_ONE: tl.constexpr):
    r = tl.arange(0, N)
    bound = n + 1 if OFF_BY_ONE else n
    tl.store(Y + r, tl.load(X + r, mask=r < bound, other=0.0), mask=r < bound)


def _operands(dtype):
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-2, 3, (16, 16), generator=g).to(dtype)
    b = torch.randint(-2, 3, (16, 16), generator=g).to(dtype)
    return a, b, a.float() @ b.float()


def test_dot_float16_is_exact():
    a, b, want = _operands(torch.float16)
    c = torch.zeros(16, 16)
    _dot[(1,)](a, b, c, N=16)
    assert torch.equal(c, want)


def test_dot_bfloat16_multiplies_bit_patterns():
    """triton-lang/triton#11584: the defect behind the matrix's expected failures."""
    a, b, want = _operands(torch.bfloat16)
    c = torch.zeros(16, 16)
    _dot[(1,)](a, b, c, N=16)
    assert (c - want).abs().max() > 1e6  # not a rounding error: raw uint16 products


def test_float32_to_bfloat16_store_truncates():
    """The interpreter truncates where torch (and GPUs) round to nearest even."""
    x = torch.tensor([1.0 + 2.0**-8 + 2.0**-10] * 16)  # just above the halfway point
    y = torch.zeros(16, dtype=torch.bfloat16)
    _cast_store[(1,)](x, y, N=16)
    assert float(x[0].to(torch.bfloat16)) == 1.0 + 2.0**-7  # torch rounds up
    assert float(y[0]) == 1.0  # the interpreter truncates


def test_out_of_bounds_is_not_checked_but_guards_catch_it():
    guard = Guarded()
    x = guard.copy("x", torch.arange(8, dtype=torch.float32))
    y = guard.empty("y", (8,), torch.float32, torch.device("cpu"))
    _copy[(1,)](x, y, 8, N=16, OFF_BY_ONE=False)
    guard.check()
    _copy[(1,)](x, y, 8, N=16, OFF_BY_ONE=True)  # the interpreter lets this through
    with pytest.raises(AssertionError, match="guard region after tensor 'y'"):
        guard.check()
