"""Device-side assertion cases: module-level functions of literal arguments, run in an
isolated child (``conformance.processes.isolate``); each returns a JSON-able dict of what
happened."""

from __future__ import annotations

from typing import Any

import torch


def _fields(exc: BaseException) -> dict[str, Any]:
    return {"exc_mro": [f"{c.__module__}.{c.__qualname__}" for c in type(exc).__mro__],
            "message": str(exc)}


def _surface(device: str, run) -> dict[str, Any]:
    """Run ``run()``, then synchronise: where an error surfaced (call, sync, never)."""
    out: dict[str, Any] = {"surfaced": "never"}
    try:
        run()
    except Exception as exc:
        return {"surfaced": "call", **_fields(exc)}
    try:
        if torch.device(device).type != "cpu":
            torch.accelerator.synchronize()
    except Exception as exc:
        return {"surfaced": "sync", **_fields(exc)}
    return out


def _after(device: str) -> str:
    """'correct', 'wrong' or 'raised': a small computation after the case."""
    try:
        x = torch.arange(8, dtype=torch.float32, device=device)
        total = float((x * 2).sum().cpu())
    except Exception as exc:
        return f"raised: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    return "correct" if total == 56.0 else f"wrong: {total}"


def assert_async_case(impl_spec: str, value: int, device: str) -> dict[str, Any]:
    """``impl(torch.tensor(value))`` on ``device``; then a check that the device computes."""
    from conformance.harness.registry import load_object

    fn = load_object(impl_spec, "--impl device_assert")
    t = torch.tensor(value, device=device)
    out = _surface(device, lambda: fn(t))
    out["after"] = _after(device)
    return out


def kernel_assert_case(device: str) -> dict[str, Any]:
    """An out-of-bounds index in a device kernel (index_select's CUDA/HIP kernel asserts)."""
    x = torch.zeros(4, device=device)
    idx = torch.tensor([10], device=device)
    out = _surface(device, lambda: torch.index_select(x, 0, idx))
    out["after"] = _after(device)
    return out


def triton_assert_case(device: str) -> dict[str, Any]:
    """A Triton kernel whose ``tl.device_assert`` fails (checked only with TRITON_DEBUG=1)."""
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(x_ptr, n):
        i = tl.arange(0, 16)
        v = tl.load(x_ptr + i, mask=i < n)
        tl.device_assert(v >= 0, "value must be non-negative")

    x = -torch.ones(16, device=device)
    out = _surface(device, lambda: kernel[(1,)](x, 16))
    out["after"] = _after(device)
    return out
