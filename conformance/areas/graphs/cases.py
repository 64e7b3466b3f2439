"""The graphs area's procedures: capture with the state reset, the training loop of the
graphed-callables check, and the illegal capture (run in the isolation runner's child)."""

from __future__ import annotations

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


def capture(runtime: Any, g: Workload, e: Workload, pool: Any = None
            ) -> tuple[Any, tuple[torch.Tensor, ...]]:
    """Capture ``g`` on step 0's inputs, then put its state back to the initial state (the
    runtime's warm-up ran real steps), which ``e`` still has. Returns the graph and the
    output tensors of its capture (what ``replay`` must write)."""
    initial = e.snapshot()
    g.load_inputs(g.step_inputs(0))
    graph = runtime.capture(g.fn, *g.inputs, pool=pool)
    sync(runtime, g.inputs[0].device)
    g.restore(initial)
    return graph, tuple(graph.outputs)


def capture_checked(record: Any, runtime: Any, g: Workload, e: Workload, what: str = "",
                    pool: Any = None) -> tuple[Any, tuple[torch.Tensor, ...]]:
    """``capture``, with an exception reported as the failed check "capture" (+ what)."""
    try:
        return capture(runtime, g, e, pool)
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


def _bad_step(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return (x * float(x.sum().item()),)  # a host sync: illegal inside a capture


def illegal_capture(spec: str, device: str, dtype: str, seed: int) -> dict[str, Any]:
    """Child side: capture a step that calls ``.item()``; then eager work and a new capture
    of the MLP, each compared with eager."""
    runtime = load_object(spec, "--impl graphs")
    dev, dt = torch.device(device), getattr(torch, dtype.removeprefix("torch."))
    x = torch.ones(8, 32, dtype=dt, device=dev)
    out: dict[str, Any] = {"raised": False, "error": "", "names_capture": False,
                           "eager_wrong": 1, "replay_wrong": 1}
    try:
        runtime.capture(_bad_step, x)
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
