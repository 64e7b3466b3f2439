"""The fixtures every area's tests use: the run state, the device, the record, the run's
seed and a per-test numpy Generator (registered by the plugin, ``pytest_plugins``)."""

from __future__ import annotations

import warnings
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import torch

from conformance.harness import repro_trace
from conformance.harness.record import Record
from conformance.harness.registry import Impl
from conformance.harness.runstate import STATE, RunState
from conformance.run.keys import ITEM_META, ITEM_RECORD, ITEM_TOLERANCE


@pytest.fixture(scope="session")
def conformance_state(pytestconfig: pytest.Config) -> RunState:
    """The run's device, matrix, registry, profile and seed."""
    return pytestconfig.stash[STATE]


@pytest.fixture(scope="session")
def device(conformance_state: RunState) -> torch.device:
    """The torch device under qualification (one per run; xdist workers are pinned)."""
    return torch.device(conformance_state.device.torch_device)


@pytest.fixture
def record(request: pytest.FixtureRequest, conformance_state: RunState) -> Iterator[Record]:
    """The test's Record: ``record.case(...)``, ``record.require(measurement)``."""
    meta = request.node.stash.get(ITEM_META, None)
    if meta is None:
        raise RuntimeError("the record fixture needs a test marked with @pytest.mark.area")
    factor, reasons = request.node.stash.get(ITEM_TOLERANCE, (1.0, ()))
    rec = Record(
        nodeid=request.node.nodeid,
        area=meta["area"],
        impl=meta["impl"] or "-",
        device=meta["device"],
        dtype=meta["dtype"],
        repro_args=conformance_state.repro_args(meta["impl_spec"]),
        tolerance_factor=factor,
        tolerance_reasons=reasons,
        path=request.node.path,
        impl_spec=meta["impl_spec"],
    )
    request.node.stash[ITEM_RECORD] = rec
    if conformance_state.repro_dir is None:
        yield rec
        return
    trace = repro_trace.Trace()
    impl = request.node.callspec.params.get("impl") if hasattr(request.node, "callspec") \
        else None
    rec.on_failure = _repro_writer(conformance_state, trace,
                                   impl if isinstance(impl, Impl) else None)
    with repro_trace.tracing(trace):
        yield rec


def _repro_writer(state: RunState, trace: repro_trace.Trace, impl: Impl | None) -> Any:
    def write(rec: Record, message: str, m: Any) -> str | None:
        from conformance.report.repro import write_failure

        try:
            path = write_failure(state.repro_dir, rec, message, m, trace=trace, impl=impl,
                                 state=state)
        except Exception as exc:  # the verdict stands without its script
            warnings.warn(f"--repro-dir: no script for {rec.nodeid}: "
                          f"{type(exc).__name__}: {exc}", stacklevel=1)
            return None
        return str(path) if path else None
    return write


@pytest.fixture
def run_seed(conformance_state: RunState) -> int:
    """The run's --seed (0 under the ci profile, random under dev): areas with fixed base
    seeds add it, so a dev run draws fresh data and the report's reproduce line repeats it."""
    return int(conformance_state.seed)


@pytest.fixture
def rng(request: pytest.FixtureRequest, conformance_state: RunState) -> np.random.Generator:
    """A numpy Generator seeded from --seed and the test id (stable across xdist layouts)."""
    salt = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng([conformance_state.seed, salt])
