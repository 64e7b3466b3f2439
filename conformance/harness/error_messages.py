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
]
DEVICE_ASSERT = [
    (r"device-side assert", "c10/cuda CUDAException: 'CUDA error: device-side assert "
     "triggered' (HIP: 'HIP error: device-side assert triggered')"),
    (r"unspecified launch failure|hipErrorLaunchFailure|launch failure",
     "ROCm builds without kernel asserts (USE_ROCM_KERNEL_ASSERT off): an assert aborts the "
     "kernel, reported as hipErrorLaunchFailure (719)"),
    (r"illegal memory access", "an out-of-bounds access the kernel did not check, caught by "
     "the MMU: 'CUDA error: an illegal memory access was encountered' (the error is "
     "reported, not silent, but the index was not validated)"),
]
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
    "mps": [(r"assert", "MPS _assert_async")],
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
