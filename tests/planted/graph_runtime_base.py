"""The CPU reference graph runtime's machinery (the tape, ``Graph``, ``graphed``'s module,
``Reference``): what ``graph_runtime.py`` describes, and what its planted faults and the
blind runtimes (``blind_graph_runtimes.py``) derive from."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_unflatten

FEATURES = ("static_outputs", "pools", "rng", "training", "graphed_callables",
            "illegal_capture", "memory", "generators", "reset", "capture_error_mode")
MODES = ("global", "thread_local", "relaxed")
_SYNCING = (torch.Tensor.tolist, torch.Tensor.numpy, torch.Tensor.__array__)


def _host_sync(func: Any, dynamic: bool = True) -> str | None:
    if func is torch.ops.aten._local_scalar_dense.default:
        return ".item()"
    if dynamic and torch.Tag.dynamic_output_shape in func.tags:
        return f"{func.name()} (an output shape that depends on the data)"
    return None


class _NoValueReads(TorchFunctionMode):
    """Refuses reading a tensor's values into Python inside a capture."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in _SYNCING:
            raise RuntimeError(f"host synchronisation ({func.__name__}) is not allowed inside "
                               "a graph capture")
        return func(*args, **(kwargs or {}))


class Tape(TorchDispatchMode):
    """Records the aten calls of a capture (see the module docstring)."""

    def __init__(self, check: bool = True, dynamic: bool = True) -> None:
        super().__init__()
        self.check, self.dynamic = check, dynamic
        self.entries: list[tuple[Any, list[tuple[str, Any]], Any, list[tuple[int, int]],
                                 bool]] = []
        self.made: list[torch.Tensor] = []  # tensors made during the capture, by position
        self._where: dict[int, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        why = _host_sync(func, self.dynamic) if self.check else None
        if why:
            raise RuntimeError(f"host synchronisation ({why}) is not allowed inside a graph "
                               "capture")
        out = func(*args, **kwargs)
        if func.namespace == "profiler":
            return out
        flat, spec = tree_flatten((args, kwargs))
        slots = [("made", self._where[id(a)]) if isinstance(a, torch.Tensor)
                 and id(a) in self._where else ("ref", a) if isinstance(a, torch.Tensor)
                 else ("value", a) for a in flat]
        results = []
        for i, t in enumerate(tree_flatten(out)[0]):
            if isinstance(t, torch.Tensor):
                if id(t) not in self._where:
                    self._where[id(t)] = len(self.made)
                    self.made.append(t)
                results.append((i, self._where[id(t)]))
        self.entries.append((func, slots, spec, results, bool(func.is_view)))
        return out

    def replay(self, ref: Any = lambda t: t, skip: Any = lambda func: False) -> None:
        """Runs the calls on the tensors (``ref`` maps a tensor from before the capture;
        ``skip`` drops calls: the hooks of the planted faults)."""
        with torch.no_grad():
            for func, slots, spec, results, view in self.entries:
                if view or skip(func):
                    continue
                values = [self.made[x] if kind == "made" else ref(x) if kind == "ref" else x
                          for kind, x in slots]
                args, kwargs = tree_unflatten(values, spec)
                flat = tree_flatten(func(*args, **kwargs))[0]
                for x in flat:  # a collective's Work: the CPU's stand-in for stream order
                    if not isinstance(x, torch.Tensor) and hasattr(x, "wait"):
                        x.wait()
                for i, pos in results:
                    dst, new = self.made[pos], flat[i]
                    if new is not dst:
                        dst.copy_(new)

    def draws(self) -> bool:
        return any(torch.Tag.nondeterministic_seeded in f.tags for f, *_ in self.entries)


class Graph:
    def __init__(self, runtime: Reference, tape: Tape, inputs: tuple[torch.Tensor, ...],
                 outputs: tuple[torch.Tensor, ...], pool: Any,
                 generators: tuple[torch.Generator, ...] = ()) -> None:
        self.runtime, self.tape, self.inputs = runtime, tape, inputs
        self.outputs = self.captured = outputs
        self.generators = generators
        self.replays = 0
        self.held: list[torch.Tensor] = []  # what the runtime keeps besides the tape
        runtime.graphs.append(self)
        self._pool = pool if pool is not None else []
        self._pool.append(self)

    def pool(self) -> Any:
        return self._pool

    def ref(self, t: torch.Tensor) -> torch.Tensor:
        return t

    def skip(self, func: Any) -> bool:
        return False

    def run(self) -> None:
        self.tape.replay(self.ref, self.skip)

    def replay(self) -> None:
        self.replays += 1
        self.run()

    def reset(self) -> None:
        self.tape, self.replays = Tape(), 0
        self.outputs = self.captured = ()
        self.held.clear()
        if self in self.runtime.graphs:
            self.runtime.graphs.remove(self)

    def recapture(self, tape: Tape, inputs: tuple[torch.Tensor, ...],
                  outputs: tuple[torch.Tensor, ...], generators: tuple[torch.Generator, ...]
                  ) -> None:
        self.tape, self.inputs, self.outputs, self.captured = tape, inputs, outputs, outputs
        self.generators = generators
        if self not in self.runtime.graphs:
            self.runtime.graphs.append(self)

    def tensors(self) -> list[torch.Tensor]:
        return [*self.tape.made, *self.outputs, *self.held]


class _IntoStatic(torch.autograd.Function):
    """Copies an input into its static buffer; the gradient of the buffer goes to the input
    (make_graphed_callables hands the static inputs' gradients back to the real inputs). The
    buffer itself keeps no autograd history from step to step."""

    @staticmethod
    def forward(ctx: Any, static: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        static.copy_(a)
        return static.view_as(static)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> Any:
        return None, grad


class _Graphed(torch.nn.Module):
    """make_graphed_callables' shape: inputs copied into static buffers, then the module;
    gradients reach the inputs that require them (eager -> graphed chains)."""

    def __init__(self, module: torch.nn.Module, sample: tuple[torch.Tensor, ...]) -> None:
        super().__init__()
        self.module = module
        self.static = [s.detach().clone() for s in sample]

    def forward(self, *args: torch.Tensor) -> Any:
        xs = []
        for s, a in zip(self.static, args, strict=True):
            if a.requires_grad and torch.is_grad_enabled():
                xs.append(_IntoStatic.apply(s, a))
            else:
                with torch.no_grad():
                    s.copy_(a)
                xs.append(s)
        return self.module(*xs)


class Reference:
    conformance_name = "reference"
    conformance_devices = ("cpu",)
    conformance_features = FEATURES
    same_kernels = True
    graph_class = Graph
    host_sync_check = True
    value_reads_check = True
    dynamic_shape_check = True
    graphed_class: type = _Graphed

    def __init__(self) -> None:
        self.graphs: list[Graph] = []

    def memory_allocated(self, device: torch.device) -> int:
        """Bytes of the tensors the runtime's live graphs hold (what their tapes made, their
        outputs, anything they keep): the CPU stand-in for a device allocator's count."""
        tensors = {id(t): t for g in self.graphs for t in g.tensors()}
        return sum(t.untyped_storage().nbytes() for t in tensors.values())

    def __call__(self, fn: Any, *inputs: torch.Tensor, pool: Any = None, **options: Any) -> Any:
        return self.capture(fn, *inputs, pool=pool, **options)

    def check_mode(self, mode: str | None) -> None:
        if mode is not None and mode not in MODES:
            raise RuntimeError(f"Unknown capture error mode. Expected `global`, `thread_local`, "
                               f"or `relaxed`, got {mode}")

    def record(self, fn: Any, inputs: tuple[torch.Tensor, ...]
               ) -> tuple[Tape, tuple[torch.Tensor, ...]]:
        tape = Tape(self.host_sync_check, self.dynamic_shape_check)
        reads = _NoValueReads() if self.value_reads_check else contextlib.nullcontext()
        with reads, tape:
            out = fn(*inputs)
        return tape, tuple(out) if isinstance(out, (tuple, list)) else (out,)

    def capture(self, fn: Any, *inputs: torch.Tensor, pool: Any = None,
                generators: tuple[torch.Generator, ...] = (),
                capture_error_mode: str | None = None, graph: Graph | None = None) -> Any:
        self.check_mode(capture_error_mode)
        tape, out = self.record(fn, inputs)
        if graph is not None:  # recapture into a graph that was reset
            graph.recapture(tape, inputs, out, tuple(generators))
            return graph
        return self.graph_class(self, tape, inputs, out, pool, tuple(generators))

    def graphed(self, module: torch.nn.Module, sample_args: tuple[torch.Tensor, ...]) -> Any:
        return self.graphed_class(module, sample_args)
