"""Accepted error messages, in one place: what an out-of-bounds index or a failed
device-side assertion must say, per device kind, each pattern with where it comes from.

A message passes when it matches any pattern of its device kind (case-insensitive search).
"""

from __future__ import annotations

import re

# (pattern, source) - "index / out of bounds / assert": the message must name the problem
INDEX_COMMON = [
    (r"out of (bounds|range)", "ATen TORCH_CHECK_INDEX / index kernels: 'index 3 is out of "
     "bounds for dimension 0 with size 3', 'index out of range in self', 'out of range: "
     "tried to access index 12 on a tensor of 12 elements.', nll_loss 'Target 4 is out of "
     "bounds.'"),
    (r"out of data bounds", "index_select (CPU, a non-leading dim): 'INDICES element is out "
     "of DATA bounds, id=5 axis_dim=5'"),
    (r"not in the valid range", "embedding_bag (CPU): 'Index 0 of input takes value 5 which "
     "is not in the valid range [0, 5)'"),
    (r"idx < num_embeddings|i < index_size", "embedding_bag (CPU): 'embedding_bag: Expected "
     "idx >= 0 && idx < num_embeddings ...', 'Expected i < index_size to be true' (a bad "
     "index or bad offsets in the sum/mean fast path)"),
    (r"class values must be", "one_hot: 'Class values must be smaller than num_classes.' / "
     "'... non-negative.'"),
    (r"offsets\[", "embedding_bag: 'offsets[0] has to be 0 ...', 'offsets[-1] can not be "
     "greater than input's length ...'"),
    (r"indexing axis dim should be positive", "index_select (CPU) on a size-0 dim: "
     "'index_select(): self indexing axis dim should be positive'"),
    (r"shape of the mask", "a bool mask of the wrong shape: 'The shape of the mask [5] at "
     "index 0 does not match the shape of the indexed tensor [4, 5] at index 0'"),
    (r"must match the (size|existing size)|(not|cannot|can't) (be )?broadcast|shape "
     r"mismatch", "a mask that does not broadcast: 'The size of tensor a (6) must match the "
     "size of tensor b (5) at non-singleton dimension 1' (masked_select), 'The expanded "
     "size of the tensor (5) must match the existing size (6) ...' (masked_scatter_); an "
     "outside implementation's 'mask [4, 6] does not broadcast with input [4, 5]'"),
    (r"number of elements of source", "masked_scatter_: 'Number of elements of source < "
     "number of ones in mask'"),
    (r"allocated size does not match", "repeat_interleave with a wrong output_size: "
     "'allocated size does not match required size'"),
    (r"can not be negative", "repeat_interleave: 'repeats can not be negative'"),
    (r"non-negative integral inputs", "bincount: 'bincount only supports 1-d non-negative "
     "integral inputs.'"),
    (r"(take from|put elements into) an empty tensor", "take / put_ on an empty tensor: "
     "'take(): tried to take from an empty tensor', 'put_(): Tried to put elements into an "
     "empty tensor'"),
]
DEVICE_ASSERT = [
    (r"device-side assert", "c10/cuda CUDAException: 'CUDA error: device-side assert "
     "triggered' (HIP: 'HIP error: device-side assert triggered')"),
    (r"unspecified launch failure|hipErrorLaunchFailure|launch failure",
     "ROCm builds without kernel asserts (USE_ROCM_KERNEL_ASSERT off): an assert aborts the "
     "kernel, reported as hipErrorLaunchFailure (719)"),
    (r"HSA_STATUS_ERROR_EXCEPTION", "ROCm: a kernel assert in a build without "
     "USE_ROCM_KERNEL_ASSERT traps and the runtime aborts the process: "
     "'HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception. "
     "code: 0x1016' (the child's last stderr line)"),
]
# an access the kernel did not check, caught by the MMU: reported, but never a valid
# out-of-bounds error (the index was not validated; what was written before the fault is
# not known) - the indexing checks fail it as an unchecked access
MMU_FAULT = [
    (r"illegal memory access|illegal address", "CUDA: 'CUDA error: an illegal memory access "
     "was encountered' (cudaErrorIllegalAddress, 700), 'CUDA_ERROR_ILLEGAL_ADDRESS'"),
    (r"memory access fault by gpu|page not present", "ROCm: 'Memory access fault by GPU "
     "node-1 (Agent handle: ...) on address 0x.... Reason: Page not present or supervisor "
     "privilege.' (then an abort)"),
    (r"hipErrorIllegalAddress", "HIP: hipErrorIllegalAddress"),
    (r"UR_RESULT_ERROR_DEVICE_LOST|PI_ERROR_DEVICE_LOST", "XPU (Level Zero): the device is "
     "lost after a page fault"),
]
# a kernel assert's own line on stderr (CUDA's __assert_fail, ROCm with kernel asserts):
# '.../IndexKernel.cu:92: operator(): block: [0,0,0], thread: [0,0,0] Assertion
# `-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.'
KERNEL_ASSERT_LINE = r"Assertion\s.+\sfailed"
# how a ROCm process that a kernel assert ended says so on stderr (no Python exception)
ROCM_ABORT = r"HSA_STATUS_ERROR_EXCEPTION|hipErrorLaunchFailure|unspecified launch failure"


def rocm_abort_line(died: bool, stderr: str) -> str:
    """The stderr line of a process that a ROCm kernel assert ended ("" when it did not
    die, when nothing says so, or when it was a page fault: an unchecked access)."""
    if not died or matching(stderr, MMU_FAULT):
        return ""
    lines = [ln for ln in stderr.splitlines() if re.search(ROCM_ABORT, ln)]
    return lines[-1].strip() if lines else ""
MPS_ASYNC = [
    (r"index -?\d+ is out of bounds", "MPS asynchronous error buffer (pytorch#166615): "
     "torch.AcceleratorError 'index 1 is out of bounds for dimension 0 with size 1' at the "
     "next synchronisation"),
]

INDEX_MESSAGES: dict[str, list[tuple[str, str]]] = {
    "cpu": INDEX_COMMON,
    "cuda": INDEX_COMMON + DEVICE_ASSERT,
    "rocm": INDEX_COMMON + DEVICE_ASSERT,
    "xpu": INDEX_COMMON + DEVICE_ASSERT,
    "mps": INDEX_COMMON + MPS_ASYNC,
}

# torch._assert_async / kernel asserts (the device_assert area)
ASSERT_MESSAGES: dict[str, list[tuple[str, str]]] = {
    "cpu": [(r"expected tensor with single nonzero value|assert", "ATen _assert_async (CPU): "
             "'Expected Tensor with single nonzero value, but got zero'")],
    "cuda": DEVICE_ASSERT,
    "rocm": DEVICE_ASSERT,
    "xpu": DEVICE_ASSERT,
    # an index kernel's check on MPS is reported through its error buffer (MPS_ASYNC)
    "mps": [(r"assert", "MPS _assert_async"), *MPS_ASYNC],
}

# how the report must say to get more detail (the builds differ: with or without
# TORCH_USE_CUDA_DSA / TORCH_USE_HIP_DSA, and with the runtime switch on or off)
DSA_HINTS = [
    (r"compile with `?torch_use_(cuda|hip)_dsa`? to enable device-side assertions",
     "c10/cuda/CUDAException.cpp (builds without DSA)", "not compiled"),
    (r"device-side assertion tracking was not enabled by user",
     "c10/cuda/CUDADeviceAssertionHost.cpp (DSA compiled, PYTORCH_USE_CUDA_DSA unset)",
     "compiled, disabled"),
    (r"device-side assertion failures? (were|was) found|looking for device-side assertion",
     "c10/cuda/CUDADeviceAssertionHost.cpp (DSA compiled and enabled)", "compiled, enabled"),
]
LAUNCH_BLOCKING_HINT = r"CUDA_LAUNCH_BLOCKING=1|AMD_SERIALIZE_KERNEL=3"


def matching(message: str, patterns: list[tuple[str, str]]) -> str | None:
    """The source of the first pattern the message matches, or None."""
    for pattern, source in patterns:
        if re.search(pattern, message, re.IGNORECASE):
            return source
    return None


def dsa_mode(message: str) -> str | None:
    """The DSA mode a device-side assertion message reveals, or None."""
    for pattern, _source, mode in DSA_HINTS:
        if re.search(pattern, message, re.IGNORECASE):
            return mode
    return None
