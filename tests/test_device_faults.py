"""The rules for what a GPU reports, exercised on the CPU with recorded messages: a ROCm
abort after a kernel assert is that device's assert; an MMU fault is an unchecked access,
never a valid out-of-bounds error; a device-side assert needs its kernel's stderr line."""

from __future__ import annotations

import pytest

from conformance.areas.device_assert.test_device_assert import rocm_abort_line
from conformance.areas.indexing.verdicts import require_invalid
from conformance.processes.isolate import Outcome

pytestmark = pytest.mark.harness_only

HSA = ("HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. "
       "code: 0x1016")
MMU = ("Memory access fault by GPU node-1 (Agent handle: 0x55d0) on address 0x7f00. "
       "Reason: Page not present or supervisor privilege.")
ASSERT = ("/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1553: indexSelectSmallIndex: "
          "block: [0,0,0], thread: [0,0,0] Assertion `srcIndex < srcSelectDimSize` failed.")


class Recorder:
    """A Record stand-in: the checks that failed, by name."""

    def __init__(self) -> None:
        self.failed: list[str] = []

    def require(self, m) -> None:
        if not m.ok:
            self.failed.append(m.name)


def _result(**fields) -> dict:
    base = {"applies": True, "surfaced": "call", "exc_mro": ["builtins.RuntimeError"],
            "message": "CUDA error: device-side assert triggered", "guards": [],
            "guards_checked": True, "after": "raised", "after_detail": "", "stderr": ASSERT}
    return base | fields


def _failed(res: dict, device: str, after: str = "poisoned") -> list[str]:
    rec = Recorder()
    require_invalid(rec, res, device, after)
    return rec.failed


def test_rocm_abort_line():
    died = Outcome(kind="signal", signal="SIGABRT", stderr_tail=f"x\n{HSA}\n")
    assert rocm_abort_line(died) == HSA
    assert rocm_abort_line(Outcome(kind="signal", signal="SIGABRT",
                                   stderr_tail=f"{MMU}\n{HSA}\n")) == ""  # a page fault
    assert rocm_abort_line(Outcome(kind="returned", stderr_tail=HSA)) == ""


def test_indexing_verdicts_on_device_messages():
    assert _failed(_result(), "cuda") == []
    # a device-side assert with no kernel line on stderr
    assert _failed(_result(stderr=""), "cuda") == ["the kernel's assert line is on stderr"]
    # an MMU fault is an unchecked access, whatever else the message says
    mmu = _result(message="CUDA error: an illegal memory access was encountered")
    assert "the index was checked (no MMU fault: not an unchecked access)" in \
        _failed(mmu, "cuda")
    # ROCm: a process a kernel assert aborted is the assert; a page fault is a crash
    aborted = {"applies": True, "crashed": "died by SIGABRT", "death": "signal",
               "surfaced": "crashed", "guards": [], "stderr": f"{HSA}\n"}
    assert _failed(aborted, "rocm") == []
    assert _failed(aborted | {"guards": ["x: 1 element(s) outside the view were written"]},
                   "rocm") == ["no write outside the destination"]
    faulted = aborted | {"stderr": f"{MMU}\n{HSA}\n"}
    assert _failed(faulted, "rocm") == ["the case ran to its end (no crash, no hang)"]
    # the same abort on CUDA is a crash
    assert _failed(aborted, "cuda") == ["the case ran to its end (no crash, no hang)"]
