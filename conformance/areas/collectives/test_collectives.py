"""Differentiable collectives: forward and backward of every rank against a float64 oracle
and its adjoint (oracles/collectives.py), on a pool of W rank processes
(``conformance.processes.ranks``).

One class per area (``collectives.<op>``, the functional collective's name); every test
runs per implementation, dtype, backend and world size (``backend``/``world`` in the id):

- ``test_collective`` (Hypothesis, per reduction): zero-size and awkward shapes, gather /
  scatter dim 0 and 1, even / uneven / zero-size / ``None`` all_to_all splits, a random
  source rank, non-contiguous inputs; every rank's output within the reduction's rounding
  bound (catalogue.py states it), then every rank's gradient of Σ_r ⟨g_r, y_r⟩ for random
  per-rank cotangents g_r (never all ones: that hides a wrong split or rank order). A
  non-linear reduction (min, max, product) must raise a clear error at backward time.
- ``test_gradcheck``: ``torch.autograd.gradcheck`` in float64 through the collective (each
  rank in turn perturbs its input; cases.gradcheck says what that certifies).
- ``test_compiled``: ``torch.compile(fullgraph=True)`` forward and backward, one case.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from conformance.areas.collectives.catalogue import COALESCED, REDUCING, SPLITS, build, scaled
from conformance.areas.collectives.checks import applies, check_case, require_returned, run
from conformance.areas.collectives.scale import (
    PROFILE_SIZE_WORLDS,
    PROFILE_SIZES,
    PROFILE_SUBGROUPS,
    subgroups,
    transports,
)
from conformance.areas.collectives.scale_tests import ScaleTests
from conformance.harness.compare import exact
from conformance.harness.profiles import examples
from conformance.harness.runstate import STATE
from conformance.harness.tensors import dtype_name
from conformance.processes.backends import combinations
from conformance.processes.torchrun import active as torchrun_job
from impls.collectives import REDUCE_OPS

SUBGROUP_OPS = ("sum", "max")  # max: the gradient's holder is a group rank
LAYOUTS = ("contiguous", "offset")  # test_noncontiguous covers the other two
NONCONTIGUOUS = ("transposed", "strided")
GRADCHECK = "conformance.areas.collectives.cases:gradcheck"
COMPILED = "conformance.areas.collectives.cases:compiled"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if metafunc.cls is None or "world" not in metafunc.fixturenames:
        return
    state = metafunc.config.stash[STATE]
    pairs = combinations(state.device.matrix_key) or [("gloo", 2)]
    name = metafunc.function.__name__
    profile = state.profile
    if name in ("test_gradcheck", "test_noncontiguous", "test_quiet_ranks",
                "test_mismatched_splits", "test_double_backward", "test_complex"):
        pairs = [p for p in pairs if p[1] in (2, 3)] or pairs[:1]
    if name in ("test_compiled", "test_first_collective"):  # seconds each: one per op
        pairs = [p for p in pairs if p[1] == 2] or pairs[:1]
    if name == "test_world_one":  # one pool of one rank per backend
        if torchrun_job() is not None:
            return _not_here(metafunc, "backend,world", "a group of one rank needs a pool "
                             "of its own; under torchrun the tests run at the job's size")
        pairs = sorted({(b, 1) for b, _ in pairs})
    if name == "test_sizes":
        worlds = PROFILE_SIZE_WORLDS[profile]
        pairs = [p for p in pairs if p[1] in worlds] or pairs[:1]
        metafunc.parametrize("size", PROFILE_SIZES[profile])
        triples = [(b, w, t) for b, w in pairs for t in transports(b, profile)]
        metafunc.parametrize("backend,world,transport", triples,
                             ids=[f"{b}-w{w}" + ("" if t == "default" else f"-{t}")
                                  for b, w, t in triples])
        return
    if name == "test_subgroup":
        layouts = [(b, w, k) for b, w in pairs for k in PROFILE_SUBGROUPS[profile]
                   if subgroups(k, w) is not None]
        if not layouts:
            return _not_here(metafunc, "backend,world,subgroup,reduce_op",
                             f"no subgroup layout of the {profile} profile "
                             f"({', '.join(PROFILE_SUBGROUPS[profile])}) fits world sizes "
                             f"{sorted({w for _, w in pairs})}")
        metafunc.parametrize("backend,world,subgroup", layouts,
                             ids=[f"{b}-w{w}-{k}" for b, w, k in layouts])
        ops = SUBGROUP_OPS if metafunc.cls.op in REDUCING else ("none",)
        metafunc.parametrize("reduce_op", ops)
        return
    ids = [f"{b}-w{w}" for b, w in pairs]
    metafunc.parametrize("backend,world", pairs, ids=ids)
    if "reduce_op" in metafunc.fixturenames:
        ops = REDUCE_OPS if metafunc.cls.op in REDUCING else ("none",)
        metafunc.parametrize("reduce_op", ops)


def _not_here(metafunc: pytest.Metafunc, names: str, why: str) -> None:
    """One skipped test saying why the parametrisation is empty on this run."""
    values = tuple(None for _ in names.split(","))
    metafunc.parametrize(names, [pytest.param(*values, marks=pytest.mark.skip(
        reason=f"[skipped] {why}"))], ids=["not-applicable"])


@st.composite
def params(draw: st.DrawFn, op: str, world: int) -> dict:
    p = {"rows": draw(st.integers(0, 3), label="rows"),
         "cols": draw(st.integers(1, 4), label="cols"),
         "seed": draw(st.integers(0, 2**32 - 1), label="seed")}
    if op in ("all_gather_tensor", "reduce_scatter_tensor"):
        p["dim"] = draw(st.sampled_from((0, 1)), label="dim")
    if op == "all_to_all_single":
        p["splits"] = draw(st.sampled_from(SPLITS), label="splits")
    if op == "broadcast":
        p["src"] = draw(st.integers(0, world - 1), label="src")
    if op in COALESCED:
        p["count"] = draw(st.integers(1, 3), label="count")
    return p


def _scale(data: st.DataObject, op: str, reduce_op: str) -> str:
    """The inputs' magnitude: "unit" (N(0, 1)) half the time, else 2^e away from 1 where
    the case's bound holds there (catalogue.SCALES)."""
    kinds = [k for k in ("unit", "unit", "large", "small") if scaled(op, reduce_op, k)]
    return data.draw(st.sampled_from(kinds), label="scale")


def _case(op: str, world: int, dtype: str, p: dict, reduce_op: str = "sum"):
    rng = np.random.default_rng(p["seed"])
    kwargs = {k: v for k, v in p.items() if k != "seed"}
    return build(op, world, dtype, rng, reduce_op=reduce_op, **kwargs)


class CollectiveTests(ScaleTests):
    """The checks every collectives area runs; subclasses set ``op``."""

    op: str

    # no shrinking: a hung collective costs CASE_TIMEOUT per example tried
    @settings(max_examples=examples(0.25).max_examples,
              phases=[Phase.explicit, Phase.reuse, Phase.generate],
              suppress_health_check=[*settings().suppress_health_check,
                                     HealthCheck.differing_executors])  # one method, 8 classes
    @given(data=st.data())
    def test_collective(self, impl, dtype, backend, world, reduce_op, device, record,
                        request, data):
        applies(impl, backend, world, device, reduce_op)
        p = data.draw(params(self.op, world), label="params")
        layout = data.draw(st.sampled_from(LAYOUTS), label="layout")
        op = reduce_op if reduce_op != "none" else "sum"
        p["scale"] = _scale(data, self.op, op)
        case = _case(self.op, world, dtype_name(dtype), p, op)
        record.case(layout=layout, **case.params, seed=p["seed"])
        backward = impl.caps.claims("backward")
        outcome = run(request, "conformance.areas.collectives.cases:eager",
                      case.payload(impl.spec, layout, backward))
        check_case(record, case, require_returned(record, outcome), backward)

    @pytest.mark.parametrize("layout", NONCONTIGUOUS)
    def test_noncontiguous(self, impl, backend, world, layout, device, record, request):
        """Non-contiguous inputs (column-major, every other element): float32, the first
        reduction, forward and backward."""
        applies(impl, backend, world, device)
        case = _case(self.op, world, "float32", _fixed(self.op, world, 3, 5))
        record.case(layout=layout, **case.params)
        backward = impl.caps.claims("backward")
        outcome = run(request, "conformance.areas.collectives.cases:eager",
                      case.payload(impl.spec, layout, backward))
        check_case(record, case, require_returned(record, outcome), backward)

    @pytest.mark.needs("backward")
    def test_gradcheck(self, impl, backend, world, device, record, request):
        """gradcheck (float64) of each rank's own block of the Jacobian, rank by rank."""
        applies(impl, backend, world, device)
        p = _fixed(self.op, world, 2, 7)
        if self.op == "all_to_all_single":  # lockstep gradcheck: equal shapes on every rank
            p["splits"] = "even"
        case = _case(self.op, world, "float64", p)
        record.case(**case.params)
        for active in range(world):
            # lockstep: every rank makes gradcheck's calls in the same order, so a rank that
            # failed its check and returned leaves the others in a collective: they get 2 s
            # after its reply (the case's own timeout is the default one; 5 s was too short
            # for a healthy gradcheck on a loaded machine)
            outcome = run(request, GRADCHECK, case.payload(impl.spec), active, lockstep=True)
            results = require_returned(record, outcome)
            failed = [f"rank {r['rank']}: {r['error']['type']}: {r['error']['message']}"
                      for r in results if not r["ok"]]
            record.require(exact(f"gradcheck (rank {active} perturbed)", len(failed),
                                 world, "; ".join(failed)))

    @pytest.mark.needs("compile", "backward")
    def test_compiled(self, impl, backend, world, device, record, request):
        """torch.compile(fullgraph=True, Inductor): forward and backward of one case."""
        applies(impl, backend, world, device)
        case = _case(self.op, world, "float32", _fixed(self.op, world, 3, 11))
        record.case(**case.params, backend_compiler="inductor")
        outcome = run(request, COMPILED, case.payload(impl.spec), "inductor", timeout=180)
        check_case(record, case, require_returned(record, outcome))


def _fixed(op: str, world: int, cols: int, seed: int) -> dict:
    """The parameters of a fixed case of ``op``: two rows, dim 1, uneven splits, two
    coalesced tensors, the last rank as the broadcast source (what applies to ``op``)."""
    p: dict = {"rows": 2, "cols": cols, "seed": seed}
    if op in ("all_gather_tensor", "reduce_scatter_tensor"):
        p["dim"] = 1
    elif op == "all_to_all_single":
        p["splits"] = "uneven"
    elif op == "broadcast":
        p["src"] = world - 1
    elif op in COALESCED:
        p["count"] = 2
    return p


class TestAllReduce(CollectiveTests):
    op = "all_reduce"
    pytestmark = pytest.mark.area("collectives.all_reduce")


class TestAllGatherTensor(CollectiveTests):
    op = "all_gather_tensor"
    pytestmark = pytest.mark.area("collectives.all_gather_tensor")


class TestReduceScatterTensor(CollectiveTests):
    op = "reduce_scatter_tensor"
    pytestmark = pytest.mark.area("collectives.reduce_scatter_tensor")


class TestAllToAllSingle(CollectiveTests):
    op = "all_to_all_single"
    pytestmark = pytest.mark.area("collectives.all_to_all_single")

    def test_mismatched_splits(self, impl, backend, world, device, record, request):
        """Rank 0 expects one row more from rank 1 than rank 1 sends: every rank must
        raise (a clear error, within the case's timeout), none return a tensor (whose
        extra row could only be garbage) nor hang."""
        applies(impl, backend, world, device)
        rows = 2
        ins = [[rows] * world for _ in range(world)]
        outs = [[rows] * world for _ in range(world)]
        outs[0][1] += 1  # rank 0's table says rank 1 sends 3 rows; rank 1's says 2
        record.case(world=world, input_split_sizes=ins, output_split_sizes=outs)
        outcome = run(request, "conformance.areas.collectives.cases:mismatched", impl.spec,
                      ins, outs)
        returned = [f"rank {r}: returned a tensor of shape {o.value}"
                    for r, o in enumerate(outcome.outcomes) if o.kind == "returned"]
        hung = [f"rank {r}: {o.describe()}" for r, o in enumerate(outcome.outcomes)
                if o.kind in ("timeout", "stalled")]
        record.require(exact("mismatched splits: no rank hangs", len(hung), world,
                             "; ".join(hung)))
        record.require(exact("mismatched splits: every rank raises", len(returned), world,
                             "; ".join(returned)))


class TestAllReduceCoalesced(CollectiveTests):
    op = "all_reduce_coalesced"
    pytestmark = pytest.mark.area("collectives.all_reduce_coalesced")


class TestAllGatherIntoTensorCoalesced(CollectiveTests):
    op = "all_gather_into_tensor_coalesced"
    pytestmark = pytest.mark.area("collectives.all_gather_into_tensor_coalesced")


class TestReduceScatterTensorCoalesced(CollectiveTests):
    op = "reduce_scatter_tensor_coalesced"
    pytestmark = pytest.mark.area("collectives.reduce_scatter_tensor_coalesced")


class TestBroadcast(CollectiveTests):
    op = "broadcast"
    pytestmark = pytest.mark.area("collectives.broadcast")
