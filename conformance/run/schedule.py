"""How ``-n N`` (without ``--dist``) shares a qualification among xdist workers.

xdist's default ("load") hands each worker long contiguous runs of the collection, so whole
areas land on one worker and the run ends with one worker idle while the other finishes
its queue: measured cold on the 2-core machine, 318.6 s against 378.6 s of tests
(docs/results/time-budget-2026-12-04.md). Work stealing evens the queues out but splits
every area, and
some areas cost once per process: the collectives' rank pools (W processes per world size,
each importing torch), the first AOTInductor / ExecuTorch build, and Inductor's first
FlexAttention compile.

``AreaScheduling`` therefore keeps each of those areas on one worker (a ``PINNED`` group,
handed out first, the largest first) and deals out the rest in units of ``CHUNK`` tests in
collection order, one unit at a time to whichever worker runs low: the workers finish
within about a unit of each other. It is xdist's scope scheduler with our scopes; the
test ids and the outcomes are those of any other scheduling.
"""

from __future__ import annotations

from typing import Any

import pytest

CHUNK = 8  # the most unpinned tests a unit holds
# (group, test-id fragment): the first fragment found in a test id names its group
PINNED: tuple[tuple[str, str], ...] = (
    ("collectives", "conformance/areas/collectives/"),
    ("export", "conformance/areas/export/"),
    ("flex.compiled", "[flex.compiled-"),
)


def scopes(nodeids: list[str], workers: int) -> dict[str, str]:
    """Each test id's scope: its pinned group, else its unit of unpinned tests.

    A group is pinned only while it is at most 1 / (workers + 1) of the selection (a run of
    one area shares it among the workers); units hold up to CHUNK tests, fewer in a small
    selection, so that every worker gets some."""
    group_of = {n: next((g for g, fragment in PINNED if fragment in n), None) for n in nodeids}
    sizes: dict[str, int] = {}
    for g in group_of.values():
        if g is not None:
            sizes[g] = sizes.get(g, 0) + 1
    pinned = {g for g, n in sizes.items() if n * (workers + 1) <= len(nodeids)}
    free = [n for n in nodeids if group_of[n] not in pinned]
    chunk = max(1, min(CHUNK, len(free) // (4 * max(workers, 1))))
    out = {n: group_of[n] for n in nodeids if group_of[n] in pinned}
    out.update({n: f"chunk-{i // chunk}" for i, n in enumerate(free)})
    return out


def queue_order(scope: str, size: int) -> tuple[int, int]:
    """Sort key of a scope in the work queue: pinned groups first, the largest first;
    then the chunks in collection order."""
    if scope.startswith("chunk-"):
        return (1, int(scope.removeprefix("chunk-")))
    return (0, -size)


def explicit_dist(config: pytest.Config) -> bool:
    """Whether the command line chose a ``--dist`` mode itself."""
    return any(a == "--dist" or a.startswith("--dist=") or a == "-d"
               for a in config.invocation_params.args)


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """An ``AreaScheduling`` for ``-n N`` without ``--dist``; None leaves the choice to
    xdist (an explicit ``--dist``, or an xdist without the scope scheduler)."""
    if getattr(config.option, "dist", "no") != "load" or explicit_dist(config):
        return None
    try:
        from xdist.scheduler import LoadScopeScheduling
    except ImportError:  # pragma: no cover - xdist >= 3.5 has it
        return None

    class AreaScheduling(LoadScopeScheduling):  # type: ignore[misc, valid-type]
        """xdist's scope scheduler over ``scopes()``, the queue in ``queue_order``."""

        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            self._scope_of: dict[str, str] = {}
            self._ordered = False

        def schedule(self) -> None:
            if self.collection is None and self.collection_is_completed \
                    and self.registered_collections:
                collection = list(next(iter(self.registered_collections.values())))
                self._scope_of = scopes(collection, len(self.nodes))
            super().schedule()

        def _split_scope(self, nodeid: str) -> str:
            return self._scope_of.get(nodeid) or nodeid

        def remove_node(self, node: Any) -> str | None:
            """A worker left: the test it was running (crashed, or stopped by the
            watchdog) has its verdict and is not handed to another worker (xdist's scope
            scheduler would run it again); its other pending tests are."""
            workload = self.assigned_work.pop(node)
            pending = [(unit, nodeid) for unit in workload.values()
                       for nodeid, done in unit.items() if not done]
            if not pending:
                return None
            unit, crashitem = pending[0]
            unit[crashitem] = True
            self.workqueue.update({scope: u for scope, u in workload.items()
                                   if not all(u.values())})
            for other in self.assigned_work:
                self._reschedule(other)
            return crashitem

        def _reschedule(self, node: Any) -> None:
            """A replacement worker still collecting gets its work once its collection is
            in (``schedule`` runs again then): xdist's scope scheduler would hand it work
            now, when another worker dies meanwhile, and fail the run with a KeyError
            (two workers crashing close together, issue 64)."""
            if node not in self.registered_collections:
                return
            super()._reschedule(node)

        def _assign_work_unit(self, node: Any) -> None:
            if not self._ordered:  # the queue is complete by the first assignment
                self._ordered = True
                units = sorted(self.workqueue.items(),
                               key=lambda kv: queue_order(kv[0], len(kv[1])))
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return AreaScheduling(config, log)
