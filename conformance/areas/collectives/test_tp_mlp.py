"""A composition of collectives: a sequence- and tensor-parallel MLP (all_gather -> matmul
-> relu -> matmul -> reduce_scatter), forward and backward across the ranks, against the
same model computed in one process in float64 (oracles/collectives.py ``tp_mlp``).

Tolerance: the error-ratio rule (docs/areas/collectives.md): every rank's output and gradient
shards must satisfy max|tp - ref| <= 2 max|base - ref| + atol, where base is the
unsharded model run in one process in the case's dtype (the matmuls' rounding, which the
collectives must not make worse than a factor 2) and atol = gamma_{W+1}(u) max M: the
sharding splits each hidden-unit sum into W partial sums and adds them in the dtype (at
most W + 1 more roundings per term, Higham Lemma 3.1), M the same product of absolute
values (|H||W2| for y, |G||W2|^T|W1|^T for dx, |X|^T|G||W2|^T for dw1, |H|^T|G| for dw2).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from conformance.areas.collectives.checks import require_returned, run
from conformance.harness.compare import Measurement
from conformance.harness.outcomes import missing as skip_missing
from conformance.harness.runstate import STATE
from conformance.harness.tensors import dtype_name, exact_numpy, from_numpy, rounded
from conformance.processes.backends import combinations, missing
from oracles import collectives as oracle

pytestmark = pytest.mark.area("collectives.tp_mlp")
RATIO = 2.0
SHAPES = [(3, 8, 4), (1, 5, 6)]  # rows per rank, model width, hidden units per rank


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "world" in metafunc.fixturenames:
        key = metafunc.config.stash[STATE].device.matrix_key
        pairs = [p for p in combinations(key) if p[1] in (2, 3)] or combinations(key)
        metafunc.parametrize("backend,world", pairs, ids=[f"{b}-w{w}" for b, w in pairs])


def _baseline(x, w1, w2, g, dtype: torch.dtype) -> dict[str, np.ndarray]:
    """The unsharded model in the case's dtype, in this process, on the CPU."""
    t = [from_numpy(a, dtype, "cpu").requires_grad_(True) for a in (x, w1, w2)]
    y = torch.relu(t[0] @ t[1]) @ t[2]
    grads = torch.autograd.grad(y, t, from_numpy(g, dtype, "cpu"))
    return {"y": exact_numpy(y), **{k: exact_numpy(v) for k, v in
                                     zip(("dx", "dw1", "dw2"), grads, strict=True)}}


@pytest.mark.parametrize("shape", SHAPES, ids=[f"n{n}W-d{d}-h{h}W" for n, d, h in SHAPES])
def test_tp_mlp(impl, dtype, backend, world, shape, device, record, request):
    why = missing(backend, world, device.type)
    if why:
        skip_missing(why)
    n, d, h = shape[0] * world, shape[1], shape[2] * world
    rng = np.random.default_rng(n * 1000 + d * 10 + world)
    name = dtype_name(dtype)

    x, w1, w2, g = (rounded(rng.standard_normal(s) / np.sqrt(s[0] if i else 1), name)
                    for i, s in enumerate([(n, d), (d, h), (h, d), (n, d)]))
    record.case(n=n, d=d, h=h, world=world)
    ref = oracle.tp_mlp(x, w1, w2, g)
    base = _baseline(x, w1, w2, g, dtype)
    outcome = run(request, "conformance.areas.collectives.cases:tp_mlp", impl.spec, x, w1, w2, g,
                  name, timeout=60)
    results = require_returned(record, outcome)
    u = oracle.unit_roundoff(name)
    rows, cols = n // world, h // world
    hidden = np.abs(np.maximum(x @ w1, 0.0))
    masked = np.abs(g) @ np.abs(w2).T
    magnitude = {"y": hidden @ np.abs(w2), "dx": masked @ np.abs(w1).T,
                 "dw1": np.abs(x).T @ masked, "dw2": hidden.T @ np.abs(g)}
    for key in ("y", "dx", "dw1", "dw2"):
        base_err = float(np.max(np.abs(base[key] - ref[key])))
        atol = oracle.gamma(world + 1, u) * float(np.max(magnitude[key], initial=0.0))
        bound = RATIO * base_err + atol
        for res in results:
            r = res["rank"]
            cut = {"y": np.s_[r * rows:(r + 1) * rows], "dx": np.s_[r * rows:(r + 1) * rows],
                   "dw1": np.s_[:, r * cols:(r + 1) * cols],
                   "dw2": np.s_[r * cols:(r + 1) * cols]}[key]
            want = ref[key][cut]
            got = res[key]
            err = float(np.max(np.abs(got - want))) if got.shape == want.shape else np.inf
            record.require(Measurement(
                f"{key} (error ratio rule)", err, bound,
                f"rank {r}: max|tp - ref| {err:.3g}, max|base - ref| {base_err:.3g} "
                f"(x{RATIO:g} + atol {atol:.3g})"))
