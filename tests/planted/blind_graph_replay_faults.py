"""The blind graph runtimes' replay and RNG faults (the catalogue: ``blind_graph_runtimes.py``)."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .blind_graph_base import BGraph, _just_seeded

# --------------------------------------------------------------------------------------------
# replay faults


class _CapturesNothing(BGraph):
    """A "capture" on a device whose stream capture records nothing (the CPU has no graph
    API; a runtime that wraps ``fn`` in a no-op capture context returns an empty graph). The
    outputs hold the capture's values forever. (Each replay launches the empty graph: it
    counts.)"""

    def run(self) -> None:
        return None


class _VersionDirty(BGraph):
    """Skips a replay when no static input was written since the last run (its version
    counter did not move): an "inputs unchanged, outputs still valid" shortcut. Wrong for
    anything with state outside the inputs: RNG, parameters an optimizer step updates,
    buffers. The capture's run counts as the first run (its outputs are "valid"), as in
    runtimes that skip the first replay after capture (in a real graph the capture runs
    nothing: outputs are garbage until the first replay)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._seen = self._versions()

    def _versions(self) -> tuple[int, ...]:
        return tuple(t._version for t in self.inputs)

    def replay(self) -> None:
        now = self._versions()
        if now == self._seen:
            return
        self._seen = now
        super().replay()


class _FirstElementDirty(BGraph):
    """Skips a replay when every static input's first element equals its value at the last
    run (a cheap "did the caller write new data" probe, cf. hash-of-a-prefix input caches)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._seen = self._probe()

    def _probe(self) -> list[torch.Tensor]:
        return [t.detach().reshape(-1)[:1].clone() for t in self.inputs]

    def replay(self) -> None:
        now = self._probe()
        if all(torch.equal(a, b) for a, b in zip(now, self._seen, strict=True)):
            return
        self._seen = now
        super().replay()


class _Staged(BGraph):
    """Copies the caller's inputs into private static buffers before each replay and runs on
    those (cudagraph trees' "inputs from eager" are copied to static addresses,
    pytorch/pytorch#121861). Correct here: full copy in, mutations copied back.

    On the tape, which reads the caller's tensors: the staged values are put in them for
    the replay, and afterwards the private buffers keep what the replay left and the
    caller's tensors get their own values back unless the replay mutated them and
    ``copy_back`` holds."""

    copy_back = True

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._stage_buffers()

    def _stage_buffers(self) -> None:
        self.buffers = tuple(t.detach().clone() for t in self.inputs)
        self.held.extend(self.buffers)

    def recapture(self, *args: Any) -> None:
        super().recapture(*args)
        self._stage_buffers()

    def stage(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        dst.copy_(src)

    def replay(self) -> None:
        if self.is_reset:
            raise RuntimeError("replay of a graph after reset()")
        with torch.no_grad():
            for dst, src in zip(self.buffers, self.inputs, strict=True):
                self.stage(dst, src)
            callers = [t.detach().clone() for t in self.inputs]
            for t, b in zip(self.inputs, self.buffers, strict=True):
                t.copy_(b)  # the tape reads the private buffers
        versions = [t._version for t in self.inputs]
        super().replay()
        with torch.no_grad():
            for t, b, mine, v in zip(self.inputs, self.buffers, callers, versions, strict=True):
                b.copy_(t)  # what the replay left in its private buffer
                if not (self.copy_back and t._version != v):
                    t.copy_(mine)  # the caller's tensor was never the graph's


class _ByteCountStaging(_Staged):
    """The staging copy is given ``numel()`` as its byte count (a cudaMemcpyAsync with
    elements for bytes): only the first ``1 / element_size`` of each input is refreshed; the
    rest keeps the capture's values. One-byte dtypes (bool, uint8, int8) are copied right."""

    def stage(self, dst: torch.Tensor, src: torch.Tensor) -> None:
        if not (dst.is_contiguous() and src.is_contiguous()) or dst.numel() == 0:
            dst.copy_(src)
            return
        n = src.numel()
        d = dst.detach().reshape(-1).view(torch.uint8)
        s = src.detach().reshape(-1).view(torch.uint8)
        d[:n].copy_(s[:n])


class _MutationLost(_Staged):
    """Inputs are staged into static buffers, and in-place updates ``fn`` makes to an input
    (a running statistic, a counter, ``x.add_``) stay in the staging buffer: the caller's
    tensor never changes (pytorch/pytorch#103985, #178586: copied inputs do not reflect
    mutation)."""

    copy_back = False


# --------------------------------------------------------------------------------------------
# RNG faults


class _OwnRngStream(BGraph):
    """The runtime keeps its own Philox position (seed, offset) for its graphs and syncs it
    with the default generator only after a reseed (``manual_seed``): graphs replayed one
    after another draw a correct sequence, but eager draws between two replays are not seen,
    so the replay after an eager call draws the numbers that eager call drew (cf. the
    whole-graph increment protocol of pytorch/pytorch#46148 / #48875, where a replay must read
    the generator's offset as it is at every replay)."""

    def _sync(self) -> torch.Tensor:
        rt = self.runtime.__dict__
        cur = torch.get_rng_state()
        left = rt.get("rng_left")
        if rt.get("rng_own") is None or (_just_seeded(cur) and (left is None
                                                                 or not torch.equal(cur, left))):
            rt["rng_own"] = cur
        return cur

    def replay(self) -> None:
        rt = self.runtime.__dict__
        self._sync()
        torch.set_rng_state(rt["rng_own"])
        super().replay()
        rt["rng_own"] = rt["rng_left"] = torch.get_rng_state()


class _GlobalNotAdvanced(_OwnRngStream):
    """The runtime reads the generator's position, draws correctly and advances its own copy
    across its graphs' replays, but never adds the whole-graph increment back to the default
    generator: replays draw a correct sequence, and the eager call after a replay repeats that
    replay's numbers (``replay_prologue`` without ``increase(wholegraph_increment)``; cf.
    pytorch/pytorch#143777, which skips that step only when the increment is 0)."""

    def replay(self) -> None:
        rt = self.runtime.__dict__
        cur = self._sync()
        torch.set_rng_state(rt["rng_own"])
        BGraph.replay(self)
        rt["rng_own"] = torch.get_rng_state()
        torch.set_rng_state(cur)
        rt["rng_left"] = cur


class _FrozenGenerator(BGraph):
    """Non-default generators registered with the graph (``capture(..., generators=)`` or
    ``register_generator_state``) get no whole-graph increment and no fresh offset at replay:
    every replay draws from them what the capture drew, and they do not advance. The default
    generator is right. Cf. pytorch/pytorch#114068 (graph-safe RNG state for generators
    other than the default), #91950 (unexpected generator during capture), #172390."""

    def replay(self) -> None:
        for g, state in self.registered:
            g.set_state(state)
        super().replay()
        for g, state in self.registered:
            g.set_state(state)


_NOT_GRAPH_SAFE = {
    "randint", "random_", "randperm", "multinomial", "exponential_", "geometric_",
    "cauchy_", "log_normal_", "poisson", "bernoulli", "randint_like", "_sample_dirichlet",
    "_standard_gamma", "binomial",
}


def _frozen(func: Any) -> bool:
    # torch.bernoulli(probs) (bernoulli.default / bernoulli.p) is frozen; dropout's
    # bernoulli_ (in place, float p) is graph safe
    return func.__name__.split(".")[0] in _NOT_GRAPH_SAFE


class _Recorder(TorchDispatchMode):
    """Records (capture) or plays back (replay) the results of some aten calls, in order."""

    def __init__(self, pred: Any, values: list[Any] | None = None) -> None:
        super().__init__()
        self.pred = pred
        self.playback = values is not None
        self.values: list[Any] = values if values is not None else []
        self.index = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self.pred(func):
            return func(*args, **kwargs)
        if self.playback and self.index < len(self.values):
            value = self.values[self.index]
            self.index += 1
            if func.__name__.split(".")[0].endswith("_") and isinstance(args[0], torch.Tensor):
                args[0].copy_(value)
                return args[0]
            return value.clone() if isinstance(value, torch.Tensor) else value
        out = func(*args, **kwargs)
        if not self.playback:
            self.values.append(out.clone() if isinstance(out, torch.Tensor) else out)
        return out


class _FrozenDistributions(BGraph):
    """Only the samplers that read the Philox offset from device memory at run time
    (uniform, normal, dropout's bernoulli_) are graph safe; the others take the
    seed and offset by value at launch, so the graph replays the numbers of its capture:
    ``randint``, ``randperm``, ``multinomial``, ``exponential_``, ``geometric_``,
    ``torch.bernoulli(probs)``, ``poisson``, ... (cf. pytorch/pytorch#134442 multinomial under
    capture, #130123 randperm and CUDA graphs, #50148 capture-safe RNG in fused kernels)."""

    @classmethod
    def recorder(cls) -> Any:
        return _Recorder(_frozen)

    def run(self) -> None:
        with _Recorder(_frozen, self.recorded.values):
            super().run()


class _PoolSharedOffset(BGraph):
    """Graphs captured into one pool share one RNG offset slot (the slot is per pool, not
    per graph): a later graph of the pool starts from the offset its first graph started
    from at its latest replay, drawing the same numbers (cf. pytorch/pytorch#172390 and
    #176752: RNG capture state per generator instead of per capture)."""

    def replay(self) -> None:
        slots = self.runtime.__dict__.setdefault("rng_slots", {})
        key = id(self._pool)
        if self._pool and self._pool[0] is self:
            slots[key] = torch.get_rng_state()
        elif key in slots:
            torch.set_rng_state(slots[key])
        super().replay()
