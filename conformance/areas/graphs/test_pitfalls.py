"""Upstream pitfalls of graph capture as cases (each test names its upstream source; the
features each needs are declared per runtime in impls/graphs.py).

- test_cuda.py::test_graph_rng_functional: graphed -> eager -> graphed random calls (the
  generator's offset moves consistently when replays and eager draws interleave).
- test_cuda.py::test_graphsafe_set_get_rng_state and ``CUDAGraph.register_generator_state``
  (torch/cuda/graphs.py): a non-default generator registered with the graph.
- test_cuda.py::test_graph_rng_distributions: the samplers torch captures (multinomial is
  left out upstream as "uses some uncapturable CUDA calls"; randperm is not tested there).
- test_cuda.py::test_graph_capture_reset_recapture: ``reset()``, then a new capture into the
  same graph object.
- torch's CUDA graph notes (docs/source/notes/cuda.rst, "Constraints": no sync with the CPU
  while capturing): ``nonzero``, ``.cpu()``, ``.tolist()`` inside a capture.
- torch/cuda/graphs.py ``capture_begin(capture_error_mode=)``: "global", "thread_local",
  "relaxed"; any other value is refused (the binding's TORCH_CHECK).
- test_cuda.py::test_repeat_graph_capture_cublas_workspace_memory and
  test_memory_stats_of_multiple_generators_and_graphs: memory flat over repeated captures.
- pytorch#103985, #178586 (copied inputs do not reflect mutation): a step that updates one of
  its static inputs in place; the caller's tensor must hold the update after each replay.
- pytorch#129349 (parameters whose data pointers change must re-record): two captures of the
  same code (one builder, other weights in its closure) on the same static input; each
  graph replays its own function.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from conformance.areas.graphs import cases
from conformance.areas.graphs.catalogue import WORKLOADS, Workload
from conformance.areas.graphs.checks import bits
from conformance.harness.compare import Measurement, exact
from conformance.harness.outcomes import unsupported

pytestmark = pytest.mark.area("graphs")
BASE_SEED = 114068
REPLAYS = 3
N = 4096
CYCLES = {"ci": 4, "dev": 20, "thorough": 100}  # capture/reset cycles per profile
MODES = ("global", "thread_local", "relaxed")


@pytest.fixture
def seed(run_seed: int) -> int:
    """BASE_SEED + the run's --seed."""
    return BASE_SEED + run_seed


def _steps(graph: Any, g: Workload, e: Workload, impl: Any,
           device: torch.device) -> Iterator[tuple[int, Any]]:
    """For k = 1..REPLAYS: step k's inputs into the graphed and the eager workload, one
    replay, one eager call; yields (k, eager's outputs) once the device is synchronised."""
    for k in range(1, REPLAYS + 1):
        for w in (g, e):
            w.load_inputs(w.step_inputs(k))
        graph.replay()
        want = e.fn(*e.inputs)
        cases.sync(impl.fn, device)
        yield k, want


def _drop2(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Two chained random calls, as upstream's replay() plays two invocations."""
    y = F.dropout(x, 0.1, training=True)
    return (F.rrelu(y, training=True),)


@pytest.mark.needs("rng")
def test_graphed_eager_graphed_rng(impl, device, record, seed):
    """test_graph_rng_functional: after manual_seed(s), replay, two eager calls on the
    replay's output, replay again: equals six eager calls after manual_seed(s), for 3 seeds
    (the generator moves by the replays' and the eager calls' draws, in order)."""
    cases.ready(impl, device)
    a = torch.from_numpy(np.random.default_rng([seed, 1]).standard_normal(N).astype(np.float32))
    g = Workload("dropout_rrelu", _drop2, [a.to(device)])
    e = Workload("dropout_rrelu", _drop2, [a.to(device)])
    graph, (out,) = cases.capture_checked(record, impl.fn, g, e)
    for s in (seed, seed + 1, seed + 2):
        record.case(seed=s)
        torch.manual_seed(s)
        want = a.to(device)
        for _ in range(3):
            want = _drop2(want)[0]
        torch.manual_seed(s)
        g.inputs[0].copy_(a.to(device))
        graph.replay()
        mid = _drop2(out)[0]
        g.inputs[0].copy_(mid)
        graph.replay()
        cases.sync(impl.fn, device)
        record.require(bits("graphed -> eager -> graphed == eager x 6 after the same seed",
                            [out], [want]))


def _drawing(gen: torch.Generator) -> Callable[..., tuple[torch.Tensor, ...]]:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (x + torch.rand(x.shape, device=x.device, generator=gen),
                torch.randn(x.shape, device=x.device, generator=gen))
    return fn


@pytest.mark.needs("generators")
def test_registered_generator(impl, device, record, seed):
    """register_generator_state: a step drawing from a non-default torch.Generator,
    captured with the generator registered; after gen.manual_seed(s) replays 1..3 equal
    eager calls 1..3 of a twin generator seeded s, and successive replays differ."""
    cases.ready(impl, device)
    gen, twin = torch.Generator(device=device), torch.Generator(device=device)
    x = torch.zeros(N, device=device)
    g, e = Workload("generator", _drawing(gen), [x]), Workload("generator", _drawing(twin),
                                                               [x.clone()])
    graph, captured = cases.capture_checked(record, impl.fn, g, e, "with a registered generator",
                                            generators=(gen,))
    for w in (g, e):
        w.load_inputs(w.step_inputs(1))
    gen.manual_seed(seed)
    twin.manual_seed(seed)
    got, want = [], []
    for _ in range(REPLAYS):
        graph.replay()
        got.append([t.clone() for t in captured])
        want.append(list(e.fn(*e.inputs)))
    cases.sync(impl.fn, device)
    for k, (a, b) in enumerate(zip(got, want, strict=True), 1):
        record.require(bits(f"replay {k} == eager call {k} of a generator seeded the same",
                            a, b))
    same = sum(bool(torch.equal(got[k][1], got[k - 1][1])) for k in range(1, REPLAYS))
    record.require(exact("successive replays advance the registered generator", same,
                         REPLAYS - 1))


def _kstest(dist: str, *args: float) -> Callable[[np.ndarray], tuple[float, str]]:
    def test(x: np.ndarray) -> tuple[float, str]:
        from scipy import stats

        r = stats.kstest(x, dist, args=args)
        return float(r.pvalue), f"KS against {dist}{args}: D = {r.statistic:.3g}"
    return test


def _chisquare(probs: Callable[[int], float], k: int, lo: int = 0
               ) -> Callable[[np.ndarray], tuple[float, str]]:
    """Counts of lo..lo+k-1 (the rest in one tail bin) against their probabilities."""
    def test(x: np.ndarray) -> tuple[float, str]:
        from scipy import stats

        v = x.astype(np.int64)
        if np.any(v != x) or np.any(v < lo):
            return 0.0, "values outside the support"
        p = np.array([probs(i) for i in range(lo, lo + k)])
        counts = np.array([np.sum(v == i) for i in range(lo, lo + k)])
        if p.sum() < 1 - 1e-12:
            p, counts = np.append(p, 1 - p.sum()), np.append(counts, np.sum(v >= lo + k))
        r = stats.chisquare(counts, p * len(v))
        return float(r.pvalue), f"chi-square over {len(p)} bins: {r.statistic:.3g}"
    return test


# upstream's list (test_graph_rng_distributions), each with its sampling law
DISTRIBUTIONS: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], Any]] = {
    "rand": (lambda x: torch.rand(x.shape, device=x.device), _kstest("uniform")),
    "randn": (lambda x: torch.randn(x.shape, device=x.device), _kstest("norm")),
    "randint": (lambda x: torch.randint(0, 3, x.shape, device=x.device).float(),
                _chisquare(lambda i: 1 / 3, 3)),
    "bernoulli_": (lambda x: torch.empty_like(x).bernoulli_(0.3),
                   _chisquare(lambda i: (0.7, 0.3)[i], 2)),
    "normal_": (lambda x: torch.empty_like(x).normal_(), _kstest("norm")),
    "uniform_": (lambda x: torch.empty_like(x).uniform_(), _kstest("uniform")),
    "exponential_": (lambda x: torch.empty_like(x).exponential_(), _kstest("expon")),
    "geometric_": (lambda x: torch.empty_like(x).geometric_(0.3),
                   _chisquare(lambda i: 0.3 * 0.7 ** (i - 1), 12, lo=1)),
    "log_normal_": (lambda x: torch.empty_like(x).log_normal_(),
                    _kstest("lognorm", 2.0, 0.0, float(np.e))),
    "cauchy_": (lambda x: torch.empty_like(x).cauchy_(), _kstest("cauchy")),
    "random_": (lambda x: torch.empty_like(x).random_(0, 8), _chisquare(lambda i: 1 / 8, 8)),
}
ALPHA = 1e-6 / (len(DISTRIBUTIONS) * REPLAYS)  # family-wise 1e-6 over the eager draws


@pytest.mark.needs("rng")
@pytest.mark.parametrize("name", list(DISTRIBUTIONS))
def test_distribution(impl, device, record, seed, name):
    """test_graph_rng_distributions: after manual_seed(s), replays 1..3 of one sampler equal
    eager calls 1..3 after manual_seed(s), successive replays differ, and each eager draw
    follows its law (KS or chi-square, family-wise alpha 1e-6 over all draws here)."""
    cases.ready(impl, device)
    draw, law = DISTRIBUTIONS[name]

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (draw(x),)

    g = Workload(name, fn, [torch.zeros(N, device=device)])
    e = Workload(name, fn, [torch.zeros(N, device=device)])
    graph, (out,) = cases.capture_checked(record, impl.fn, g, e)
    torch.manual_seed(seed)
    got = []
    for _ in range(REPLAYS):
        graph.replay()
        got.append(out.clone())
    torch.manual_seed(seed)
    want = [e.fn(*e.inputs)[0] for _ in range(REPLAYS)]
    cases.sync(impl.fn, device)
    for k, (a, b) in enumerate(zip(got, want, strict=True), 1):
        record.require(bits(f"replay {k} == eager call {k} after the same manual_seed",
                            [a], [b]))
        p, detail = law(b.double().cpu().numpy())
        record.require(Measurement(f"eager draw {k} follows its law (p >= {ALPHA:.2g})",
                                   -np.log10(max(p, 1e-300)), -np.log10(ALPHA),
                                   f"p = {p:.3g}; {detail}"))
    same = sum(bool(torch.equal(got[k], got[k - 1])) for k in range(1, REPLAYS))
    record.require(exact("successive replays draw new numbers", same, REPLAYS - 1))


@pytest.mark.needs("reset")
def test_reset_recapture(impl, device, record, seed):
    """test_graph_capture_reset_recapture: capture the MLP, replay; reset(); capture
    2 sin(u) into the same graph object: its replays give the new function's results."""
    cases.ready(impl, device)
    first = [WORKLOADS["mlp"].build(device, torch.float32, seed) for _ in range(2)]
    second = [cases.sine(device, torch.float32, seed) for _ in range(2)]
    graph, out = cases.capture_checked(record, impl.fn, *first)
    for w in first:
        w.load_inputs(w.step_inputs(1))
    graph.replay()
    record.require(bits("replay before reset == eager", out, first[1].fn(*first[1].inputs)))
    graph.reset()
    regraph, _ = cases.capture_checked(record, impl.fn, *second, "into the reset graph",
                                          graph=graph.graph)
    record.note(same_object=regraph.graph is graph.graph)
    for k, want in _steps(regraph, *second, impl, device):
        record.require(bits(f"replay {k} after reset and recapture == the new function",
                            regraph.outputs, want))


@pytest.mark.needs("illegal_capture")
@pytest.mark.parametrize("op", ["nonzero", "cpu", "tolist"])
def test_sync_in_capture(impl, device, record, isolated, seed, op):
    """torch's CUDA graph constraints: a host sync inside a capture (``nonzero``, ``.cpu()``,
    ``.tolist()``) raises an error that names the capture, and the device stays usable:
    eager work and a new capture give the right numbers (in a child)."""
    cases.ready(impl, device)
    if op == "cpu" and device.type == "cpu":
        unsupported(".cpu() of a CPU tensor copies nothing: no host sync on the CPU")
    outcome = isolated(cases.illegal_capture, impl.spec, str(device), "float32", seed, op,
                       timeout=120.0)
    if outcome.kind != "returned":
        record.require(exact("the case returns (no crash, no hang)", 1, 1,
                             isolated.explain().replace("\n", " | ")))
    v = outcome.value
    record.note(**v)
    record.require(exact(f"capture with {op} inside raises", 0 if v["raised"] else 1, 1,
                         "the capture returned"))
    record.require(exact("the error names the capture", 0 if v["names_capture"] else 1, 1,
                         f"{v['error']!r}"))
    record.require(exact("eager work after the failed capture", v["eager_wrong"], 1,
                         v.get("eager_error", "")))
    record.require(exact("a new capture after the failed one", v["replay_wrong"], 1,
                         v.get("replay_error", "")))


def _other_thread(counter: torch.Tensor, done: list[str]) -> None:
    """Eager work of another thread during a capture, on its own stream: not captured."""
    try:
        if counter.device.type == "cpu":
            counter.add_(1)
        else:
            module = torch.get_device_module(counter.device)
            side = module.Stream()
            with module.stream(side):
                counter.add_(1)
            side.synchronize()
        done.append("ok")
    except Exception as exc:  # reported by the case
        done.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")


@pytest.mark.needs("capture_error_mode")
@pytest.mark.parametrize("mode", MODES)
def test_capture_error_mode(impl, device, record, seed, mode):
    """capture_error_mode (torch/cuda/graphs.py): the MLP captured in each mode replays as
    eager; in "thread_local" and "relaxed" another thread's eager work during the capture
    runs (on each call of the step: a replay does not repeat it). "global" errors on unsafe
    calls of other threads, which depend on the allocator's state: not probed."""
    cases.ready(impl, device)
    counter = torch.zeros((), device=device)
    done: list[str] = []
    mlp = WORKLOADS["mlp"].build(device, torch.float32, seed)

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        if mode != "global":  # on each call: the runtime's warm-up calls and the capture
            worker = threading.Thread(target=_other_thread, args=(counter, done))
            worker.start()
            worker.join()
        return mlp.fn(x)

    g = Workload("mlp", fn, mlp.inputs, seed=seed)
    e = WORKLOADS["mlp"].build(device, torch.float32, seed)
    graph, out = cases.capture_checked(record, impl.fn, g, e, f"in mode {mode!r}",
                                       capture_error_mode=mode)
    ran = float(counter)
    for k, want in _steps(graph, g, e, impl, device):
        record.require(bits(f"replay {k} == eager (mode {mode})", out, want))
    if mode != "global":
        bad = [d for d in done if d != "ok"]
        record.require(exact("the other thread's work ran during the capture",
                             0 if done and not bad else 1, 1,
                             "; ".join(bad) or "did not run"))
        record.require(exact("replays do not repeat the other thread's work",
                             int(float(counter) != ran), 1,
                             f"counter {float(counter):g} after the replays, {ran:g} before"))


@pytest.mark.needs("capture_error_mode")
def test_unknown_capture_error_mode(impl, device, record, seed):
    """capture_begin's binding refuses a mode other than global / thread_local / relaxed;
    a capture afterwards works."""
    cases.ready(impl, device)
    g, e = (WORKLOADS["mlp"].build(device, torch.float32, seed) for _ in range(2))
    try:
        cases.capture(impl.fn, g, e, record=record, capture_error_mode="sloppy")
        refused = ""
    except Exception as exc:  # the refusal under test
        refused = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    record.note(refused=refused)
    record.require(exact("capture_error_mode='sloppy' is refused", 0 if refused else 1, 1,
                         "the capture returned"))
    graph, out = cases.capture_checked(record, impl.fn, g, e, "after the refusal")
    for w in (g, e):
        w.load_inputs(w.step_inputs(1))
    graph.replay()
    want = e.fn(*e.inputs)
    cases.sync(impl.fn, device)
    record.require(bits("a capture after the refusal replays as eager", out, want))


@pytest.mark.needs("memory", "reset")
def test_memory_over_captures(impl, device, record, conformance_state, seed):
    """test_repeat_graph_capture_cublas_workspace_memory: N cycles of capture, replay,
    reset of the MLP step (4 in ci, 20 in dev, 100 in thorough): memory allocated after
    cycle k is no more than after cycle 1."""
    cases.ready(impl, device)
    n = CYCLES.get(conformance_state.profile, CYCLES["ci"])
    record.case(cycles=n)
    g, e = (WORKLOADS["mlp"].build(device, torch.float32, seed) for _ in range(2))
    after = []
    for _ in range(n):
        graph, out = cases.capture(impl.fn, g, e, record=record)
        graph.replay()
        cases.sync(impl.fn, device)
        graph.reset()
        del graph, out  # freed by reference counting (no cycles)
        cases.sync(impl.fn, device)
        after.append(impl.fn.memory_allocated(device))
    grew = max(after) - after[0]
    record.note(memory_allocated=after)
    record.require(exact(f"memory allocated flat over {n} capture/reset cycles (bytes grown)",
                         max(grew, 0), after[0] or 1,
                         f"{grew} bytes more than after the first cycle"))


def _bitwise(impl: Any) -> None:
    """These cases compare replays with eager bit for bit."""
    if not getattr(impl.fn, "same_kernels", True):
        unsupported("compares replay with eager bit for bit; the runtime runs other kernels")


DECAY = 0.75


def _running(x: torch.Tensor, acc: torch.Tensor) -> tuple[torch.Tensor, ...]:
    acc.mul_(DECAY).add_(x)  # in place, on a static input
    return (acc * 2,)


def test_input_mutated_in_place(impl, device, record, seed):
    """pytorch#103985, #178586: ``fn(x, acc)`` updates its static input ``acc`` in place
    (a running sum) and returns 2 acc. For k = 1..3, new values are copied into both inputs,
    the graph replays: the caller's ``acc`` holds eager's update and the output eager's
    (a runtime that stages inputs into private buffers must copy mutations back)."""
    cases.ready(impl, device)
    _bitwise(impl)
    g, e = (Workload("running_sum", _running, [torch.zeros(64, device=device),
                                               torch.zeros(64, device=device)], seed=seed)
            for _ in range(2))
    graph, _ = cases.capture_checked(record, impl.fn, g, e)
    for k, want in _steps(graph, g, e, impl, device):
        record.require(bits(f"replay {k}: the input updated in place == eager's",
                            [g.inputs[1]], [e.inputs[1]]))
        record.require(bits(f"replay {k}: output == eager", graph.outputs, want))


def test_same_code_new_weights(impl, device, record, seed):
    """pytorch#129349: two MLPs from one builder (the same code, other weights in the
    closure) captured one after the other on the same static input tensor, both kept:
    after each step's inputs, replaying each gives its own function's result (a capture
    cache keyed by code and input addresses would replay the first)."""
    cases.ready(impl, device)
    _bitwise(impl)
    a = [WORKLOADS["mlp"].build(device, torch.float32, seed) for _ in range(2)]
    b = [WORKLOADS["mlp"].build(device, torch.float32, seed + 1) for _ in range(2)]
    b[0] = Workload("mlp", b[0].fn, a[0].inputs, seed=seed)  # the same static input tensor
    b[1].seed = seed
    ga, _ = cases.capture_checked(record, impl.fn, *a, "of the first MLP")
    gb, _ = cases.capture_checked(record, impl.fn, *b, "of the second MLP, same code")
    for k in range(1, REPLAYS + 1):
        values = a[0].step_inputs(k)
        for w in (*a, b[1]):
            w.load_inputs(values)
        ga.replay()
        got_a = [t.clone() for t in ga.outputs]
        gb.replay()
        want_a, want_b = a[1].fn(*a[1].inputs), b[1].fn(*b[1].inputs)
        cases.sync(impl.fn, device)
        record.require(bits(f"step {k}: the first graph == its MLP", got_a, want_a))
        record.require(bits(f"step {k}: the second graph == its MLP (other weights)",
                            gb.outputs, want_b))
