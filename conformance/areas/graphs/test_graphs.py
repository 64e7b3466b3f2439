"""Graph capture and replay (area ``graphs``): every runtime (impls/graphs.py) on every
workload (catalogue.py). A graph is captured once; then, for k = 1..STEPS, new inputs are
copied into its static buffers, it replays, and the eager copy of the workload runs step k
on the same inputs. Replay must equal eager bit for bit (outputs and state), the captured
output tensors must hold the result, and eager must pass the float64 oracle (checks.py).
"""

from __future__ import annotations

import pytest
import torch

from conformance.areas.graphs import cases
from conformance.areas.graphs.catalogue import RANDOM, WORKLOADS
from conformance.areas.graphs.checks import OracleJudge, bits, dropout_sanity, step_errors
from conformance.harness.compare import exact
from conformance.harness.tensors import exact_numpy

pytestmark = pytest.mark.area("graphs")
STEPS = 4
BASE_SEED = 20261202


@pytest.fixture
def seed(run_seed: int) -> int:
    """BASE_SEED + the run's --seed."""
    return BASE_SEED + run_seed


def _params() -> list:
    return [pytest.param(n, marks=[pytest.mark.needs(f) for f in s.needs], id=n)
            for n, s in WORKLOADS.items()]


@pytest.mark.parametrize("workload", _params())
def test_replay_equals_eager(impl, workload, dtype, device, record, seed):
    """Replay k with step k's inputs equals eager step k (bit for bit, or under the oracle
    rule for a runtime that runs other kernels); eager step k passes the oracle."""
    spec = WORKLOADS[workload]
    cases.ready(impl, device, dtype, spec.dtypes)
    runtime = impl.fn
    same = getattr(runtime, "same_kernels", True)
    static = impl.caps.claims("static_outputs")
    record.case(workload=workload, steps=STEPS, seed=seed, same_kernels=same)
    g, e = spec.build(device, dtype, seed), spec.build(device, dtype, seed)
    graph, captured = cases.capture_checked(record, runtime, g, e)
    eager_rule, replay_rule = OracleJudge(dtype, "eager"), OracleJudge(dtype, "replay")
    for k in range(1, STEPS + 1):
        values = g.step_inputs(k)
        g.load_inputs(values)
        e.load_inputs(values)
        before_g, before_e = [exact_numpy(t) for t in g.state], [exact_numpy(t) for t in e.state]
        graph.replay()
        eager = e.fn(*e.inputs)
        cases.sync(runtime, device)
        got = captured if static else graph.outputs
        if static:
            moved = sum(a is not b for a, b in zip(graph.outputs, captured, strict=True))
            record.require(exact(f"step {k}: graph.outputs are the captured tensors", moved,
                                 len(captured)))
        if same:
            record.require(bits(f"step {k}: replay == eager (outputs)", got, eager))
            record.require(bits(f"step {k}: replay == eager (state)", g.state, e.state))
        else:
            replay_rule.add(k, step_errors(spec.oracle, g, dtype, before_g, values, got))
        eager_rule.add(k, step_errors(spec.oracle, e, dtype, before_e, values, eager))
    replay_rule.judge(record)
    eager_rule.judge(record)


@pytest.mark.needs("rng")
def test_random(impl, dtype, device, record, seed):
    """Graph-safe RNG: after manual_seed(s), replays 1..N equal eager calls 1..N after
    manual_seed(s), successive replays draw new numbers, and a new manual_seed applies to
    the next replay (pytorch#84614)."""
    cases.ready(impl, device, dtype, RANDOM.dtypes)
    record.case(workload="dropout", steps=STEPS, seed=seed)
    g, e = RANDOM.build(device, dtype, seed), RANDOM.build(device, dtype, seed)
    values = g.step_inputs(0)
    graph, captured = cases.capture_checked(record, impl.fn, g, e)
    g.load_inputs(values)
    e.load_inputs(values)

    def replays(seed: int, n: int) -> list[list[torch.Tensor]]:
        torch.manual_seed(seed)
        out = []
        for _ in range(n):
            graph.replay()
            out.append([t.clone() for t in captured])
        return out

    def eagers(seed: int, n: int) -> list[list[torch.Tensor]]:
        torch.manual_seed(seed)
        return [[t.clone() for t in e.fn(*e.inputs)] for _ in range(n)]

    got, want = replays(seed, STEPS), eagers(seed, STEPS)
    cases.sync(impl.fn, device)
    for k, (a, b) in enumerate(zip(got, want, strict=True), 1):
        dropout_sanity(record, e.inputs[0], b[0], b[1])
        record.require(bits(f"replay {k} == eager call {k} after the same manual_seed", a, b))
    repeats = sum(bool(torch.equal(got[k][0], got[k - 1][0])) for k in range(1, STEPS))
    record.require(exact("successive replays draw new numbers", repeats, STEPS - 1))
    got2, want2 = replays(seed + 1, 1), eagers(seed + 1, 1)
    record.require(bits("a new manual_seed applies to the next replay", got2[0], want2[0]))


@pytest.mark.needs("memory")
def test_memory_flat(impl, dtype, device, record, seed):
    """Nothing is allocated per replay: memory allocated is the same after 100 replays."""
    cases.ready(impl, device, dtype, WORKLOADS["mlp"].dtypes)
    spec = WORKLOADS["mlp"]
    g, e = spec.build(device, dtype, seed), spec.build(device, dtype, seed)
    graph, _ = cases.capture(impl.fn, g, e, record=record)
    graph.replay()
    cases.sync(impl.fn, device)
    start = impl.fn.memory_allocated(device)
    for _ in range(100):
        graph.replay()
    cases.sync(impl.fn, device)
    grew = impl.fn.memory_allocated(device) - start
    record.note(memory_allocated=start)
    record.require(exact("memory allocated flat over 100 replays (bytes grown)", max(grew, 0),
                         start, f"{grew} bytes more after 100 replays"))


@pytest.mark.needs("pools")
def test_shared_pool(impl, dtype, device, record, seed):
    """Two graphs in one pool, captured and replayed in order: the second's replay leaves
    the first's live outputs as they were (both equal eager)."""
    cases.ready(impl, device, dtype, WORKLOADS["mlp"].dtypes)
    first = [WORKLOADS["mlp"].build(device, dtype, seed) for _ in range(2)]
    second = [cases.sine(device, dtype, seed) for _ in range(2)]
    g1, out1 = cases.capture(impl.fn, *first, record=record)
    g2, out2 = cases.capture(impl.fn, *second, pool=g1.pool(), record=record)
    for k in range(1, STEPS + 1):
        for w in (*first, *second):
            w.load_inputs(w.step_inputs(k))
        g1.replay()
        g2.replay()
        e1, e2 = first[1].fn(*first[1].inputs), second[1].fn(*second[1].inputs)
        cases.sync(impl.fn, device)
        record.require(bits(f"step {k}: the first graph's outputs after the second replayed",
                            out1, e1))
        record.require(bits(f"step {k}: the second graph's outputs", out2, e2))


@pytest.mark.needs("graphed_callables")
def test_graphed_training(impl, dtype, device, record, seed):
    """A training loop over eager -> graphed: the model's first Linear runs eagerly, the rest
    is ``graphed(tail, sample_args)`` with a sample that requires grad (as its real input
    does, make_graphed_callables' rule), so the gradient must pass through the graphed part
    to its input and the eager layer before it (pytorch#124582). Loss and parameters equal
    the eager loop's, step by step."""
    cases.ready(impl, device, dtype, ("float32",))
    record.case(steps=STEPS, seed=seed, graphed="model[1:] after an eager model[0]")
    (mg, og), (me, oe) = cases.trainer(device, dtype, seed), cases.trainer(device, dtype, seed)
    x0, _ = cases.batch(device, dtype, seed, 0)
    with torch.no_grad():
        h0 = mg[0](x0)
    tail = impl.fn.graphed(mg[1:], (h0.requires_grad_(True),))
    graphed = torch.nn.Sequential(mg[0], tail)
    for k in range(1, STEPS + 1):
        x, y = cases.batch(device, dtype, seed, k)
        losses = [cases.train(model, opt, x, y) for model, opt in ((graphed, og), (me, oe))]
        cases.sync(impl.fn, device)
        record.require(bits(f"step {k}: loss", [losses[0]], [losses[1]]))
        record.require(bits(f"step {k}: parameters", list(mg.parameters()),
                            list(me.parameters())))


@pytest.mark.needs("illegal_capture")
def test_illegal_capture(impl, dtype, device, record, isolated, seed):
    """``.item()`` inside a capture raises a clear error (naming the capture), and the device
    stays usable: eager work and a new capture both give the right numbers (in a child)."""
    cases.ready(impl, device, dtype, WORKLOADS["mlp"].dtypes)
    outcome = isolated(cases.illegal_capture, impl.spec, str(device), str(dtype), seed,
                       timeout=120.0)
    if outcome.kind != "returned":
        record.require(exact("the case returns (no crash, no hang)", 1, 1,
                             isolated.explain().replace("\n", " | ")))
    v = outcome.value
    record.note(**v)
    record.require(exact("capture with .item() inside raises", 0 if v["raised"] else 1, 1,
                         "the capture returned"))
    record.require(exact("the error names the capture", 0 if v["names_capture"] else 1, 1,
                         f"{v['error']!r}"))
    record.require(exact("eager work after the failed capture", v["eager_wrong"], 1,
                         v.get("eager_error", "")))
    record.require(exact("a new capture after the failed one", v["replay_wrong"], 1,
                         v.get("replay_error", "")))

