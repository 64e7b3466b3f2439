"""impls/attention/flex.py: compiled FlexAttention never falls back to eager silently.

Dynamo compiles a function once per guard set (here: per score mod) and, past
``recompile_limit``, runs it eagerly with only a log line; a qualification of flex.compiled
then checks flex.eager. Shown with a stand-in of flex_attention's call pattern (a compiled
function called with a new closure each time) under the ``eager`` backend, cheap to compile.
"""

from __future__ import annotations

import contextlib

import pytest
import torch
from torch._dynamo.utils import counters

from impls.attention.flex import no_eager_fallback

# CI's oldest leg runs it too: Dynamo's recompile limit and FlexAttention's tracing differ between
# releases
pytestmark = pytest.mark.torch_release


def _mods(n: int) -> list:
    """n score-mod-like functions, each its own code object (as the catalogue's are)."""
    out = []
    for i in range(n):
        namespace: dict = {}
        exec(f"def mod_{i}(t):\n    return t * {i + 1}\n", namespace)
        out.append(namespace[f"mod_{i}"])
    return out


def _compiled_calls(guard: bool, calls: int) -> int:
    torch._dynamo.reset()
    counters.clear()
    f = torch.compile(lambda x, mod: mod(x), backend="eager", dynamic=False)
    for mod in _mods(calls):
        with no_eager_fallback() if guard else contextlib.nullcontext():
            f(torch.ones(3), mod)
    return int(counters["stats"]["unique_graphs"])


def test_without_the_guard_dynamo_stops_compiling_at_its_limit():
    limit = torch._dynamo.config.recompile_limit
    assert _compiled_calls(guard=False, calls=limit + 4) == limit


def test_the_guard_compiles_every_call():
    limit = torch._dynamo.config.recompile_limit
    assert _compiled_calls(guard=True, calls=limit + 4) == limit + 4
