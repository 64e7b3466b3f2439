"""Device health between tests: on an accelerator, each test's process probes its device
right after the test body (a tiny op and a synchronize). A test that leaves the device
unusable (a sticky CUDA error, a lost device) is named in the crash file as the test that
poisoned it, and the process exits: under xdist a fresh worker runs the rest; without it
the run ends and its journal becomes the report (the rest not-run). ``CONFORMANCE_DEVICE_PROBE``
= 1 / 0 forces the probe on (the CPU too, for the suite's own tests) or off."""

from __future__ import annotations

import os

import torch

from conformance.processes.isolate import probe_device

ENV = "CONFORMANCE_DEVICE_PROBE"
POISONED = "Device left unusable:"  # the crash file's first dump line (watchdog.read_crash)
EXIT_STATUS = 70


def enabled(device: str) -> bool:
    """Probe on accelerators unless the environment says otherwise."""
    forced = os.environ.get(ENV, "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    return torch.device(device).type != "cpu"


def problem(device: str) -> str:
    """"" when the device still computes; else what the probe saw (probe_device's line)."""
    return probe_device(device)
