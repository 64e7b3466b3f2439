"""Regression cases of the graphs area from real bugs (each test names its source).

- pytorch#84614: a dropout module made with make_graphed_callables drew the same mask on
  every call (the graph kept the capture's seed; fixed by #84967). Here: three chained calls
  after manual_seed equal eager's and differ from each other.
- pytorch#170535 (open): ``Generator.clone_state()`` inside a capture raises ("Cannot call
  CUDAGeneratorImpl::clone_impl during CUDA graph capture"); only graphsafe_get/set_state
  are graph-safe. Here: a capture that clones the default generator's state.
- pytorch#172390: the capture RNG state is per generator; two graphs captured one after
  the other from the default generator must still replay, interleaved, what eager draws;
  also with the second graph in the first's pool (#176752: RNG capture state per generator,
  not per capture or pool).
- pytorch#187277: a device-wide synchronize after an XPU graph replay segfaulted (torch
  2.13+xpu, Arc B-series). Here: replay, then synchronize, in a child process.
- pytorch#189403 (open): replaying an XPU graph with a captured all_reduce made a later
  eager all_reduce NaN. Here: replays of a captured all_reduce interleaved with eager ones,
  on the device's collective backend (gloo on the CPU), two ranks.
- intel/torch-xpu-ops#5069: fused SDPA capture on XPU failed (an external-event
  dependency); the catalogue's attention workload covers it (the matrix has the entry).
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from conformance.areas.graphs import cases
from conformance.areas.graphs.catalogue import RANDOM, WORKLOADS, Workload
from conformance.areas.graphs.checks import bits
from conformance.harness.compare import exact
from conformance.harness.outcomes import missing, unsupported
from conformance.harness.registry import load_object

pytestmark = pytest.mark.area("graphs")
BASE_SEED = 84614


@pytest.fixture
def seed(run_seed: int) -> int:
    """BASE_SEED + the run's --seed."""
    return BASE_SEED + run_seed


@pytest.mark.needs("graphed_callables", "rng")
def test_graphed_dropout_advances(impl, device, record, seed):
    """pytorch#84614: graphed Linear + Dropout, three chained calls after manual_seed(0)
    equal eager's and draw three different masks."""
    cases.ready(impl, device)

    def module() -> torch.nn.Module:
        torch.manual_seed(seed)
        return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Dropout(0.5)).to(device)

    graphed_src, eager = module(), module()
    x = torch.randn(32, 64, device=device)
    graphed = impl.fn.graphed(graphed_src, (x,))

    def chain(m: Any) -> list[torch.Tensor]:
        torch.manual_seed(0)
        out, y = [], x
        for _ in range(3):
            y = m(y)
            out.append(y.detach().clone())
        return out

    got, want = chain(graphed), chain(eager)
    cases.sync(impl.fn, device)
    record.require(bits("graphed calls == eager calls after manual_seed(0)", got, want))
    same = sum(bool(torch.equal(got[i] != 0, got[i + 1] != 0)) for i in range(2))
    record.require(exact("successive calls draw new masks", same, 2))


@pytest.mark.needs("rng")
def test_clone_state_in_capture(impl, device, record, seed):
    """pytorch#170535: cloning the default generator's state inside a capture works, and
    the replays still equal eager."""
    cases.ready(impl, device)

    def generator() -> torch.Generator:
        if device.type == "cpu":
            return torch.default_generator
        module = torch.get_device_module(device)
        return module.default_generators[device.index or 0]

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        generator().clone_state()
        return (x + torch.rand_like(x),)

    g = Workload("clone_state", fn, [torch.zeros(256, device=device)])
    e = Workload("clone_state", fn, [torch.zeros(256, device=device)])
    graph, captured = cases.capture_checked(record, impl.fn, g, e, "with clone_state() inside")
    for w in (g, e):
        w.load_inputs(g.step_inputs(1))
    torch.manual_seed(seed)
    graph.replay()
    got = [t.clone() for t in captured]
    torch.manual_seed(seed)
    want = e.fn(*e.inputs)
    cases.sync(impl.fn, device)
    record.require(bits("replay == eager after manual_seed", got, want))


@pytest.mark.needs("rng")
@pytest.mark.parametrize("pool", ["own", pytest.param("shared", marks=pytest.mark.needs("pools"))])
def test_two_graphs_interleaved_rng(impl, device, record, seed, pool):
    """pytorch#172390, #176752: two graphs captured in turn from the default generator (each
    in its own memory, or the second in the first's pool: a pool shares memory, never the
    RNG offset), replayed g1 g2 g1 g2 after manual_seed, equal eager fn1 fn2 fn1 fn2 after
    the same seed."""
    cases.ready(impl, device)
    record.case(pool=pool)
    dropout = [RANDOM.build(device, torch.float32, seed) for _ in range(2)]
    rand = [Workload("randn", lambda u: (torch.randn_like(u) + u,),
                     [torch.zeros(128, device=device)]) for _ in range(2)]
    for w in (*dropout, *rand):
        w.load_inputs(w.step_inputs(0))
    g1, out1 = cases.capture(impl.fn, *dropout, record=record)
    g2, out2 = cases.capture(impl.fn, *rand, record=record,
                             pool=g1.pool() if pool == "shared" else None)
    for w in (*dropout, *rand):
        w.load_inputs(w.step_inputs(0))
    torch.manual_seed(seed)
    got = []
    for _ in range(2):
        g1.replay()
        got.extend(t.clone() for t in out1)
        g2.replay()
        got.extend(t.clone() for t in out2)
    torch.manual_seed(seed)
    want = []
    for _ in range(2):
        want.extend(t.clone() for t in dropout[1].fn(*dropout[1].inputs))
        want.extend(t.clone() for t in rand[1].fn(*rand[1].inputs))
    cases.sync(impl.fn, device)
    record.require(bits("interleaved replays == interleaved eager calls", got, want))


def synchronize_after_replay(spec: str, device: str, seed: int) -> dict[str, Any]:
    """Child side of #187277: capture the MLP, replay, device-wide synchronize, compare."""
    runtime = load_object(spec, "--impl graphs")
    dev = torch.device(device)
    g, e = (WORKLOADS["mlp"].build(dev, torch.float32, seed) for _ in range(2))
    graph, captured = cases.capture(runtime, g, e)
    values = g.step_inputs(1)
    g.load_inputs(values)
    e.load_inputs(values)
    graph.replay()
    torch.get_device_module(dev).synchronize()
    if hasattr(torch, "accelerator") and dev.type != "cpu":
        torch.accelerator.synchronize()
    return {"wrong": int(not torch.equal(captured[0], e.fn(*e.inputs)[0]))}


def test_synchronize_after_replay(impl, device, record, isolated, seed):
    """pytorch#187277: a device-wide synchronize right after a replay returns (no crash)
    and the replay's result is eager's."""
    cases.ready(impl, device)
    outcome = isolated(synchronize_after_replay, impl.spec, str(device), seed, timeout=120.0)
    if outcome.kind != "returned":
        record.require(exact("replay then synchronize returns (no crash, no hang)", 1, 1,
                             isolated.explain().replace("\n", " | ")))
    record.require(exact("replay == eager after synchronize", outcome.value["wrong"], 1))


def captured_all_reduce(spec: str, device_type: str, iters: int) -> dict[str, Any]:
    """Rank side of #189403: replays of a captured all_reduce interleaved with eager
    all_reduces; counts wrong or non-finite results of either."""
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device(device_type, rank) if device_type != "cpu" else torch.device("cpu")
    runtime = load_object(spec, "--impl graphs")
    total = world * (world + 1) / 2

    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = x.clone()
        dist.all_reduce(y)
        return (y,)

    x = torch.full((2048,), float(rank + 1), device=dev)
    g = Workload("all_reduce", fn, [x])
    graph = runtime.capture(g.fn, *g.inputs)
    out = graph.outputs[0]
    wrong_replay = wrong_eager = 0
    for _ in range(iters):
        graph.replay()
        z = torch.full((2048,), float(rank + 1), device=dev)
        dist.all_reduce(z)
        wrong_replay += int(not bool((out == total).all()))
        wrong_eager += int(not bool((z == total).all()))
    return {"wrong_replay": wrong_replay, "wrong_eager": wrong_eager}


def test_captured_all_reduce_then_eager(impl, device, record):
    """pytorch#189403: 1100 replays of a captured all_reduce (100 on the CPU), each followed
    by an eager all_reduce (the report saw NaN at iteration 1016): every result is the
    exact sum."""
    from conformance.processes.backends import BACKENDS
    from conformance.processes.backends import missing as backend_missing
    from conformance.processes.ranks import run_ranks

    cases.ready(impl, device)
    backends = BACKENDS.get(device.type if device.type != "cuda" or not torch.version.hip
                            else "rocm", ())
    if not backends:
        unsupported(f"no collective backend for {device.type}")
    why = backend_missing(backends[0], 2, device.type)
    if why:
        missing(why)
    iters = 1100 if device.type != "cpu" else 100  # on the CPU: the case works, quickly
    run = run_ranks(captured_all_reduce, impl.spec, device.type, iters, backend=backends[0],
                    device=device.type, world=2, timeout=120.0)
    if not run.ok:
        record.require(exact("every rank returns", 1, 1, run.describe().replace("\n", " | ")))
    for rank, v in enumerate(run.values):
        record.require(exact(f"rank {rank}: replayed all_reduce == sum", v["wrong_replay"], iters))
        record.require(exact(f"rank {rank}: eager all_reduce after replays == sum",
                             v["wrong_eager"], iters))

