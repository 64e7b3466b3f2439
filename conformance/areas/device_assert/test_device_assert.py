"""Device-side assertions: ``torch._assert_async`` (the area's implementations), kernel-side
asserts from an out-of-bounds index (CUDA/ROCm), and Triton's ``tl.device_assert``.

Every case runs in the isolation runner (``conformance.processes.isolate``): a failed device-side
assertion leaves a CUDA/HIP context unusable for the rest of its process. Checks: a false
assertion raises (RuntimeError / torch.AcceleratorError) at the call or no later than the
next synchronisation (with ``CUDA_LAUNCH_BLOCKING=1`` / ``AMD_SERIALIZE_KERNEL=3``: at the
call); the message states the assertion and, on CUDA/ROCm, how to get more detail
(``conformance/harness/error_messages.py``); the device behaves as the matrix declares afterwards.
"""

from __future__ import annotations

import re

import pytest
import torch

from conformance.areas.device_assert.cases import (
    assert_async_case,
    kernel_assert_case,
    triton_assert_case,
)
from conformance.harness.compare import exact
from conformance.harness.compare import exact as _exact
from conformance.harness.error_messages import (
    ASSERT_MESSAGES,
    DSA_HINTS,
    KERNEL_ASSERT_LINE,
    LAUNCH_BLOCKING_HINT,
    dsa_mode,
    matching,
)
from conformance.harness.error_messages import rocm_abort_line as abort_line
from conformance.harness.outcomes import missing

pytestmark = [pytest.mark.area("device_assert"), pytest.mark.isolated(timeout=120)]
ALLOWED = ("builtins.RuntimeError",)  # torch.AcceleratorError is a RuntimeError
GPU_KINDS = ("cuda", "rocm")
KERNEL_KINDS = ("cuda", "rocm", "xpu", "mps")  # devices whose index kernels check


def _state(conformance_state):
    key = conformance_state.device.matrix_key
    return key, conformance_state.matrix.devices[key].after_error


def _returned(record, isolated, outcome) -> dict:
    __tracebackhide__ = True
    record.require(exact("the isolated case ran to its end (no crash, no hang)",
                         int(outcome.kind != "returned"), 1, isolated.explain(outcome)))
    return dict(outcome.value)


def _require_raised(record, res: dict, key: str, after_error: str, outcome, isolated,
                    at_call: bool = False) -> None:
    __tracebackhide__ = True
    hint = f"; rerun in the foreground: {isolated.command(outcome)}"

    def exact(name: str, bad: int, total: int, detail: str):  # the hint on every failure
        return _exact(name, bad, total, detail + hint if bad else "")

    where = res["surfaced"]
    record.note(surfaced=where, message=res.get("message", "")[:2000],
                dsa_mode=dsa_mode(res.get("message", "")), retired=outcome.retired,
                retire_reason=outcome.retire_reason)
    record.require(exact("a false assertion raises no later than the next sync point",
                         int(where == "never"), 1, "the assertion failed silently"))
    if at_call:
        record.require(exact("with serialised launches the error surfaces at the call",
                             int(where != "call"), 1, f"surfaced at {where}"))
    record.require(exact("raises RuntimeError (AcceleratorError)",
                         int(not any(c in res.get("exc_mro", []) for c in ALLOWED)), 1,
                         f"raised {res.get('exc_mro', ['?'])[0]}"))
    message = res.get("message", "")
    record.require(exact("the message states the assertion",
                         int(matching(message, ASSERT_MESSAGES[key]) is None), 1,
                         f"{message[:300]!r} matches no pattern for {key}"))
    if key in GPU_KINDS:
        hint = dsa_mode(message) is not None or re.search(LAUNCH_BLOCKING_HINT, message)
        record.require(exact("the message says how to get more detail", int(not hint), 1,
                             f"{message[:300]!r}: none of {[p for p, _, _ in DSA_HINTS]}"))
    if after_error == "keeps_working":
        record.require(exact("the device keeps working after the error",
                             int(res["after"] != "correct"), 1, res["after"]))
    else:
        record.require(exact("the device is reported poisoned or still correct, never wrong",
                             int(res["after"].startswith("wrong")), 1, res["after"]))


def test_assert_async_true(impl, device, record, isolated, conformance_state):
    """A true assertion (nonzero) does not raise, and the device computes afterwards."""
    outcome = isolated(assert_async_case, impl.spec, 1, str(device))
    res = _returned(record, isolated, outcome)
    record.require(exact("a true assertion does not raise", int(res["surfaced"] != "never"), 1,
                         res.get("message", "")[:300]))
    record.require(exact("the device computes after a true assertion",
                         int(res["after"] != "correct"), 1, res["after"]))


@pytest.mark.parametrize("value", [0, False], ids=["zero", "false"])
def test_assert_async_false(impl, device, record, isolated, conformance_state, value):
    """A false assertion raises at the call (CPU) or at the next sync (accelerators)."""
    key, after = _state(conformance_state)
    outcome = isolated(assert_async_case, impl.spec, value, str(device))
    res = _returned(record, isolated, outcome)
    _require_raised(record, res, key, after, outcome, isolated)


KERNEL_ENVS = {
    "default": {},
    "dsa": {"PYTORCH_USE_CUDA_DSA": "1"},
    "launch_blocking": {"CUDA_LAUNCH_BLOCKING": "1"},
    "serialize_kernel": {"AMD_SERIALIZE_KERNEL": "3"},
}


@pytest.mark.parametrize("env", list(KERNEL_ENVS), ids=str)
def test_kernel_assert(device, record, isolated, conformance_state, env):
    """An out-of-bounds index in a device kernel trips its device-side assertion (CUDA,
    ROCm, XPU's SYCL asserts; MPS reports it through its error buffer)."""
    key, after = _state(conformance_state)
    if key not in KERNEL_KINDS:
        missing(f"needs a CUDA, ROCm, XPU or MPS device (kernel-side assertions); the "
                f"device is {key}")
    if env != "default" and key not in GPU_KINDS:
        missing(f"{env} applies to CUDA / ROCm builds")
    if env == "serialize_kernel" and key != "rocm":
        missing("AMD_SERIALIZE_KERNEL applies to ROCm only")
    outcome = isolated(kernel_assert_case, str(device), env=KERNEL_ENVS[env])
    abort = rocm_abort_line(outcome) if key == "rocm" else ""
    if abort:  # a build without USE_ROCM_KERNEL_ASSERT: the assert ends the process
        record.note(rocm_abort=abort, rocm_kernel_assert=_rocm_kernel_assert())
        record.require(exact("a ROCm build with kernel asserts reports them, not an abort",
                             int(_rocm_kernel_assert() is True), 1,
                             f"the build says USE_ROCM_KERNEL_ASSERT=ON, yet: {abort}"))
        return
    res = _returned(record, isolated, outcome)
    blocking = env == "launch_blocking" or (env == "serialize_kernel" and key == "rocm")
    _require_raised(record, res, key, after, outcome, isolated, at_call=blocking)
    message = res.get("message", "")
    if key == "cuda" or (key == "rocm" and _rocm_kernel_assert()):
        line = re.search(KERNEL_ASSERT_LINE, outcome.stderr_tail)
        record.note(kernel_assert_line=line.group(0)[:300] if line else None)
        record.require(exact("the kernel's 'Assertion ... failed' line is on stderr",
                             int(line is None), 1, "no such line in the child's stderr: "
                             + outcome.stderr_tail[-500:]))
    if env == "dsa":
        mode = dsa_mode(message)
        if mode != "compiled, enabled":  # stock wheels: nothing to check, said so
            missing(f"device-side assertion tracking is {mode or 'not reported'} in this "
                    f"build: the kernel / file / line report cannot be checked")
        named = all(re.search(w, message, re.IGNORECASE) for w in ("kernel", "file", "line"))
        record.require(exact("with DSA enabled the report names the kernel, file and line",
                             int(not named), 1, message[:500]))


def _rocm_kernel_assert() -> bool | None:
    from conformance.harness.probe import device_side_assertions

    return device_side_assertions().get("rocm_kernel_assert")


def rocm_abort_line(outcome) -> str:
    """The stderr line of a child that a ROCm kernel assert aborted ("" otherwise)."""
    return abort_line(outcome.kind in ("signal", "exited"), outcome.stderr_tail)


def test_triton_device_assert(device, record, isolated, conformance_state):
    """``tl.device_assert`` under TRITON_DEBUG=1 raises on GPUs."""
    key, _after = _state(conformance_state)
    if key not in GPU_KINDS:
        missing("Triton's interpreter (the CPU path) does not check tl.device_assert; "
                "needs a CUDA or ROCm device")
    try:
        import triton  # noqa: F401
    except ImportError:
        missing("triton is not installed")
    outcome = isolated(triton_assert_case, str(device), env={"TRITON_DEBUG": "1"})
    res = _returned(record, isolated, outcome)
    record.note(surfaced=res["surfaced"], message=res.get("message", "")[:2000])
    record.require(exact("a failed tl.device_assert raises", int(res["surfaced"] == "never"), 1,
                         "the assertion failed silently"))
    if torch.version.hip is None:
        record.require(exact("the device is reported poisoned or still correct, never wrong",
                             int(res["after"].startswith("wrong")), 1, res["after"]))
