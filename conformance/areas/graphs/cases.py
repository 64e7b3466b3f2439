"""The graphs area's procedures: capture with the state reset, the training loop of the
graphed-callables check, and the illegal capture (run in the isolation runner's child)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from conformance.areas.graphs.catalogue import WORKLOADS, Workload
from conformance.harness.compare import exact
from conformance.harness.registry import load_object
from conformance.harness.tensors import dtype_name, from_numpy


def ready(impl: Any, device: torch.device, dtype: torch.dtype | None = None,
          dtypes: tuple[str, ...] = ()) -> None:
    """Unsupported if the workload does not run ``dtype``; skipped (with the runtime's
    reason) if this build cannot run the runtime."""
    from conformance.harness.outcomes import missing, unsupported

    if dtype is not None and dtype_name(dtype) not in dtypes:
        unsupported(f"the workload runs {', '.join(dtypes)}, not {dtype_name(dtype)}")
    why = getattr(impl.fn, "unavailable", lambda d: None)(device)
    if why:
        missing(f"implementation {impl.name}: {why}")


SKIPS = ("inductor", "cudagraph_skips")


def _skips() -> int:
    from torch._dynamo.utils import counters

    return int(counters[SKIPS[0]][SKIPS[1]])


class _SkipLog(logging.Handler):
    """Collects Inductor's "skipping cudagraphs due to ..." messages (the reason of a skip
    where Inductor logs one; on the CPU it only counts)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.reasons: list[str] = []

    def emit(self, rec: logging.LogRecord) -> None:
        text = rec.getMessage()
        if "skipping cudagraphs" in text:
            self.reasons.append(text.splitlines()[0][:200])


SKIP_LOG = _SkipLog()
for _name in ("torch._inductor", "torch._inductor.cudagraph_utils.__cudagraphs"):
    logging.getLogger(_name).addHandler(SKIP_LOG)


def counted(fn: Any) -> tuple[Any, list[int]]:
    """``fn`` with a call counter. A call made while Dynamo traces it is not counted (Dynamo
    then folds ``is_compiling()`` to True, so the compiled code carries no count): what
    counts is the Python function running, which a replayed graph never does."""
    calls = [0]

    def step(*args: Any) -> Any:
        if not torch.compiler.is_compiling():
            calls[0] += 1
        return fn(*args)

    return step, calls


class Watched:
    """The harness's side of a captured graph: every ``replay()`` is checked for the proof
    of replay (impls/graphs.py): the captured function not called, no cudagraph skip since
    before the capture, the graph's own ``replays`` counter (if any) equal to the replays
    asked for; the report notes what was captured."""

    def __init__(self, graph: Any, calls: list[int], skips: int, record: Any,
                 reasons: int) -> None:
        self.graph, self.calls, self.skips, self.record = graph, calls, skips, record
        self.reasons, self.replays = reasons, 0

    @property
    def outputs(self) -> Any:
        return self.graph.outputs

    def pool(self) -> Any:
        return self.graph.pool()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.graph, name)

    def replay(self) -> None:
        before = self.calls[0]
        self.graph.replay()
        self.replays += 1
        k, reran, grew = self.replays, self.calls[0] - before, _skips() - self.skips
        inner = getattr(self.graph, "graph", None)
        kind = type(self.graph).__qualname__ + (f" of {type(inner).__qualname__}"
                                                if inner is not None else "")
        counter = getattr(self.graph, "replays", None)
        if self.record is None:
            return
        self.record.note(graph=kind, replays=k, graph_replays=counter)
        self.record.require(exact(
            "replay runs a captured graph (the Python function not called)", min(reran, 1), 1,
            f"replay {k} re-ran the Python function: no captured graph"))
        why = "; ".join(SKIP_LOG.reasons[self.reasons:]) or "no reason logged"
        self.record.require(exact(
            "no cudagraph skips (counters['inductor']['cudagraph_skips'])", min(grew, 1), 1,
            f"{grew} skip(s) since before the capture: {why}"))
        if isinstance(counter, int) and not isinstance(counter, bool):
            self.record.require(exact(
                "the graph's replay counter equals the replays asked for", int(counter != k), 1,
                f"the graph counts {counter} after {k} replays"))


def capture(runtime: Any, g: Workload, e: Workload, pool: Any = None, record: Any = None,
            **options: Any) -> tuple[Watched, tuple[torch.Tensor, ...]]:
    """Capture ``g`` on step 0's inputs (``fn`` wrapped in a call counter), then put its
    state back to the initial state (the runtime's warm-up ran real steps), which ``e``
    still has. Returns the watched graph (each replay checked against ``record``: the proof
    of replay) and the output tensors of its capture (what ``replay`` must write)."""
    initial = e.snapshot()
    g.load_inputs(g.step_inputs(0))
    skips, reasons = _skips(), len(SKIP_LOG.reasons)
    step, calls = counted(g.fn)
    graph = runtime.capture(step, *g.inputs, pool=pool, **options)
    sync(runtime, g.inputs[0].device)
    g.restore(initial)
    return Watched(graph, calls, skips, record, reasons), tuple(graph.outputs)


def capture_checked(record: Any, runtime: Any, g: Workload, e: Workload, what: str = "",
                    pool: Any = None, **options: Any
                    ) -> tuple[Watched, tuple[torch.Tensor, ...]]:
    """``capture`` (replays checked against ``record``), with an exception reported as the
    failed check "capture" (+ what)."""
    try:
        return capture(runtime, g, e, pool, record, **options)
    except Exception as exc:  # the failure under test
        record.require(exact(f"capture{' ' + what if what else ''}", 1, 1,
                             f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"))
        raise


def sync(runtime: Any, device: torch.device) -> None:
    hook = getattr(runtime, "synchronize", None)
    if hook is not None and device.type != "cpu":
        hook(device)


def sine(device: torch.device, dtype: torch.dtype, seed: int) -> Workload:
    """The second graph of the pool check: 2 sin(u) with the first graph's output shape."""
    u = torch.zeros(8, 16, dtype=dtype, device=device)
    return Workload("sine", lambda u: (torch.sin(u) * 2,), [u], seed=seed + 1)


def trainer(device: torch.device, dtype: torch.dtype, seed: int
            ) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    model = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 8))
    rng = np.random.default_rng([seed, 5])
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(from_numpy(rng.uniform(-1, 1, tuple(p.shape)) / np.sqrt(p.shape[-1]),
                               dtype, "cpu"))
    model = model.to(device=device, dtype=dtype)
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


def batch(device: torch.device, dtype: torch.dtype, seed: int, k: int
          ) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng([seed, 6, k])
    return (from_numpy(rng.uniform(-1, 1, (16, 32)), dtype, device),
            from_numpy(rng.uniform(-1, 1, (16, 8)), dtype, device))


def train(model: Any, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor
          ) -> torch.Tensor:
    opt.zero_grad(set_to_none=True)
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.detach()


# host syncs inside a capture (torch's CUDA graph notes: no sync with the CPU while
# capturing): a scalar read, a data-dependent shape, a copy to the host, a read into Python
SYNCS = {
    "item": lambda x: (x * float(x.sum().item()),),
    "nonzero": lambda x: (torch.nonzero(x > 1).float().sum() + x,),
    "cpu": lambda x: (x * x.sum().cpu().to(x.device),),
    "tolist": lambda x: (x * float(x[0, 0].tolist()),),
}


def illegal_capture(spec: str, device: str, dtype: str, seed: int, op: str = "item"
                    ) -> dict[str, Any]:
    """Child side: capture a step that syncs with the host (``SYNCS[op]``, ``.item()`` by
    default); then eager work and a new capture of the MLP, each compared with eager."""
    runtime = load_object(spec, "--impl graphs")
    dev, dt = torch.device(device), getattr(torch, dtype.removeprefix("torch."))
    x = torch.ones(8, 32, dtype=dt, device=dev)
    out: dict[str, Any] = {"raised": False, "error": "", "names_capture": False,
                           "eager_wrong": 1, "replay_wrong": 1}
    try:
        runtime.capture(SYNCS[op], x)
    except Exception as exc:  # the error under test: any type, judged by its message
        text = f"{type(exc).__name__}: {exc}".strip()
        out.update(raised=True, error=text.splitlines()[0][:300],
                   names_capture="captur" in text.lower())
    try:
        y = (x + 1).sum()
        sync(runtime, dev)
        out["eager_wrong"] = int(float(y) != 2.0 * x.numel())
    except Exception as exc:
        out["eager_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    try:
        g, e = (WORKLOADS["mlp"].build(dev, dt, seed) for _ in range(2))
        graph, captured = capture(runtime, g, e)
        values = g.step_inputs(1)
        g.load_inputs(values)
        e.load_inputs(values)
        graph.replay()
        want = e.fn(*e.inputs)
        sync(runtime, dev)
        out["replay_wrong"] = int(not torch.equal(captured[0], want[0]))
    except Exception as exc:
        out["replay_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    return out
