"""An implementation module that never finishes importing (a vendor library waiting on a
device or a lock at import): the start-up watchdog's planted hang. ``HANG_IN_C`` set:
the wait is in C code holding the GIL (libc's sleep through ``ctypes.PyDLL``), where no
Python thread can run."""

import ctypes
import os
import time

import torch

HANG_S = 120  # bounded: a test that failed to stop it leaves no process behind for long

if os.environ.get("HANG_IN_C"):
    ctypes.PyDLL(None).sleep(HANG_S)
else:
    time.sleep(HANG_S)


def topk(x, k, dim=-1, largest=True, sorted=True):
    return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)
