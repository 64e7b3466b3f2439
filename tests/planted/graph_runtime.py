"""A CPU reference graph runtime (the contract of impls/graphs.py, a real graph: an aten
tape replayed without the Python function) and the planted faults, each a runtime the
graphs area must flag through ``--impl graphs=planted.graph_runtime:NAME``.

The tape: capture runs ``fn`` once under a TorchDispatchMode that records every aten call
below autograd (forward, backward, the optimizer's kernels). Tensors that existed before
the capture (inputs, parameters, optimizer state, anything closed over) are kept by
reference; tensors made during the capture are kept by position (the tape holds them, as a
CUDA graph holds its addresses: the ``.grad`` that autograd set, a view, an output). Replay
runs the recorded calls on those tensors and writes each result into the tensor the
capture made (in-place and out= calls write it themselves; view calls are not re-run, the
captured view still aliases its base), so ``graph.outputs`` hold the replay's values and
``fn`` is never called. Random calls draw from their generator (the default one, or the
one passed) at replay time, as CUDA graphs read their philox seed and offset at replay: a
replay after ``manual_seed(s)`` equals eager after ``manual_seed(s)``.

Why a dispatch tape, not make_fx: make_fx gives a functional graph that returns new
tensors; the tensors the capture made (a ``.grad`` set by autograd, the outputs) would not
be the ones replay writes, and the optimizer's in-place updates of state would become
copies. The tape keeps every tensor's identity, which is what a device graph's fixed
addresses give.

Host synchronisation inside the capture raises: ``.item()`` (``_local_scalar_dense``),
calls whose output shape depends on the data (``nonzero``, ``masked_select``: the tag
``dynamic_output_shape``), and reading values into Python (``.tolist()``, ``.numpy()``).
No exception is made: the training workload uses ``Adam(fused=True)`` on the CPU, whose
kernel reads the step count from its tensor (``capturable=True`` is refused on the CPU,
and the single-tensor Adam bakes ``step.item()`` into its bias correction). The dispatch
mode is thread-local, so only the capturing thread's work is recorded
(``capture_error_mode`` "thread_local" and "relaxed" semantics; "global" as well: the CPU
has no unsafe calls for other threads to make).

``graphed()`` (make_graphed_callables) is not a graph here: the module runs eagerly behind
static input buffers, which is what test_graphed_training checks of the buffers.
"""

from __future__ import annotations

from typing import Any

import torch

from impls.graphs import ReduceOverhead

from .graph_runtime_base import Graph, Reference, Tape, _Graphed


class _Stale(Graph):
    """Reads the inputs as they were at capture."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.frozen = [t.clone() for t in self.inputs]

    def run(self) -> None:
        _run_on(self, self.frozen, super().run)


def _run_on(graph: Graph, values: list[torch.Tensor], run: Any) -> None:
    """Runs the tape with ``values`` in the static inputs, then puts theirs back."""
    now = [t.clone() for t in graph.inputs]
    with torch.no_grad():
        for t, v in zip(graph.inputs, values, strict=True):
            t.copy_(v)
        run()
        for t, v in zip(graph.inputs, now, strict=True):
            t.copy_(v)


class _FrozenRng(Graph):
    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.rng = torch.get_rng_state()

    def run(self) -> None:
        torch.set_rng_state(self.rng)  # every replay draws what the capture drew
        super().run()


class _FreshOutputs(Graph):
    def run(self) -> None:
        super().run()
        self.outputs = tuple(t.clone() for t in self.captured)


class _Clobber(Graph):
    def __init__(self, runtime: Reference, tape: Tape, inputs: tuple[torch.Tensor, ...],
                 outputs: tuple[torch.Tensor, ...], pool: Any, *rest: Any) -> None:
        captured = outputs
        if pool is not None:  # the pool hands out the first graph's live output memory
            live = [o for g in pool for o in g.outputs]
            outputs = tuple(next((o for o in live if o.shape == t.shape and o.dtype == t.dtype),
                                 t) for t in outputs)
        super().__init__(runtime, tape, inputs, outputs, pool, *rest)
        self.captured = captured

    def run(self) -> None:
        super().run()
        for dst, src in zip(self.outputs, self.captured, strict=True):
            if dst is not src:
                dst.copy_(src)


class _NoOptimizerStep(Graph):
    def skip(self, func: Any) -> bool:
        return func is torch.ops.aten._fused_adam_.default


class _LowPrecision(Graph):
    """A compiler-like replay that runs the step on bfloat16-rounded inputs."""

    def run(self) -> None:
        _run_on(self, [t.to(torch.bfloat16).to(t.dtype) for t in self.inputs], super().run)


class _Leaky(Graph):
    """Keeps a copy of every replay's outputs (an allocation per replay)."""

    def run(self) -> None:
        super().run()
        self.held.extend(t.clone() for t in self.outputs)


class _StaleGraphed(_Graphed):
    """A graphed module that never copies new inputs into its static buffers."""

    def forward(self, *args: torch.Tensor) -> Any:
        return self.module(*self.static)


class _ByCalling(Graph):
    """The old reference: replay calls the captured function again (replay == eager by
    construction; no graph)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.fn = self.runtime.last_fn

    def run(self) -> None:
        out = self.fn(*self.inputs)
        out = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        with torch.no_grad():
            for dst, src in zip(self.outputs, out, strict=True):
                if dst is not src:
                    dst.copy_(src)


class _ByCallingRuntime(Reference):
    def capture(self, fn: Any, *inputs: torch.Tensor, **options: Any) -> Any:
        self.last_fn = fn
        return super().capture(fn, *inputs, **options)


class _SkipsUnchanged(Graph):
    """Skips a replay when the static inputs are as they were at the last replay (a memo:
    wrong for a step that updates state or draws); ``replays`` counts the launches."""

    last: list[torch.Tensor] | None = None

    def replay(self) -> None:
        now = [t.clone() for t in self.inputs]
        if self.last is not None and all(torch.equal(a, b) for a, b in zip(now, self.last,
                                                                            strict=True)):
            return
        self.last = now
        super().replay()


class _IgnoresEagerDraws(Graph):
    """Each replay of a drawing graph starts from where the runtime's last replay left the
    default generator, unless the generator was just seeded: eager draws between replays
    are drawn again by the next replay."""

    def run(self) -> None:
        if self.tape.draws():
            state = torch.get_rng_state()
            fresh = torch.Generator().manual_seed(torch.initial_seed()).get_state()
            left = self.runtime.left
            if left is not None and not torch.equal(state, left) and not torch.equal(state,
                                                                                     fresh):
                torch.set_rng_state(left)
        super().run()
        self.runtime.left = torch.get_rng_state()


class _FrozenGenerator(Graph):
    """Draws from the registered generators at their state of capture, every replay."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.frozen = [g.get_state() for g in self.generators]

    def run(self) -> None:
        for g, s in zip(self.generators, self.frozen, strict=True):
            g.set_state(s)
        super().run()


# the samplers torch's graph RNG test covers that the area's RANDOM workload does not
_UNCOMMON = {torch.ops.aten.cauchy_.default, torch.ops.aten.geometric_.default,
             torch.ops.aten.log_normal_.default,
             *(getattr(torch.ops.aten.random_, o) for o in torch.ops.aten.random_.overloads())}


class _FrozenUncommon(Graph):
    """Replays the samplers it does not know as constants (their capture's numbers)."""

    def skip(self, func: Any) -> bool:
        return func in _UNCOMMON


class _ResetKeepsTape(Graph):
    """A recapture into a reset graph keeps replaying the first capture's tape."""

    def reset(self) -> None:
        self.old = self.tape
        super().reset()

    def recapture(self, tape: Tape, *rest: Any) -> None:
        super().recapture(getattr(self, "old", tape), *rest)


class _ResetLeaks(Graph):
    """``reset()`` drops the tape but the runtime keeps what it made."""

    def reset(self) -> None:
        self.held.extend(self.tape.made)
        self.tape = Tape()
        self.outputs = self.captured = ()


class _AnyMode(Reference):
    def check_mode(self, mode: str | None) -> None:
        return None


def _faulty(name: str, graph: type[Graph] = Graph, same_kernels: bool = True,
            runtime_class: type[Reference] = Reference, **attrs: Any) -> Reference:
    runtime = runtime_class()
    runtime.conformance_name = name
    runtime.graph_class = graph
    runtime.same_kernels = same_kernels
    for key, value in attrs.items():
        setattr(runtime, key, value)
    return runtime


class _SkipsCudagraphs(Graph):
    """The tape, plus one skipped CUDA graph reported at capture the way Inductor reports it
    (``counters["inductor"]["cudagraph_skips"]``), as reduce-overhead does on the CPU: the
    same check as ``reduce_overhead_on_cpu`` without its compile (CI runs this one)."""

    def __init__(self, *args: Any) -> None:
        from torch._dynamo.utils import counters

        counters["inductor"]["cudagraph_skips"] += 1
        super().__init__(*args)


class _ReduceOverheadOnCpu(ReduceOverhead):
    """The shipped reduce-overhead runtime re-declared for the CPU, where no CUDA graph
    exists: torch.compile skips its cudagraphs and runs Inductor's code."""

    conformance_name = "reduce_overhead_on_cpu"
    conformance_devices = ("cpu",)


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
# the proof of replay
replays_by_calling = _faulty("replays_by_calling", _ByCalling, runtime_class=_ByCallingRuntime)
reduce_overhead_on_cpu = _ReduceOverheadOnCpu()
skips_cudagraphs = _faulty("skips_cudagraphs", _SkipsCudagraphs)
skips_unchanged_replays = _faulty("skips_unchanged_replays", _SkipsUnchanged)
# the pitfalls (conformance/areas/graphs/test_pitfalls.py)
rng_ignores_eager_draws = _faulty("rng_ignores_eager_draws", _IgnoresEagerDraws, left=None)
frozen_generator = _faulty("frozen_generator", _FrozenGenerator)
frozen_uncommon_samplers = _faulty("frozen_uncommon_samplers", _FrozenUncommon)
reset_keeps_tape = _faulty("reset_keeps_tape", _ResetKeepsTape)
reset_leaks = _faulty("reset_leaks", _ResetLeaks)
item_only_sync_check = _faulty("item_only_sync_check", value_reads_check=False,
                               dynamic_shape_check=False)
accepts_any_error_mode = _faulty("accepts_any_error_mode", runtime_class=_AnyMode)

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
    "replays_by_calling": ("test_replay_equals_eager[replays_by_calling-float32-mlp]",),
    "reduce_overhead_on_cpu": ("test_replay_equals_eager[reduce_overhead_on_cpu-float32-mlp]",),
    "skips_cudagraphs": ("test_replay_equals_eager[skips_cudagraphs-float32-mlp]",),
    "skips_unchanged_replays": ("test_memory_flat[skips_unchanged_replays-float32]",),
    "rng_ignores_eager_draws": ("test_graphed_eager_graphed_rng[rng_ignores_eager_draws]",),
    "frozen_generator": ("test_registered_generator[frozen_generator]",),
    "frozen_uncommon_samplers": ("test_distribution[frozen_uncommon_samplers-cauchy_]",
                                 "test_distribution[frozen_uncommon_samplers-geometric_]"),
    "reset_keeps_tape": ("test_reset_recapture[reset_keeps_tape]",),
    "reset_leaks": ("test_memory_over_captures[reset_leaks]",),
    "item_only_sync_check": ("test_sync_in_capture[item_only_sync_check-nonzero]",),
    "accepts_any_error_mode": ("test_unknown_capture_error_mode[accepts_any_error_mode]",),
}
SELFTEST = [  # torch-conformance selftest (conformance/cli/selftest.py)
    *({"area": "graphs", "impl": name, "path": "graphs", "expect": "killed",
       "select": " or ".join(tests)} for name, tests in _FLAGGED_BY.items()),
    {"area": "graphs", "impl": "reference", "path": "graphs", "expect": "passes",
     "select": "reference and not bfloat16"},
]
