"""Device-side assertion implementations: ``torch._assert_async``.

Contract (area ``device_assert``): ``fn(t)`` with the semantics of ``torch._assert_async``:
``t`` is a one-element tensor on the run's device; a zero value must raise (RuntimeError or
torch.AcceleratorError) at the call or no later than the next synchronisation, a nonzero
value must not raise.
"""

from __future__ import annotations

import torch


def assert_async(t: torch.Tensor) -> None:
    torch._assert_async(t)


assert_async.conformance_name = "torch._assert_async"
