"""Regression cases of the collectives areas, from upstream reports: each runs torch's own
API (not the ``--impl`` under test) and records what this torch version does.

- pytorch#190007: the backward of an "avg" all_reduce raises ("only supports 'sum'") in
  the functional collectives of torch 2.11 to 2.13 (fix PRs #190224, #190630 unmerged in
  those releases); the older ``torch.distributed.nn`` API differentiates it. The test
  requires the right gradient (Σ_s g_s / W): an expected failure where it raises.
- torch 2.15.0: the new MAX / MIN backward of ``all_reduce_coalesced`` raises autograd's
  in-place error on some ranks only when the tensors are empty; the others run the
  tie-count collective, so the ranks leave the call out of step and the group's next
  collective hangs (docs/results/torch-2.15.0.md). Every rank must end each call alike.
- Waiting on a result must not detach it from autograd (``wait_tensor`` and
  ``AsyncCollectiveTensor.wait()``): the gradient through either is Σ_s g_s.
"""

from __future__ import annotations

import numpy as np
import pytest

from conformance.areas.collectives.catalogue import build
from conformance.areas.collectives.checks import check_case, require_returned, run
from conformance.harness.compare import elementwise_bound, exact
from conformance.harness.outcomes import missing as skip_missing
from conformance.harness.runstate import STATE
from conformance.processes.backends import combinations, missing
from conformance.processes.ranks import run_ranks
from conformance.processes.torchrun import active

W = 3


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "world" in metafunc.fixturenames:
        key = metafunc.config.stash[STATE].device.matrix_key
        pairs = [p for p in combinations(key) if p == ("gloo", W)] or combinations(key)[:1]
        metafunc.parametrize("backend,world", pairs, ids=[f"{b}-w{w}" for b, w in pairs])


def _inputs(world: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((world, 2, 3)), rng.standard_normal((world, 2, 3))


def _skip_unless_cpu_tensors(backend: str, world: int, device) -> None:
    why = missing(backend, world, device.type)
    if why:
        skip_missing(why)


@pytest.mark.area("collectives.all_reduce")
@pytest.mark.parametrize("api", ["functional", "nn"])
def test_avg_backward_190007(api, backend, world, device, record, request):
    """The gradient of y = avg_r x_r on every rank is Σ_s g_s / W (pytorch#190007)."""
    _skip_unless_cpu_tensors(backend, world, device)
    x, g = _inputs(world, 190007)
    outcome = run(request, "conformance.areas.collectives.cases:avg_backward", x, g, api)
    results = require_returned(record, outcome)
    errors = [r["error"] for r in results if "error" in r]
    record.note(backward_error=errors[0] if errors else None)
    record.require(exact("backward runs", len(errors), world, "; ".join(errors[:1])))
    want = g.sum(axis=0) / world
    for r in results:
        record.require(elementwise_bound("gradient", r["grad"], want,
                                         4 * 2.0**-53 * world * np.abs(g).sum(axis=0)))


@pytest.mark.area("collectives.all_reduce")
def test_wait_keeps_grad(backend, world, device, record, request):
    """wait_tensor(y) and y.wait() keep y in the graph, with the right gradient."""
    _skip_unless_cpu_tensors(backend, world, device)
    x, g = _inputs(world, 4242)
    outcome = run(request, "conformance.areas.collectives.cases:wait_keeps_grad", x, g)
    results = require_returned(record, outcome)
    want = g.sum(axis=0)
    for how in ("wait_tensor", "method"):
        detached = [r["rank"] for r in results if not r[f"{how}_requires_grad"]]
        record.require(exact(f"{how}: the result stays in the graph", len(detached), world,
                             f"ranks {detached} detached"))
        for r in results:
            record.require(elementwise_bound(f"{how}: gradient", r[f"{how}_grad"], want,
                                             4 * 2.0**-53 * world * np.abs(g).sum(axis=0)))


BACKEND_DEVICE = {"gloo": None, "nccl": "cuda", "xccl": "xpu"}


@pytest.mark.area("collectives.all_reduce")
@pytest.mark.parametrize("comm", sorted(BACKEND_DEVICE))
def test_backend_present(comm, device, record, request):
    """Every communication backend once (world size 2, a sum all_reduce with its gradient):
    gloo on the run's device, nccl on CUDA/ROCm GPUs, xccl on XPUs; a backend this host
    cannot run is skipped with the reason (so a CPU report says why nccl did not run)."""
    kind = BACKEND_DEVICE[comm] or device.type
    why = missing(comm, 2, kind)
    if why is None and kind != device.type:
        why = f"{comm} runs on {kind} devices; this run's device is {device.type}"
    if why is None and active() is not None:
        why = "under torchrun the tests run on the job's backend and world size only"
    if why:
        skip_missing(why)
    case = build("all_reduce", 2, "float32", np.random.default_rng(2), rows=2, cols=3)
    outcome = run_ranks("conformance.areas.collectives.cases:eager",
                        case.payload("impls.collectives:all_reduce"), backend=comm,
                        device=str(device), world=2, timeout=60)
    record.note(backend=comm, backend_version=outcome.info.get("backend_version", ""))
    check_case(record, case, require_returned(record, outcome))


@pytest.mark.area("collectives.all_reduce_coalesced")
@pytest.mark.parametrize("reduce_op", ["max", "min"])
def test_empty_extremum_backward_in_step(reduce_op, backend, world, device, record, request):
    """20 calls of an empty MAX / MIN all_reduce_coalesced and its backward: every rank
    ends each call alike (an error on all or none) and the ranks stay in step."""
    _skip_unless_cpu_tensors(backend, world, device)
    repeats = 20
    outcome = run(request, "conformance.areas.collectives.cases:empty_extremum_backward",
                  reduce_op, repeats)
    results = require_returned(record, outcome)
    ends = [r["ends"] for r in results]
    differ = [i for i in range(repeats) if len({e[i] for e in ends}) > 1]
    first = differ[0] if differ else 0
    record.note(ends=sorted({e[first] for e in ends}))
    record.require(exact("every rank ends each call alike", len(differ), repeats,
                         f"calls {differ[:5]} differ: "
                         + "; ".join(f"rank {r}: {e[first]!r}" for r, e in enumerate(ends))))
