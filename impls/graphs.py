"""Graph runtimes, the implementations of the area ``graphs``: capture a step once, replay it.

Contract (``--impl graphs=module:attr``): an object (a module-level instance) with

- ``capture(fn, *static_inputs, pool=None) -> graph``: record what ``fn(*static_inputs)``
  does (the runtime may call ``fn`` before, to warm up; the harness resets any state that
  this changed). ``fn`` returns a tuple of tensors. ``pool`` is another graph's ``pool()``:
  the new graph may share that graph's memory, and is replayed after it.
- ``graph.replay()`` re-runs the captured work, reading the static input tensors as they
  are at replay time (the harness copies new values into them) and writing the same output
  tensors every time; ``graph.outputs`` is the tuple ``fn`` returned at capture;
  ``graph.pool()`` is a handle for ``capture(..., pool=)``. Random ops draw from the
  device's default generator as eager does: each replay advances it, and a new
  ``manual_seed`` applies to the next replay.
- optional ``graphed(module, sample_args) -> module`` (feature ``graphed_callables``):
  a drop-in replacement whose forward and backward run as graphs
  (``make_graphed_callables``).
- optional ``memory_allocated(device) -> int`` (feature ``memory``), ``synchronize(device)``
  and ``unavailable(device) -> str | None`` (why this build cannot run the runtime: the
  case is skipped with that reason).
- ``same_kernels`` (default True): replays run the kernels eager runs, so replay must
  equal eager bit for bit; False (torch.compile) compares replays with the oracle rule.

Declared features: ``static_outputs`` (outputs are the captured tensors), ``memory``,
``pools``, ``rng``, ``streams`` (work forked to a side stream inside the capture),
``training`` (forward, backward and a ``capturable`` optimizer step in one graph),
``graphed_callables``, ``illegal_capture`` (a host sync inside capture raises).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

ALL = ("static_outputs", "memory", "pools", "rng", "streams", "training",
       "graphed_callables", "illegal_capture")
WARMUP = 3  # eager calls on a side stream before capture (torch's docs do 3)


def outputs_tuple(out: Any) -> tuple[torch.Tensor, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


class Runtime:
    """Base of the shipped runtimes: declarations and the optional hooks."""

    conformance_name = "runtime"
    conformance_devices: tuple[str, ...] = ()
    conformance_features: tuple[str, ...] = ALL
    same_kernels = True

    def __call__(self, fn: Callable[..., Any], *inputs: torch.Tensor, pool: Any = None) -> Any:
        return self.capture(fn, *inputs, pool=pool)

    def capture(self, fn: Callable[..., Any], *inputs: torch.Tensor, pool: Any = None) -> Any:
        raise NotImplementedError

    def unavailable(self, device: torch.device) -> str | None:
        return None

    def memory_allocated(self, device: torch.device) -> int:
        return int(torch.get_device_module(device).memory_allocated(device))

    def synchronize(self, device: torch.device) -> None:
        torch.get_device_module(device).synchronize(device)


class TorchGraph:
    """A captured graph of one of torch's graph classes, with the outputs of its capture."""

    def __init__(self, graph: Any, outputs: tuple[torch.Tensor, ...]) -> None:
        self.graph, self.outputs = graph, outputs

    def replay(self) -> None:
        self.graph.replay()

    def pool(self) -> Any:
        return self.graph.pool()


def _warmup(fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], device: torch.device
            ) -> None:
    module = torch.get_device_module(device)
    side = module.Stream()
    side.wait_stream(module.current_stream())
    with module.stream(side):
        for _ in range(WARMUP):
            fn(*inputs)
    module.current_stream().wait_stream(side)


def _device_of(inputs: tuple[torch.Tensor, ...]) -> torch.device:
    return inputs[0].device if inputs else torch.device(torch.accelerator.current_accelerator())


class DeviceGraphs(Runtime):
    """A device module's own graph class and capture context (torch.cuda.CUDAGraph with
    torch.cuda.graph, torch.xpu.XPUGraph with torch.xpu.graph) and its
    make_graphed_callables."""

    module_name = "cuda"
    graph_class = "CUDAGraph"

    def _module(self) -> Any:
        return getattr(torch, self.module_name)

    def unavailable(self, device: torch.device) -> str | None:
        if not hasattr(getattr(torch, self.module_name, None), self.graph_class):
            return f"torch {torch.__version__} has no torch.{self.module_name}.{self.graph_class}"
        return None

    def capture(self, fn: Callable[..., Any], *inputs: torch.Tensor, pool: Any = None) -> Any:
        module = self._module()
        _warmup(fn, inputs, _device_of(inputs))
        graph = getattr(module, self.graph_class)()
        with module.graph(graph, pool=pool):
            out = outputs_tuple(fn(*inputs))
        return TorchGraph(graph, out)

    def graphed(self, module: torch.nn.Module, sample_args: tuple[torch.Tensor, ...]) -> Any:
        return self._module().make_graphed_callables(module, sample_args)


class CudaGraphs(DeviceGraphs):
    """torch.cuda.CUDAGraph captured with torch.cuda.graph (HIP graphs on ROCm)."""

    conformance_name = "cuda_graph"
    conformance_devices = ("cuda", "rocm")


class XpuGraphs(DeviceGraphs):
    """torch.xpu.XPUGraph captured with torch.xpu.graph."""

    conformance_name = "xpu_graph"
    conformance_devices = ("xpu",)
    module_name = "xpu"
    graph_class = "XPUGraph"


class AcceleratorGraphs(Runtime):
    """The device-generic torch.accelerator.Graph, captured on a side torch.Stream."""

    conformance_name = "accelerator_graph"
    conformance_devices = ("cuda", "rocm", "xpu")
    conformance_features = tuple(f for f in ALL if f != "graphed_callables")

    def unavailable(self, device: torch.device) -> str | None:
        if not hasattr(torch.accelerator, "Graph"):
            return f"torch {torch.__version__} has no torch.accelerator.Graph"
        return None

    def capture(self, fn: Callable[..., Any], *inputs: torch.Tensor, pool: Any = None) -> Any:
        device = _device_of(inputs)
        _warmup(fn, inputs, device)
        graph = torch.accelerator.Graph(pool=pool)
        stream = torch.Stream(device)
        stream.wait_stream(torch.accelerator.current_stream(device))
        with stream, graph:
            out = outputs_tuple(fn(*inputs))
        torch.accelerator.current_stream(device).wait_stream(stream)
        return TorchGraph(graph, out)


class CompiledGraph:
    """A torch.compile(mode="reduce-overhead") function: each replay calls it on the static
    inputs; CUDA-graph trees hand back new output tensors over the same memory."""

    def __init__(self, compiled: Callable[..., Any], inputs: tuple[torch.Tensor, ...]) -> None:
        self.compiled, self.inputs = compiled, inputs
        self.outputs = outputs_tuple(compiled(*inputs))

    def replay(self) -> None:
        self.outputs = outputs_tuple(self.compiled(*self.inputs))

    def pool(self) -> Any:
        return None


class ReduceOverhead(Runtime):
    """torch.compile(fn, mode="reduce-overhead"): Inductor's kernels under CUDA-graph trees.
    Not the eager kernels (``same_kernels`` False), no user-visible pool, its own random
    stream (Inductor's RNG is not eager's), outputs that are new tensors each replay."""

    conformance_name = "compile.reduce_overhead"
    conformance_devices = ("cuda", "rocm")
    conformance_features = ("training",)
    same_kernels = False

    def capture(self, fn: Callable[..., Any], *inputs: torch.Tensor, pool: Any = None) -> Any:
        compiled = torch.compile(fn, mode="reduce-overhead")
        for _ in range(WARMUP):  # warm-up and recording runs of the CUDA-graph tree
            compiled(*inputs)
        return CompiledGraph(compiled, inputs)


cuda_graph = CudaGraphs()
xpu_graph = XpuGraphs()
accelerator_graph = AcceleratorGraphs()
reduce_overhead = ReduceOverhead()
