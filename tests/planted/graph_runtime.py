"""A CPU reference graph runtime (the contract of impls/graphs.py, replaying the captured
callable against the static buffers) and the issue's planted faults, each a runtime the
graphs area must flag through ``--impl graphs=planted.graph_runtime:NAME``."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any
from unittest import mock

import torch
from torch.utils._python_dispatch import TorchDispatchMode

FEATURES = ("static_outputs", "pools", "rng", "training", "graphed_callables",
            "illegal_capture", "memory")


def _in_optimizer() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if f"torch{os.sep}optim{os.sep}" in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


class _NoHostSync(TorchDispatchMode):
    """Raises on what would synchronise with the host inside a real capture. One exception:
    a CPU optimizer reads its step count with ``.item()`` (torch refuses ``capturable=True``
    on the CPU; on GPUs that flag moves the count to the device), so reads from torch.optim
    pass."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten._local_scalar_dense.default and not _in_optimizer():
            raise RuntimeError("host synchronisation (.item()) is not allowed inside a graph "
                               "capture")
        return func(*args, **(kwargs or {}))


class Graph:
    def __init__(self, runtime: Reference, fn: Any, inputs: tuple[torch.Tensor, ...],
                 outputs: tuple[torch.Tensor, ...], pool: Any) -> None:
        self.runtime, self.fn, self.inputs, self.outputs = runtime, fn, inputs, outputs
        self.held: list[torch.Tensor] = []  # what the runtime keeps besides the outputs
        runtime.graphs.append(self)
        self._pool = pool if pool is not None else []
        self._pool.append(self)

    def pool(self) -> Any:
        return self._pool

    def run(self) -> tuple[torch.Tensor, ...]:
        out = self.fn(*self.inputs)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    def replay(self) -> None:
        out = self.run()
        with torch.no_grad():
            for dst, src in zip(self.outputs, out, strict=True):
                if dst is not src:
                    dst.copy_(src)


class _Graphed(torch.nn.Module):
    """make_graphed_callables' shape: inputs copied into static buffers, then the module."""

    def __init__(self, module: torch.nn.Module, sample: tuple[torch.Tensor, ...]) -> None:
        super().__init__()
        self.module = module
        self.static = [s.detach().clone() for s in sample]

    def forward(self, *args: torch.Tensor) -> Any:
        for s, a in zip(self.static, args, strict=True):
            s.copy_(a)
        return self.module(*self.static)


class Reference:
    conformance_name = "reference"
    conformance_devices = ("cpu",)
    conformance_features = FEATURES
    same_kernels = True
    graph_class = Graph
    host_sync_check = True
    graphed_class: type = _Graphed

    def __init__(self) -> None:
        self.graphs: list[Graph] = []

    def memory_allocated(self, device: torch.device) -> int:
        """Bytes of the tensors the runtime's graphs hold (their outputs and anything they
        keep): the CPU stand-in for a device allocator's count."""
        tensors = {id(t): t for g in self.graphs for t in (*g.outputs, *g.held)}
        return sum(t.untyped_storage().nbytes() for t in tensors.values())

    def __call__(self, fn: Any, *inputs: torch.Tensor, pool: Any = None) -> Any:
        return self.capture(fn, *inputs, pool=pool)

    def capture(self, fn: Any, *inputs: torch.Tensor, pool: Any = None) -> Any:
        with _NoHostSync() if self.host_sync_check else contextlib.nullcontext():
            out = fn(*inputs)
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        return self.graph_class(self, fn, inputs, out, pool)

    def graphed(self, module: torch.nn.Module, sample_args: tuple[torch.Tensor, ...]) -> Any:
        return self.graphed_class(module, sample_args)


class _Stale(Graph):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.inputs = tuple(t.clone() for t in self.inputs)  # the values at capture


class _FrozenRng(Graph):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.rng = torch.get_rng_state()

    def replay(self) -> None:
        torch.set_rng_state(self.rng)  # every replay draws what the capture drew
        super().replay()


class _FreshOutputs(Graph):
    def replay(self) -> None:
        self.outputs = self.run()


class _Clobber(Graph):
    def __init__(self, runtime: Reference, fn: Any, inputs: tuple[torch.Tensor, ...],
                 outputs: tuple[torch.Tensor, ...], pool: Any) -> None:
        if pool is not None:  # the pool hands out the first graph's live output memory
            live = [o for g in pool for o in g.outputs]
            outputs = tuple(next((o for o in live if o.shape == t.shape and o.dtype == t.dtype),
                                 t) for t in outputs)
        super().__init__(runtime, fn, inputs, outputs, pool)


class _NoOptimizerStep(Graph):
    def replay(self) -> None:
        with mock.patch.object(torch.optim.Adam, "step", lambda self, closure=None: None):
            super().replay()


class _LowPrecision(Graph):
    """A compiler-like replay that runs the step on bfloat16-rounded inputs."""

    def run(self) -> tuple[torch.Tensor, ...]:
        rounded = [t.to(torch.bfloat16).to(t.dtype) for t in self.inputs]
        out = self.fn(*rounded)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)


class _Leaky(Graph):
    """Keeps a copy of every replay's outputs (an allocation per replay)."""

    def replay(self) -> None:
        super().replay()
        self.held.extend(t.clone() for t in self.outputs)


class _StaleGraphed(_Graphed):
    """A graphed module that never copies new inputs into its static buffers."""

    def forward(self, *args: torch.Tensor) -> Any:
        return self.module(*self.static)


def _faulty(name: str, graph: type[Graph] = Graph, same_kernels: bool = True,
            **attrs: Any) -> Reference:
    runtime = Reference()
    runtime.conformance_name = name
    runtime.graph_class = graph
    runtime.same_kernels = same_kernels
    for key, value in attrs.items():
        setattr(runtime, key, value)
    return runtime


reference = Reference()
stale_inputs = _faulty("stale_inputs", _Stale)
frozen_rng = _faulty("frozen_rng", _FrozenRng)
fresh_outputs = _faulty("fresh_outputs", _FreshOutputs)
pool_clobbers = _faulty("pool_clobbers", _Clobber)
skips_optimizer_step = _faulty("skips_optimizer_step", _NoOptimizerStep)
# declares other kernels (as torch.compile does), so it is held to the oracle rule
low_precision = _faulty("low_precision", _LowPrecision, same_kernels=False)
leaks_per_replay = _faulty("leaks_per_replay", _Leaky)
no_host_sync_check = _faulty("no_host_sync_check", host_sync_check=False)
stale_graphed = _faulty("stale_graphed", graphed_class=_StaleGraphed)

# each fault on the tests that tests/test_graph_faults.py says must flag it (float32); the
# reference runtime, the twin, on every case it declares there, the regressions included
_FLAGGED_BY = {
    "stale_inputs": ("test_replay_equals_eager[stale_inputs-float32-mlp]",
                     "test_replay_equals_eager[stale_inputs-float32-train_step]"),
    "frozen_rng": ("test_random[frozen_rng-float32]",),
    "fresh_outputs": ("test_replay_equals_eager[fresh_outputs-float32-mlp]",),
    "pool_clobbers": ("test_shared_pool[pool_clobbers-float32]",),
    "skips_optimizer_step": ("test_replay_equals_eager[skips_optimizer_step-float32-"
                             "train_step]",),
    "low_precision": ("test_replay_equals_eager[low_precision-float32-mlp]",
                      "test_replay_equals_eager[low_precision-float32-attention]"),
    "leaks_per_replay": ("test_memory_flat[leaks_per_replay-float32]",),
    "no_host_sync_check": ("test_illegal_capture[no_host_sync_check-float32]",),
    "stale_graphed": ("test_graphed_training[stale_graphed-float32]",),
}
SELFTEST = [  # torch-conformance selftest (conformance/cli/selftest.py)
    *({"area": "graphs", "impl": name, "path": "graphs", "expect": "killed",
       "select": " or ".join(tests)} for name, tests in _FLAGGED_BY.items()),
    {"area": "graphs", "impl": "reference", "path": "graphs", "expect": "passes",
     "select": "reference and not bfloat16"},
]
