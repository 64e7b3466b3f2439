"""Graph runtimes, the implementations of the area ``graphs``: capture a step once, replay it.

Contract (``--impl graphs=module:attr``): an object (a module-level instance) with

- ``capture(fn, *static_inputs, pool=None, **options) -> graph``: record what
  ``fn(*static_inputs)`` does (the runtime may call ``fn`` before and during the capture,
  to warm up; the harness resets any state that this changed). ``fn`` returns a tuple of
  tensors. ``pool`` is another graph's ``pool()``: the new graph may share that graph's
  memory, and is replayed after it. ``options`` are passed only for the features declared:
  ``generators=(g, ...)`` (feature ``generators``: non-default ``torch.Generator`` objects
  the step draws from, registered with the graph as ``CUDAGraph.register_generator_state``
  does), ``capture_error_mode=`` ``"global"``, ``"thread_local"`` or ``"relaxed"`` (feature
  ``capture_error_mode``, torch.cuda.graph's meaning; any other value raises) and
  ``graph=`` a graph of this runtime that was ``reset()`` (feature ``reset``: recapture into
  that object, as upstream re-uses a CUDAGraph after ``reset()``).
- ``graph.replay()`` re-runs the captured work, reading the static input tensors as they
  are at replay time (the harness copies new values into them; in-place updates of an
  input by ``fn`` land in the caller's tensor) and writing the same output
  tensors every time; ``graph.outputs`` is the tuple ``fn`` returned at capture;
  ``graph.pool()`` is a handle for ``capture(..., pool=)``. Random ops draw from the
  device's default generator as eager does: each replay advances it, and a new
  ``manual_seed`` applies to the next replay; eager draws between replays move it as they
  would between eager calls (the philox offset of CUDA graphs); a registered generator
  advances the same way.
- Proof of replay (checked on every replay the harness asks for): ``graph.replay()`` never
  calls ``fn`` (the harness wraps it in a call counter; a call during a replay is "replay k
  re-ran the Python function: no captured graph"), and a capture made with torch.compile
  must not skip its CUDA graphs (``torch._dynamo.utils.counters["inductor"]
  ["cudagraph_skips"]`` may not grow from before the capture to after the replays). A
  graph with an integer ``replays`` attribute counts its replays since its capture: it must
  equal the replays the harness asked for. The report notes the graph's type and the
  replays counted.
  CUDAGraph / XPUGraph / torch.accelerator.Graph replays launch the recorded kernels and
  never call Python; a reduce-overhead function runs Dynamo's compiled code on a cache hit
  (the counter, seen as "compiling" while Dynamo traces it, is not part of that code), so it
  satisfies this after its warm-up, and fails it where CUDA graphs are skipped (the CPU, a
  CPU tensor in the step, a mutated input).
- optional ``graph.reset()`` (feature ``reset``): frees the captured work and its memory.
- optional ``graphed(module, sample_args) -> module`` (feature ``graphed_callables``):
  a drop-in replacement whose forward and backward run as graphs
  (``make_graphed_callables``); gradients reach its inputs that require grad (a sample
  that requires grad stands for such an input), so eager -> graphed chains train.
- optional ``memory_allocated(device) -> int`` (feature ``memory``), ``synchronize(device)``
  and ``unavailable(device) -> str | None`` (why this build cannot run the runtime: the
  case is skipped with that reason).
- ``same_kernels`` (default True): replays run the kernels eager runs, so replay must
  equal eager bit for bit; False (torch.compile) compares replays with the oracle rule.

Declared features: ``static_outputs`` (outputs are the captured tensors), ``memory``,
``pools``, ``rng``, ``streams`` (work forked to a side stream inside the capture),
``training`` (forward, backward and a ``capturable`` optimizer step in one graph),
``graphed_callables``, ``illegal_capture`` (a host sync inside capture raises: ``.item()``,
``nonzero``, ``.tolist()``, ``.cpu()``), ``generators``, ``reset``, ``capture_error_mode``
(conformance/areas/graphs/test_pitfalls.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

ALL = ("static_outputs", "memory", "pools", "rng", "streams", "training",
       "graphed_callables", "illegal_capture", "generators", "reset", "capture_error_mode")
MODES = ("global", "thread_local", "relaxed")
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

    def reset(self) -> None:
        self.graph.reset()
        self.outputs = ()


_SIDE: dict[tuple[str, int | None], Any] = {}


def _side_stream(device: torch.device) -> Any:
    """One warm-up stream per device (torch's docs warm up on a side stream): a new stream
    per capture would give each capture its own BLAS workspace, memory that repeated
    captures would keep."""
    key = (device.type, device.index)
    if key not in _SIDE:
        _SIDE[key] = torch.get_device_module(device).Stream()
    return _SIDE[key]


def _warmup(fn: Callable[..., Any], inputs: tuple[torch.Tensor, ...], device: torch.device
            ) -> None:
    module = torch.get_device_module(device)
    side = _side_stream(device)
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

    def capture(self, fn: Callable[..., Any], *inputs: torch.Tensor, pool: Any = None,
                generators: tuple[torch.Generator, ...] = (), capture_error_mode: str | None = None,
                graph: TorchGraph | None = None) -> Any:
        module = self._module()
        _warmup(fn, inputs, _device_of(inputs))
        g = graph.graph if graph is not None else getattr(module, self.graph_class)()
        for generator in generators:
            g.register_generator_state(generator)
        mode = {} if capture_error_mode is None else {"capture_error_mode": capture_error_mode}
        with module.graph(g, pool=pool, **mode):
            out = outputs_tuple(fn(*inputs))
        if graph is not None:
            graph.outputs = out
            return graph
        return TorchGraph(g, out)

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
    # torch.xpu.graph takes no capture_error_mode, XPUGraph has no register_generator_state
    conformance_features = tuple(f for f in ALL if f not in ("generators", "capture_error_mode"))
    module_name = "xpu"
    graph_class = "XPUGraph"


class AcceleratorGraphs(Runtime):
    """The device-generic torch.accelerator.Graph, captured on a side torch.Stream."""

    conformance_name = "accelerator_graph"
    conformance_devices = ("cuda", "rocm", "xpu")
    # no make_graphed_callables; torch.accelerator.Graph has no register_generator_state
    conformance_features = tuple(f for f in ALL if f not in ("graphed_callables", "generators"))

    def unavailable(self, device: torch.device) -> str | None:
        if not hasattr(torch.accelerator, "Graph"):
            return f"torch {torch.__version__} has no torch.accelerator.Graph"
        return None

    def capture(self, fn: Callable[..., Any], *inputs: torch.Tensor, pool: Any = None,
                capture_error_mode: str | None = None, graph: TorchGraph | None = None) -> Any:
        device = _device_of(inputs)
        _warmup(fn, inputs, device)
        mode = {} if capture_error_mode is None else {"capture_error_mode": capture_error_mode}
        if graph is not None:
            g = graph.graph
            g.graph_pool = pool
            g.capture_error_mode = mode.get("capture_error_mode", "default")
        else:
            g = torch.accelerator.Graph(pool=pool, **mode)
        stream = torch.Stream(device)
        stream.wait_stream(torch.accelerator.current_stream(device))
        with stream, g:
            out = outputs_tuple(fn(*inputs))
        torch.accelerator.current_stream(device).wait_stream(stream)
        if graph is not None:
            graph.outputs = out
            return graph
        return TorchGraph(g, out)


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
