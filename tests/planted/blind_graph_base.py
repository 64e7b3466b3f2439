"""The blind graph runtimes' correct runtime (``BGraph``, ``Runtime``: the reference tape
with the extension methods), which their faults derive from (the catalogue and how it
was written: ``blind_graph_runtimes.py``)."""

from __future__ import annotations

import contextlib
from typing import Any

import torch

from .graph_runtime_base import FEATURES, Graph, Reference


def _tuple(out: Any) -> tuple[torch.Tensor, ...]:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _just_seeded(state: torch.Tensor) -> bool:
    """Whether the default CPU generator's ``state`` is that of ``manual_seed(initial_seed())``
    with nothing drawn since (a runtime's way of noticing a reseed)."""
    fresh = torch.Generator()
    fresh.manual_seed(torch.initial_seed())
    return torch.equal(fresh.get_state(), state)


# --------------------------------------------------------------------------------------------
# the correct runtime, with the extension methods


class BGraph(Graph):
    """The reference graph (the tape) plus what the blind helper assumed of ``reset()`` and
    generator registration."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.registered: list[tuple[torch.Generator, torch.Tensor]] = []
        self.recorded: Any = None
        self.is_reset = False

    def register_generator_state(self, generator: torch.Generator,
                                 state: torch.Tensor | None = None) -> None:
        self.registered.append((generator, generator.get_state() if state is None else state))
        if generator not in self.generators:
            self.generators = (*self.generators, generator)

    def reset(self) -> None:
        if self.is_reset:
            return
        self.is_reset = True
        super().reset()  # the tape, the outputs, what it held; out of the runtime's graphs
        if self in self._pool:
            self._pool.remove(self)
        self.registered = []

    def recapture(self, *args: Any) -> None:
        super().recapture(*args)
        self.is_reset = False
        if self not in self._pool:
            self._pool.append(self)

    def replay(self) -> None:
        if self.is_reset:
            raise RuntimeError("replay of a graph after reset()")
        super().replay()

    @classmethod
    def recorder(cls) -> Any:
        """A context manager run around the capture's call of ``fn`` (None: nothing)."""
        return None


class Runtime(Reference):
    conformance_name = "blind_correct"
    conformance_devices = ("cpu",)
    conformance_features = FEATURES
    graph_class: type = BGraph

    def __init__(self, name: str = "blind_correct", graph_class: type = BGraph,
                 **attrs: Any) -> None:
        super().__init__()
        self.conformance_name = name
        self.graph_class = graph_class
        for key, value in attrs.items():
            setattr(self, key, value)

    def _sync_guard(self) -> Any:
        """Around the capture, besides the reference's own host-sync checks."""
        return contextlib.nullcontext()

    def capture(self, fn: Any, *inputs: torch.Tensor, pool: Any = None,
                generators: Any = (), capture_error_mode: str | None = None,
                graph: Any = None) -> Any:
        self.check_mode(capture_error_mode)
        gens = [(g, g.get_state()) for g in (generators or ())]
        rec = self.graph_class.recorder()
        with self._sync_guard(), (rec if rec is not None else contextlib.nullcontext()):
            tape, out = self.record(fn, inputs)
        if graph is not None:  # recapture into a graph that was reset
            graph.recapture(tape, inputs, out, ())
        else:
            graph = self.graph_class(self, tape, inputs, out, pool)
        graph.recorded = rec
        for g, state in gens:
            graph.register_generator_state(g, state)
        return graph
