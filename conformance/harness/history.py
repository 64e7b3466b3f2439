"""Process history that decides what a later torch call does, and how a test owns it.

Some of torch's behaviour depends on what ran earlier in the same process: Dynamo's code
caches and automatic dynamic (a Python scalar captured by a compiled or FlexAttention
function is specialised on its first value and traced as a symbolic value from the second
distinct one on), first-call paths, lazy initialisation. A verdict must not depend on
which tests ran before it in its worker, so each test starts from one stated state:

- **Compilation**: a fresh Dynamo state (what a process reaches on its first compiled
  call), at every test's setup (``conformance.plugin``) and before every call of a
  compiled-path check (attention's ``call_impl``: one per Hypothesis example).
- **Process-wide settings and generators**: torch's default dtype, grad mode, matmul
  precision, deterministic algorithms, thread count and TF32 flags, and the CPU generators
  of torch, numpy and ``random``, as the session started (``snapshot`` / ``restore`` at
  every test's setup): a test that draws from a global generator, or one after a test that
  changed a setting, sees the same values in any order.
- **Rank pools**: warm (``conformance.processes.current_rank.warm_up``).

A regression that shows only after some history (the second distinct captured float, the
first collective of a process) gets a dedicated test that builds that history itself,
deterministically (``conformance/areas/*/test_process_history.py``): resetting the state
keeps the numeric tests order-independent, and the dedicated test keeps the regression
visible.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any


def fresh_compile_state() -> None:
    """Forget everything Dynamo compiled and learnt in this process (code caches, guards,
    the values automatic dynamic has seen). Costs nothing where Dynamo was never imported
    (importing it would cost seconds)."""
    dynamo = sys.modules.get("torch._dynamo")
    if dynamo is not None:
        dynamo.reset()


# torch's process-wide settings a test (or an implementation under test) may change and
# leave behind: each test starts from the values the session started with
def _settings() -> list[tuple[str, Callable[[], Any], Callable[[Any], Any]]]:
    import torch

    out = [
        ("default dtype", torch.get_default_dtype, torch.set_default_dtype),
        ("grad mode", torch.is_grad_enabled, torch.set_grad_enabled),
        ("float32 matmul precision", torch.get_float32_matmul_precision,
         torch.set_float32_matmul_precision),
        ("deterministic algorithms", torch.are_deterministic_algorithms_enabled,
         torch.use_deterministic_algorithms),
        ("intra-op threads", torch.get_num_threads, torch.set_num_threads),
    ]
    for name, owner in (("cuda.matmul.allow_tf32", torch.backends.cuda.matmul),
                        ("cudnn.allow_tf32", torch.backends.cudnn)):
        out.append((name, lambda o=owner: o.allow_tf32,
                    lambda v, o=owner: setattr(o, "allow_tf32", v)))
    return out


def snapshot() -> dict[str, Any]:
    """torch's process-wide settings and the CPU generators' states (torch's default
    generator, numpy's legacy global one, Python's ``random``), as the session starts."""
    import random

    import numpy as np
    import torch

    values = {}
    for name, get, _ in _settings():
        try:
            values[name] = get()
        except Exception:  # a setting this build lacks is not restored
            continue
    return {"settings": values, "torch_rng": torch.random.get_rng_state(),
            "numpy_rng": np.random.get_state(), "python_rng": random.getstate()}


def restore(state: dict[str, Any]) -> list[str]:
    """Put back what ``snapshot`` saw; the names of the settings that had changed (an
    earlier test left them so)."""
    import random

    import numpy as np
    import torch

    changed = []
    for name, get, put in _settings():
        if name not in state["settings"]:
            continue
        try:
            if get() != state["settings"][name]:
                changed.append(name)
                put(state["settings"][name])
        except Exception:  # as in snapshot
            continue
    torch.random.set_rng_state(state["torch_rng"])
    np.random.set_state(state["numpy_rng"])
    random.setstate(state["python_rng"])
    return changed
