"""The torch-free collectives oracle (oracles/collectives.py): hand-computed forwards, adjoints
by the dot-product identity and by central differences, error cases, rounding bounds against
simulated low-precision reductions, and mpmath at 50 digits."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from oracles import collectives as cl

pytestmark = pytest.mark.harness_only

A = np.array


def eq_all(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.float64
        assert g.shape == np.shape(w)
        assert_array_equal(g, w)


# ----------------------------------------------------------------------------- forwards

def test_all_reduce_hand():
    x2 = [A([1., 2.]), A([3., -4.])]
    eq_all(cl.all_reduce(x2, "sum"), [[4, -2]] * 2)
    eq_all(cl.all_reduce(x2, "avg"), [[2, -1]] * 2)
    eq_all(cl.all_reduce(x2, "min"), [[1, -4]] * 2)
    eq_all(cl.all_reduce(x2, "max"), [[3, 2]] * 2)
    eq_all(cl.all_reduce(x2, "product"), [[3, -8]] * 2)
    x3 = [A([1., 2.]), A([3., -4.]), A([-2., .5])]
    eq_all(cl.all_reduce(x3, "sum"), [[2, -1.5]] * 3)
    eq_all(cl.all_reduce(x3, "avg"), [[2 / 3, -.5]] * 3)
    eq_all(cl.all_reduce(x3, "min"), [[-2, -4]] * 3)
    eq_all(cl.all_reduce(x3, "max"), [[3, 2]] * 3)
    eq_all(cl.all_reduce(x3, "product"), [[-6, -4]] * 3)
    eq_all(cl.all_reduce([A([[7.]])], "avg"), [[[7]]])
    out = cl.all_reduce([np.float16([1, 2])] * 2, "sum")
    out[0][0] = 99  # ranks get independent arrays
    eq_all(out[1:], [[2, 4]])


def test_all_gather_hand():
    x2 = [A([[1., 2.]]), A([[3., 4.]])]
    eq_all(cl.all_gather(x2), [[[1, 2], [3, 4]]] * 2)
    eq_all(cl.all_gather(x2, gather_dim=1), [[[1, 2, 3, 4]]] * 2)
    eq_all(cl.all_gather(x2, gather_dim=-1), [[[1, 2, 3, 4]]] * 2)
    x3 = [A([1.]), A([2.]), A([3.])]
    eq_all(cl.all_gather(x3), [[1, 2, 3]] * 3)


def test_reduce_scatter_hand():
    x2 = [A([1., 2., 3., 4.]), A([10., 20., 30., 40.])]
    eq_all(cl.reduce_scatter(x2), [[11, 22], [33, 44]])
    eq_all(cl.reduce_scatter(x2, op="avg"), [[5.5, 11], [16.5, 22]])
    eq_all(cl.reduce_scatter(x2, op="max"), [[10, 20], [30, 40]])
    m2 = [A([[1., 2.], [3., 4.]]), A([[5., 6.], [7., 8.]])]
    eq_all(cl.reduce_scatter(m2, scatter_dim=1), [[[6], [10]], [[8], [12]]])
    x3 = [A([1., 2., 3.]), A([4., 5., 6.]), A([7., 8., 9.])]
    eq_all(cl.reduce_scatter(x3), [[12], [15], [18]])
    eq_all(cl.reduce_scatter(x3, op="avg"), [[4], [5], [6]])
    eq_all(cl.reduce_scatter(x3, op="product"), [[28], [80], [162]])
    eq_all(cl.reduce_scatter(x3, op="min"), [[1], [2], [3]])


def test_all_to_all_single_uneven_hand():
    xs = [A([[0.], [1.], [2.]]), A([[10.]]), A([[20.], [21.]])]
    ins = [[1, 0, 2], [0, 1, 0], [2, 0, 0]]
    outs = [[1, 0, 2], [0, 1, 0], [2, 0, 0]]  # out[r][s] = in[s][r]: here symmetric
    want = [[[0], [20], [21]], [[10]], [[1], [2]]]
    eq_all(cl.all_to_all_single(xs, input_split_sizes=ins), want)
    eq_all(cl.all_to_all_single(xs, output_split_sizes=outs), want)
    eq_all(cl.all_to_all_single(xs, outs, ins), want)
    # asymmetric table, a rank with 0 input rows and a rank receiving 0 rows
    xs = [np.zeros((0, 2)), A([[1., 2.], [3., 4.], [5., 6.]])]
    ins = [[0, 0], [3, 0]]
    got = cl.all_to_all_single(xs, input_split_sizes=ins)
    eq_all(got, [[[1, 2], [3, 4], [5, 6]], np.zeros((0, 2))])
    got = cl.all_to_all_single(xs, output_split_sizes=[[0, 3], [0, 0]])
    eq_all(got, [[[1, 2], [3, 4], [5, 6]], np.zeros((0, 2))])
    xs = [A([1., 2.]), A([3., 4., 5.])]
    eq_all(cl.all_to_all_single(xs, input_split_sizes=[[0, 2], [2, 1]]), [[3, 4], [1, 2, 5]])


def test_all_to_all_single_equal_hand():
    xs = [A([0., 1., 2., 3.]), A([10., 11., 12., 13.])]
    eq_all(cl.all_to_all_single(xs), [[0, 1, 10, 11], [2, 3, 12, 13]])
    xs = [A([[0.], [1.], [2.]]), A([[3.], [4.], [5.]]), A([[6.], [7.], [8.]])]
    eq_all(cl.all_to_all_single(xs), [[[0], [3], [6]], [[1], [4], [7]], [[2], [5], [8]]])
    eq_all(cl.all_to_all_single([np.zeros((0, 3))] * 2), [np.zeros((0, 3))] * 2)


def test_broadcast_hand():
    xs = [A([1., 2.]), A([3., 4.]), A([5., 6.])]
    eq_all(cl.broadcast(xs), [[1, 2]] * 3)
    eq_all(cl.broadcast(xs, src=1), [[3, 4]] * 3)
    eq_all(cl.broadcast(xs[:2], src=1), [[3, 4]] * 2)


def test_coalesced_hand():
    xss = [[A([1., 2.]), A([[1.]])], [A([3., 4.]), A([[-2.]])]]
    got = cl.all_reduce_coalesced(xss, "sum")
    eq_all(got[0], [[4, 6], [[-1]]])
    eq_all(got[1], [[4, 6], [[-1]]])
    got = cl.all_gather_coalesced(xss)
    eq_all(got[1], [[1, 2, 3, 4], [[1], [-2]]])
    got = cl.reduce_scatter_coalesced([[A([1., 2.])], [A([3., 5.])]], op="avg")
    eq_all(got[0], [[2]])
    eq_all(got[1], [[3.5]])


# ----------------------------------------------------------------------------- adjoints

def _inner(a: list, b: list) -> float:
    return float(sum(np.sum(x * y) for x, y in zip(a, b, strict=True)))


def _flat(xss: list) -> list:
    return [t for per_rank in xss for t in per_rank]


def _cases():
    """(name, forward(xs), adjoint(xs, gs), xs) for the linear collectives."""
    out = []
    for w in (1, 2, 3, 4):
        rng = np.random.default_rng(100 + w)
        for dim in (0, 1):
            shape = (2 * w, 3) if dim == 0 else (3, 2 * w)
            xs = [rng.standard_normal(shape) for _ in range(w)]
            for op in ("sum", "avg"):
                out.append((f"all_reduce-{op}", lambda x, op=op: cl.all_reduce(x, op),
                            lambda x, g, op=op: cl.all_reduce_adjoint(x, g, op), xs))
                out.append((f"reduce_scatter-{op}-{dim}",
                            lambda x, op=op, d=dim: cl.reduce_scatter(x, op, d),
                            lambda x, g, op=op, d=dim: cl.reduce_scatter_adjoint(x, g, op, d),
                            xs))
            out.append((f"all_gather-{dim}", lambda x, d=dim: cl.all_gather(x, d),
                        lambda x, g, d=dim: cl.all_gather_adjoint(x, g, d), xs))
            out.append(("broadcast", lambda x, s=w - 1: cl.broadcast(x, s),
                        lambda x, g, s=w - 1: cl.broadcast_adjoint(x, g, s), xs))
        # all_to_all_single: equal splits and a random uneven table with zeros
        xs = [rng.standard_normal((2 * w, 3)) for _ in range(w)]
        out.append(("a2a-equal", cl.all_to_all_single, cl.all_to_all_single_adjoint, xs))
        ins = [list(rng.integers(0, 3, size=w)) for _ in range(w)]
        ins[0] = [0] * w
        xs = [rng.standard_normal((sum(row), 2)) for row in ins]
        out.append(("a2a-uneven", lambda x, t=ins: cl.all_to_all_single(x, None, t),
                    lambda x, g, t=ins: cl.all_to_all_single_adjoint(x, g, None, t), xs))
    return out


CASES = _cases()


@pytest.mark.parametrize("name,fwd,adj,xs", CASES, ids=[c[0] for c in CASES])
def test_dot_product_identity(name, fwd, adj, xs):
    rng = np.random.default_rng(7)
    ys = fwd(xs)
    gs = [rng.standard_normal(y.shape) for y in ys]
    grads = adj(xs, gs)
    assert [g.shape for g in grads] == [x.shape for x in xs]
    lhs, rhs = _inner(gs, ys), _inner(grads, xs)
    assert abs(lhs - rhs) <= 1e-12 * max(1.0, abs(lhs))


@pytest.mark.parametrize("w", [1, 2, 3])
def test_dot_product_identity_coalesced(w):
    rng = np.random.default_rng(w)
    xss = [[rng.standard_normal((2 * w,)), rng.standard_normal((w, 2))] for _ in range(w)]
    pairs = [
        (lambda x: cl.all_reduce_coalesced(x, "avg"),
         lambda x, g: cl.all_reduce_coalesced_adjoint(x, g, "avg")),
        (lambda x: cl.all_gather_coalesced(x, gather_dim=0),
         lambda x, g: cl.all_gather_coalesced_adjoint(x, g, gather_dim=0)),
        (lambda x: cl.reduce_scatter_coalesced(x, "sum", 0),
         lambda x, g: cl.reduce_scatter_coalesced_adjoint(x, g, "sum", 0)),
    ]
    for fwd, adj in pairs:
        yss = fwd(xss)
        gss = [[rng.standard_normal(y.shape) for y in ys] for ys in yss]
        grads = adj(xss, gss)
        lhs, rhs = _inner(_flat(gss), _flat(yss)), _inner(_flat(grads), _flat(xss))
        assert abs(lhs - rhs) <= 1e-12 * max(1.0, abs(lhs))


def _fd_grad(loss, xs: list, h: float = 1e-5) -> list:
    """Central differences of loss(xs) in every entry of every rank's input."""
    grads = []
    for r, x in enumerate(xs):
        g = np.zeros_like(x)
        for i in np.ndindex(x.shape):
            hi = [y.copy() for y in xs]
            lo = [y.copy() for y in xs]
            hi[r][i] += h
            lo[r][i] -= h
            g[i] = (loss(hi) - loss(lo)) / (2 * h)
        grads.append(g)
    return grads


FD_CASES = [c for c in CASES if c[3][0].size <= 24] + [
    ("product-zero", lambda x: cl.all_reduce(x, "product"),
     lambda x, g: cl.all_reduce_adjoint(x, g, "product"),
     [A([[1.5, 0.], [2., -1.]]), A([[-.5, 2.], [0.75, 3.]]), A([[2., 1.25], [-1., .5]])]),
    ("product-w2", lambda x: cl.all_reduce(x, "product"),
     lambda x, g: cl.all_reduce_adjoint(x, g, "product"), [A([0., 2.]), A([3., -1.])]),
    ("reduce_scatter-product", lambda x: cl.reduce_scatter(x, "product", 1),
     lambda x, g: cl.reduce_scatter_adjoint(x, g, "product", 1),
     [A([[1.5, 0., 2., -1.]]), A([[-.5, 2., .75, 3.]])]),
]


@pytest.mark.parametrize("name,fwd,adj,xs", FD_CASES, ids=[c[0] for c in FD_CASES])
def test_finite_differences(name, fwd, adj, xs):
    rng = np.random.default_rng(11)
    gs = [rng.standard_normal(y.shape) for y in fwd(xs)]
    want = _fd_grad(lambda v: _inner(gs, fwd(v)), xs)
    for got, fd in zip(adj(xs, gs), want, strict=True):
        assert_allclose(got, fd, rtol=1e-7, atol=1e-8)


def test_product_adjoint_with_zeros_exact():
    xs = [A([0., 0., 2.]), A([3., 0., 5.]), A([7., 11., 0.])]
    gs = [A([1., 1., 1.]), A([2., 1., 0.]), A([-1., 1., 1.])]  # sum: [2, 3, 2]
    eq_all(cl.all_reduce_adjoint(xs, gs, "product"), [[42, 0, 0], [0, 0, 0], [0, 0, 20]])


def _mlp_inputs(seed: int = 3):
    rng = np.random.default_rng(seed)
    n, d, h = 4, 3, 5
    x, w1 = rng.standard_normal((n, d)), rng.standard_normal((d, h))
    pre = x @ w1
    assert np.min(np.abs(pre)) > 1e-2  # away from the relu kink
    return x, w1, rng.standard_normal((h, d)), rng.standard_normal((n, d))


def test_tp_mlp_finite_differences():
    x, w1, w2, g = _mlp_inputs()
    out = cl.tp_mlp(x, w1, w2, g)
    assert set(out) == {"y", "dx", "dw1", "dw2"}
    assert_allclose(out["y"], np.maximum(x @ w1, 0) @ w2, rtol=1e-15)
    params = [x, w1, w2]
    fd = _fd_grad(lambda p: float(np.sum(g * cl.tp_mlp(p[0], p[1], p[2], g)["y"])), params,
                  h=1e-6)
    for key, want in zip(("dx", "dw1", "dw2"), fd, strict=True):
        assert out[key].shape == want.shape
        assert_allclose(out[key], want, rtol=1e-6, atol=1e-8)


def test_tp_mlp_mpmath():
    x, w1, w2, g = _mlp_inputs()
    with mpmath.workdps(50):
        h = mpmath.matrix(x.tolist()) * mpmath.matrix(w1.tolist())
        a = h.apply(lambda v: v if v > 0 else mpmath.mpf(0))
        y = a * mpmath.matrix(w2.tolist())
        want = np.array([[float(y[i, j]) for j in range(y.cols)] for i in range(y.rows)])
    got = cl.tp_mlp(x, w1, w2, g)["y"]
    assert np.max(np.abs(got - want)) <= 1e-14 * max(1.0, np.max(np.abs(want)))


# ----------------------------------------------------------------------------- errors

def test_errors():
    xs = [A([1., 2.]), A([3., 4.])]
    for op in ("min", "max"):
        with pytest.raises(ValueError):  # ranks tie: no unique gradient
            cl.all_reduce_adjoint([A([1., 2.]), A([1., 4.])], xs, op)
        with pytest.raises(ValueError):  # ranks tie at element 0
            cl.reduce_scatter_adjoint([A([1., 2.]), A([1., 4.])], [A([1.]), A([1.])], op)
    with pytest.raises(ValueError):
        cl.reduce_scatter_adjoint(xs, [A([1.]), A([1.])], "mean")
    with pytest.raises(ValueError):
        cl.all_reduce(xs, "mean")
    with pytest.raises(ValueError):
        cl.all_reduce([A([1.]), A([1., 2.])], "sum")
    x3 = [A([1., 2.])] * 3
    with pytest.raises(ValueError):
        cl.reduce_scatter(x3)
    with pytest.raises(ValueError):
        cl.reduce_scatter(xs, scatter_dim=1)
    with pytest.raises(ValueError):
        cl.all_to_all_single(x3)  # dim 0 of size 2 not divisible by 3
    ys = [A([1., 2.]), A([3., 4., 5.])]
    ins = [[0, 2], [2, 1]]
    with pytest.raises(ValueError):  # output[r][s] must equal input[s][r]
        cl.all_to_all_single(ys, [[2, 0], [0, 3]], ins)
    with pytest.raises(ValueError):  # splits do not add up to dim 0
        cl.all_to_all_single(ys, input_split_sizes=[[1, 2], [2, 1]])
    with pytest.raises(ValueError):
        cl.all_to_all_single(ys, input_split_sizes=[[2], [3]])
    with pytest.raises(ValueError):
        cl.all_to_all_single(ys, input_split_sizes=[[-1, 3], [2, 1]])
    with pytest.raises(ValueError):
        cl.all_to_all_single_adjoint(ys, [A([1.]), A([1.])], None, ins)
    with pytest.raises(ValueError):
        cl.broadcast(xs, src=2)
    with pytest.raises(ValueError):
        cl.all_gather_adjoint(xs, xs)  # cotangents shaped like the inputs, not the outputs
    with pytest.raises(ValueError):
        cl.all_reduce_coalesced([[A([1.])], [A([1.]), A([2.])]], "sum")
    with pytest.raises(ValueError):
        cl.gamma(2**11, 2.0**-11)
    with pytest.raises(ValueError):
        cl.unit_roundoff("float8")


def test_all_to_all_adjoint_is_swapped_forward():
    xs = [A([[0.], [1.], [2.]]), A([[10.]]), A([[20.], [21.]])]
    ins = [[1, 0, 2], [0, 1, 0], [2, 0, 0]]
    ys = cl.all_to_all_single(xs, input_split_sizes=ins)
    back = cl.all_to_all_single_adjoint(xs, ys, input_split_sizes=ins)
    eq_all(back, xs)  # a permutation: its adjoint is its inverse


def test_extremum_adjoint_routes_to_the_holder():
    """min / max: the rank holding the extremum gets the summed cotangent (hand-computed
    and by central differences away from ties)."""
    xs = [A([1., 5.]), A([3., 4.])]
    gs = [A([10., 20.]), A([1., 2.])]
    mx = cl.all_reduce_adjoint(xs, gs, "max")
    assert np.array_equal(mx[0], A([0., 22.])) and np.array_equal(mx[1], A([11., 0.]))
    mn = cl.all_reduce_adjoint(xs, gs, "min")
    assert np.array_equal(mn[0], A([11., 0.])) and np.array_equal(mn[1], A([0., 22.]))
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((2, 3)) for _ in range(3)]
    gs = [rng.standard_normal((2, 3)) for _ in range(3)]
    for op in ("min", "max"):
        adj = cl.all_reduce_adjoint(xs, gs, op)
        for r in range(3):
            for idx in np.ndindex(2, 3):
                h = 1e-7
                plus = [x.copy() for x in xs]
                minus = [x.copy() for x in xs]
                plus[r][idx] += h
                minus[r][idx] -= h
                up = cl.all_reduce(plus, op)
                down = cl.all_reduce(minus, op)
                fd = sum(np.vdot(g, a) - np.vdot(g, b)
                         for g, a, b in zip(gs, up, down, strict=True))
                assert abs(fd / (2 * h) - adj[r][idx]) < 1e-6


def test_reduce_scatter_extremum_adjoint_routes_to_the_holder():
    """reduce_scatter min / max: the cotangent of each element (whichever rank keeps its
    chunk) goes to the rank holding the extremum there (hand-computed and by central
    differences away from ties)."""
    xs = [A([1., 5., 0., 9.]), A([3., 4., 2., -1.])]
    gs = [A([10., 20.]), A([1., 2.])]  # rank 0 keeps elements 0-1, rank 1 elements 2-3
    mx = cl.reduce_scatter_adjoint(xs, gs, "max")
    assert np.array_equal(mx[0], A([0., 20., 0., 2.])) and \
        np.array_equal(mx[1], A([10., 0., 1., 0.]))
    mn = cl.reduce_scatter_adjoint(xs, gs, "min")
    assert np.array_equal(mn[0], A([10., 0., 1., 0.])) and \
        np.array_equal(mn[1], A([0., 20., 0., 2.]))
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((6, 2)) for _ in range(3)]
    gs = [rng.standard_normal((2, 2)) for _ in range(3)]
    for op in ("min", "max"):
        adj = cl.reduce_scatter_adjoint(xs, gs, op)
        fd = _fd_grad(lambda v, op=op: _inner(gs, cl.reduce_scatter(v, op)), xs)
        for got, want in zip(adj, fd, strict=True):
            assert_allclose(got, want, rtol=1e-6, atol=1e-6)
