"""The torch-free indexing oracle (oracles/indexing.py) against small hand-computed results
written literally here, torch's documented semantics, and mpmath at 30 digits."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from numpy.testing import assert_array_equal as eq

from oracles import indexing as ix

pytestmark = pytest.mark.harness_only

A = np.array


def raises(fn, *args, **kwargs):
    with pytest.raises(IndexError):
        fn(*args, **kwargs)


X = A([[1., 2., 3.], [4., 5., 6.]])
W = A([[1., 2.], [3., 4.], [5., 6.], [7., 8.]])  # embedding table, 4 rows


def test_negative_indices_wrap_only_where_torch_wraps_them():
    """take, put_, index_put_ and getitem/setitem wrap [-n, 0); the others reject -1."""
    eq(ix.take(X, A([-6])).value, [1])
    raises(ix.take, X, A([-7]))
    eq(ix.getitem(X, 1, A([-3])).value, [[1], [4]])
    raises(ix.gather, X, 1, A([[-1], [0]]))
    raises(ix.index_select, X, 0, A([-1]))
    raises(ix.one_hot, A([-1]), 3)
    raises(ix.embedding, A([-1]), W)


def test_reading_ops():
    eq(ix.index_select(X, 0, A([1, 1, 0])).value, [[4, 5, 6], [4, 5, 6], [1, 2, 3]])
    eq(ix.index_select(X, -1, A([2, 0])).value, [[3, 1], [6, 4]])
    eq(ix.gather(X, 1, A([[2, 0], [1, 1]])).value, [[3, 1], [5, 5]])
    eq(ix.gather(X, 0, A([[1, 0, 1]])).value, [[4, 2, 6]])
    eq(ix.take(X, A([0, 5, -1, -6])).value, [1, 6, 6, 1])
    eq(ix.take(X, A([[1, -2]])).value, [[2, 5]])
    eq(ix.getitem(X, 0, A([-1, 0])).value, [[4, 5, 6], [1, 2, 3]])
    eq(ix.getitem(X, -1, A([-1, 1])).value, [[3, 2], [6, 5]])
    eq(ix.getitem(X, 1, A([-3])).value, [[1], [4]])
    eq(ix.embedding(A([[0, 2], [3, 0]]), W).value, [[[1, 2], [5, 6]], [[7, 8], [1, 2]]])


def test_reading_ops_out_of_range():
    for bad in ([2], [-1]):
        raises(ix.index_select, X, 0, A(bad))
    for bad in ([[3]], [[-1]]):
        raises(ix.gather, X, 1, A(bad))
    for bad in ([6], [-7]):
        raises(ix.take, X, A(bad))
    for bad in ([3], [-4]):
        raises(ix.getitem, X, 1, A(bad))
    for bad in ([4], [-1]):
        raises(ix.embedding, A(bad), W)


def test_scatter_assign_duplicates():
    out = ix.scatter(np.zeros((2, 3)), 1, A([[0, 0, 2], [1, 1, 1]]),
                     A([[5., 7., 9.], [3., 3., 1.]]))
    eq(out.value, [[7, 0, 9], [0, 1, 0]])  # the last write
    assert out.choices == {0: (5.0, 7.0), 4: (1.0, 3.0)}
    # dim 0; a position written twice with the same value has no choices
    out = ix.scatter(np.zeros((2, 2)), 0, A([[1, 0], [1, 0]]), A([[4., 5.], [4., 6.]]))
    eq(out.value, [[0, 6], [4, 0]])
    assert out.choices == {1: (5.0, 6.0)}
    for bad in ([[3]], [[-1]]):
        raises(ix.scatter, np.zeros((1, 3)), 1, A(bad), A([[1.]]))


def test_scatter_reductions_include_self():
    x = A([[1., 2., 3.]])
    out = ix.scatter(x, 1, A([[0, 0, 2, 0]]), A([[10., -20., 30., 40.]]), "sum")
    eq(out.value, [[31, 2, 33]])
    eq(out.count, [[4, 0, 2]])
    eq(out.abs_sum, [[71, 2, 33]])
    idx, src = A([[0, 0, 2]]), A([[2., -3., 4.]])
    out = ix.scatter(x, 1, idx, src, "prod")
    eq(out.value, [[-6, 2, 12]])
    eq(out.abs_sum, [[6, 2, 12]])
    out = ix.scatter(x, 1, idx, src, "mean")
    eq(out.value, [[0, 2, 3.5]])
    eq(out.count, [[3, 0, 2]])
    # integer mean is floor division: (10 + 1 + 2) // 3 = 4, (-7 + 2) // 2 = -3
    out = ix.scatter(A([[10, -7, 5]]), 1, A([[0, 0, 1]]), A([[1, 2, 2]]), "mean",
                     integer=True)
    eq(out.value, [[4, -3, 5]])
    idx, src = A([[0, 0, 1, 2]]), A([[4., -2., 0., 7.]])
    eq(ix.scatter(A([[1., 5., 3.]]), 1, idx, src, "amax").value, [[4, 5, 7]])
    eq(ix.scatter(A([[1., 5., 3.]]), 1, idx, src, "amin").value, [[-2, 0, 3]])


@pytest.mark.parametrize(("reduce", "expected"), [
    ("sum", [[2, 5, 7, 9]]), ("prod", [[-8, 5, 7, 9]]), ("mean", [[1, 5, 7, 9]]),
    ("amax", [[4, 5, 7, 9]]), ("amin", [[-2, 5, 7, 9]])])
def test_scatter_reductions_exclude_self(reduce, expected):
    out = ix.scatter(A([[1., 5., 3., 9.]]), 1, A([[0, 0, 2]]), A([[4., -2., 7.]]), reduce,
                     include_self=False)
    eq(out.value, expected)
    eq(out.count, [[2, 0, 1, 0]])


def test_index_write():
    src = A([[1., 2.], [3., 4.]])
    eq(ix.index_write(np.zeros((3, 2)), 0, A([2, 0]), src).value, [[3, 4], [0, 0], [1, 2]])
    out = ix.index_write(np.zeros((3, 2)), 0, A([1, 1]), src)  # index_copy_, duplicates
    eq(out.value, [[0, 0], [3, 4], [0, 0]])
    assert out.choices == {2: (1.0, 3.0), 3: (2.0, 4.0)}
    # index_add_ on dim 1 with alpha = 2
    out = ix.index_write(A([[1., 1., 1.], [2., 2., 2.]]), 1, A([2, 0, 2]),
                         A([[1., 2., 3.], [4., 5., 6.]]), "sum", alpha=2.0)
    eq(out.value, [[5, 1, 9], [12, 2, 22]])
    eq(out.count, [[2, 0, 3], [2, 0, 3]])
    eq(out.abs_sum, [[5, 1, 9], [12, 2, 22]])
    # index_fill_: a scalar; negative indices wrap
    eq(ix.index_write(X, 1, A([-1, 0]), 0.0, negative_ok=True).value, [[0, 2, 0], [0, 5, 0]])
    raises(ix.index_write, X, 1, A([-1]), 0.0)
    for bad in ([3], [-4]):
        raises(ix.index_write, X, 1, A(bad), 0.0, negative_ok=True)
    raises(ix.index_write, np.zeros((3, 2)), 0, A([3]), A([[1., 2.]]))
    # index_reduce_ on dim 0
    x, idx = A([[1., 2.], [3., 4.], [5., 6.]]), A([0, 0, 2])
    src = A([[7., -1.], [0., 8.], [-5., -6.]])
    eq(ix.index_write(x, 0, idx, src, "amax", include_self=False).value,
       [[7, 8], [3, 4], [-5, -6]])
    eq(ix.index_write(x, 0, idx, src, "prod").value, [[0, -16], [3, 4], [-25, -36]])
    # integer mean floors: (10 + 1 + 2) // 3 = 4, (-7 + 2) // 2 = -3
    eq(ix.index_write(A([[10], [-7]]), 0, A([0, 0, 1]), A([[1], [2], [2]]), "mean",
                      integer=True).value, [[4], [-3]])


def test_index_put():
    vals = A([[1., 2.], [3., 4.]])
    eq(ix.index_put(np.zeros((3, 2)), [A([2, -3])], vals).value, [[3, 4], [0, 0], [1, 2]])
    eq(ix.index_put(np.zeros((3, 2)), [A([1])], A([7., 8.])).value, [[0, 0], [7, 8], [0, 0]])
    z = np.zeros((2, 3))
    eq(ix.index_put(z, [A([0, 1, 1]), A([2, 0, -1])], A([5., 6., 7.])).value,
       [[0, 0, 5], [6, 0, 7]])
    eq(ix.index_put(z, [A([1]), A([0, 2])], A(9.)).value, [[0, 0, 0], [9, 0, 9]])
    rows, cols, v = A([0, 0, -1]), A([1, 1, 1]), A([2., 3., 4.])
    out = ix.index_put(np.ones((2, 3)), [rows, cols], v, accumulate=True)
    eq(out.value, [[1, 6, 1], [1, 5, 1]])
    eq(out.count, [[0, 3, 0], [0, 2, 0]])
    out = ix.index_put(np.ones((2, 3)), [rows, cols], v)
    eq(out.value, [[1, 3, 1], [1, 4, 1]])
    assert out.choices == {1: (2.0, 3.0)}
    for bad in ([2], [-3]):
        raises(ix.index_put, z, [A(bad)], A(1.))


def test_put():
    x, idx, src = A([[1., 2.], [3., 4.]]), A([0, -1, 3]), A([10., 20., 30.])
    out = ix.put(x, idx, src, accumulate=True)
    eq(out.value, [[11, 2], [3, 54]])
    eq(out.count, [[2, 0], [0, 3]])
    out = ix.put(x, idx, src)
    eq(out.value, [[10, 2], [3, 30]])
    assert out.choices == {3: (20.0, 30.0)}
    for bad in ([4], [-5]):
        raises(ix.put, x, A(bad), A([1.]))


def test_setitem():
    out = ix.setitem(np.zeros((2, 3)), 1, A([2, 0, 2]), A([[1., 2., 3.], [4., 5., 6.]]))
    eq(out.value, [[2, 0, 3], [5, 0, 6]])
    # keyed by the flat position in x's layout: x[0, 2] is 2, x[1, 2] is 5
    assert out.choices == {2: (1.0, 3.0), 5: (4.0, 6.0)}
    eq(ix.setitem(X, 0, A([-1]), A(0.)).value, [[1, 2, 3], [0, 0, 0]])
    for bad in ([3], [-4]):
        raises(ix.setitem, X, 1, A(bad), A(0.))


BAG_INDEX = A([0, 2, 1, 3, 3])  # offsets [0, 2, 2]: bags [0, 2], [], [1, 3, 3]


@pytest.mark.parametrize(("mode", "expected"), [
    ("sum", [[6, 8], [0, 0], [17, 20]]), ("mean", [[3, 4], [0, 0], [17 / 3, 20 / 3]]),
    ("max", [[5, 6], [0, 0], [7, 8]])])
def test_embedding_bag_modes(mode, expected):
    out = ix.embedding_bag(BAG_INDEX, W, A([0, 2, 2]), mode)
    eq(out.value, expected)
    eq(out.count, [[2, 2], [0, 0], [3, 3]])


def test_embedding_bag_options():
    offsets = A([0, 2, 2])
    out = ix.embedding_bag(BAG_INDEX, W, offsets, "sum",
                           per_sample_weights=A([1., 0.5, 2., -1., 1.]))
    eq(out.value, [[3.5, 5], [0, 0], [6, 8]])
    eq(out.abs_sum, [[3.5, 5], [0, 0], [20, 24]])
    eq(ix.embedding_bag(BAG_INDEX, W, A([0, 2, 5]), "sum", include_last_offset=True).value,
       [[6, 8], [17, 20]])
    eq(ix.embedding_bag(BAG_INDEX, W, offsets, "sum", padding_idx=3).value,
       [[6, 8], [0, 0], [3, 4]])
    out = ix.embedding_bag(BAG_INDEX, W, offsets, "mean", padding_idx=3)
    eq(out.value, [[3, 4], [0, 0], [3, 4]])  # bag 2's mean counts only row 1
    eq(out.count, [[2, 2], [0, 0], [1, 1]])
    eq(ix.embedding_bag(A([3, 3]), W, A([0]), "mean", padding_idx=3).value, [[0, 0]])


def test_embedding_bag_invalid():
    for offsets in ([1, 2], [0, 3, 2], [0, 6]):
        raises(ix.embedding_bag, BAG_INDEX, W, A(offsets), "sum")
    raises(ix.embedding_bag, BAG_INDEX, W, A([0, 6]), "sum", include_last_offset=True)
    for bad in ([4], [-1]):
        raises(ix.embedding_bag, A(bad), W, A([0]), "sum")


LOGP = A([[-1., -2., -3.], [-0.5, -1.5, -2.5], [-4., -5., -6.]])
CW = A([1., 2., 4.])


def test_nll_loss():
    t = A([2, 0, 1])
    eq(ix.nll_loss(LOGP, t, reduction="none").value, [3, 0.5, 5])
    eq(ix.nll_loss(LOGP, t, reduction="sum").value, 8.5)
    eq(ix.nll_loss(LOGP, t).value, 8.5 / 3)
    eq(ix.nll_loss(LOGP, t, CW, reduction="none").value, [12, 0.5, 10])
    out = ix.nll_loss(LOGP, t, CW)
    eq(out.value, 22.5 / 7)
    assert out.weight_sum == 7
    out = ix.nll_loss(LOGP, A([2, -100, 1]), CW)  # default ignore_index
    eq(out.value, 22 / 6)
    assert out.weight_sum == 6 and out.count == 2
    eq(ix.nll_loss(LOGP, t, CW, ignore_index=0, reduction="none").value, [12, 0, 10])
    eq(ix.nll_loss(LOGP, t, CW, ignore_index=0).value, 22 / 6)
    allign = A([-100, -100, -100])
    assert np.isnan(ix.nll_loss(LOGP, allign).value)
    eq(ix.nll_loss(LOGP, allign, reduction="sum").value, 0)
    for bad in ([3, 0, 0], [-1, 0, 0]):
        raises(ix.nll_loss, LOGP, A(bad))


def test_nll_loss_spatial():
    logp = -np.arange(1., 13.).reshape(2, 3, 2)  # logp[n, c, j]
    t = A([[0, 2], [1, -100]])
    eq(ix.nll_loss(logp, t, reduction="none").value, [[1, 6], [9, 0]])
    eq(ix.nll_loss(logp, t).value, 16 / 3)


ROWS = A([[0., 1., 2.], [1000., 1001., 1000.5], [-1000., -1001., -1000.], [-0.5, 0.25, 1.5]])


def _mp_log_softmax(rows):
    with mpmath.workdps(30):
        out = []
        for row in rows.tolist():
            lse = mpmath.log(sum(mpmath.exp(mpmath.mpf(v)) for v in row))
            out.append([mpmath.mpf(v) - lse for v in row])
        return out


def test_log_softmax_vs_mpmath():
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # naive: inf/nan
        naive = ROWS - np.log(np.exp(ROWS).sum(axis=1, keepdims=True))
    assert not np.isfinite(naive[1:3]).any()
    ref = np.array([[float(v) for v in row] for row in _mp_log_softmax(ROWS)])
    got = ix.log_softmax(ROWS, 1)
    np.testing.assert_allclose(got, ref, rtol=1e-14, atol=0)
    np.testing.assert_allclose(ix.log_softmax(ROWS.T, 0), ref.T, rtol=1e-14, atol=0)


def test_cross_entropy_vs_mpmath():
    t = A([2, 0, 1, 1])
    mp = _mp_log_softmax(ROWS)
    with mpmath.workdps(30):
        terms = [-mp[i][c] for i, c in enumerate(t.tolist())]
        mean = float(sum(terms) / 4)
        wterms = [CW[c] * x for c, x in zip(t.tolist(), terms, strict=True)]
        wmean = float(sum(wterms) / (4 + 1 + 2 + 2))
        per = [float(x) for x in terms]
    np.testing.assert_allclose(ix.cross_entropy(ROWS, t).value, mean, rtol=1e-14, atol=0)
    np.testing.assert_allclose(ix.cross_entropy(ROWS, t, CW).value, wmean, rtol=1e-14, atol=0)
    np.testing.assert_allclose(ix.cross_entropy(ROWS, t, reduction="none").value, per,
                               rtol=1e-14, atol=0)


def test_one_hot():
    eq(ix.one_hot(A([2, 0, 1]), 3).value, [[0, 0, 1], [1, 0, 0], [0, 1, 0]])
    eq(ix.one_hot(A([[1], [0]]), 2).value, [[[0, 1]], [[1, 0]]])
    for bad in ([3], [-1]):
        raises(ix.one_hot, A(bad), 3)


def test_take_along_dim_wraps_negatives_only_in_range():
    eq(ix.take_along_dim(X, 1, A([[2, -3], [-1, 0]])).value, [[3, 1], [6, 4]])
    eq(ix.take_along_dim(X, 0, A([[1, 0, -2]])).value, [[4, 2, 3]])
    for bad in ([[3, 0], [0, 0]], [[-4, 0], [0, 0]]):
        raises(ix.take_along_dim, X, 1, A(bad))


def test_searchsorted_with_a_sorter():
    seq = A([3., 1., 2., 2.])  # sorted by [1, 2, 3, 0]: 1, 2, 2, 3
    order = A([1, 2, 3, 0])
    eq(ix.searchsorted(seq, A([2., 0., 4.]), order).value, [1, 0, 4])
    eq(ix.searchsorted(seq, A([2., 0., 4.]), order, right=True).value, [3, 0, 4])
    rows = A([[5., 4.], [0., 1.]])
    eq(ix.searchsorted(rows, A([[4.5], [1.]]), A([[1, 0], [0, 1]])).value, [[1], [1]])
    for bad in ([1, 2, 3, 4], [1, 2, 3, -1]):
        raises(ix.searchsorted, seq, A([1.]), A(bad))


def test_bincount_counts_and_rejects_negatives():
    eq(ix.bincount(A([0, 2, 2, 7]), 3).value, [1, 0, 2, 0, 0, 0, 0, 1])
    eq(ix.bincount(A([], dtype=np.int64), 2).value, [0, 0])
    raises(ix.bincount, A([1, -1]), 3)


def test_keys_masks_and_two_index_tensors():
    eq(ix.getitem_key(X, {"mask": A([False, True])}).value, [[4, 5, 6]])
    eq(ix.getitem_key(X, {"i0": A([1, -2]), "index": A([-1, 0])}).value, [6, 1])
    raises(ix.getitem_key, X, {"i0": A([0]), "index": A([3])})
    with pytest.raises(IndexError):
        ix.getitem_key(X, {"mask": A([True, False, True])})
    eq(ix.setitem_key(X, {"mask": A([True, False])}, A(0.)).value, [[0, 0, 0], [4, 5, 6]])
    eq(ix.setitem_key(X, {"i0": A([1]), "index": A([-1])}, A([9.])).value,
       [[1, 2, 3], [4, 5, 9]])


def test_masked_select_scatter_and_repeat_interleave():
    mask = A([[True, False, True], [False, True, False]])
    eq(ix.masked_select(X, mask).value, [1, 3, 5])
    eq(ix.masked_scatter(X, mask, A([7., 8., 9., 10.])).value, [[7, 2, 8], [4, 9, 6]])
    with pytest.raises(ValueError):
        ix.masked_scatter(X, mask, A([7., 8.]))
    eq(ix.repeat_interleave(X, A([0, 2]), 0, 2).value, [[4, 5, 6], [4, 5, 6]])
    eq(ix.repeat_interleave(X, A([1, 0, 2]), 1, 3).value, [[1, 3, 3], [4, 6, 6]])
    raises(ix.repeat_interleave, X, A([1, -1]), 0, 0)
    with pytest.raises(ValueError):
        ix.repeat_interleave(X, A([1, 1]), 0, 3)
