"""How a ``--repro-dir`` script re-checks a failed call on its own (torch and numpy only).

An area states, next to its own check, the criterion of one call of the implementation with
the oracle's result, so that the standalone script (conformance/report/repro.py) can
recompute the call and judge it as the suite did: exit 1 while the fault is there, 0 once
it is fixed. Stated before the call (``expect_next``) it also judges a call that raised in
the suite; after it (``expect``) it applies to the newest call. Without a trace (no
``--repro-dir``) both do nothing::

    recheck.expect_next(recheck.within_bound("|C - AB| <= bound", recheck.output(), ref,
                                             bound, dtype="float32"))
    out = impl(a, b)

A ``Check`` judges one target: an output of the call (``output()``, ``output(0)``), an
input after it (``written(t)``: an in-place result) or an input's gradient after a backward
with the recorded cotangents (``grad(t)``), with a criterion the script evaluates:

- ``elementwise``: ``|got - expected| <= bound``, or ``lower <= got <= upper``, or got equal
  to one of ``alternatives``; NaN where ``nan_ok``; ``exact`` positions equal ``expected``
  (NaN equals NaN); optionally the dtype and device;
- ``topk``: TopK's properties (structure, indices in range and distinct per slice, values
  equal the gathered input bit for bit, values equal the oracle's in order or as a
  multiset).

Call-level extras: ``unchanged`` inputs must keep their values, ``intact`` inputs must keep
the storage around their view (no write outside it), ``returns`` (an in-place op returns
that input itself).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from conformance.harness import repro_trace


@dataclass(frozen=True)
class Target:
    """What a check judges: ``("output", path)``, ``("written", tensor)``, ``("grad", tensor)``."""

    kind: str
    ref: Any = ""


def output(*path: int | str) -> Target:
    """An output of the call: ``output()`` the result itself, ``output(0)`` its first item."""
    return Target("output", "".join(f"[{p!r}]" for p in path))


def written(t: torch.Tensor) -> Target:
    """Input ``t`` after the call (an in-place op's result)."""
    return Target("written", t)


def grad(t: torch.Tensor) -> Target:
    """The gradient of input ``t`` after a backward with the recorded cotangents."""
    return Target("grad", t)


@dataclass
class Check:
    name: str
    target: Target
    kind: str = "elementwise"
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    inputs: dict[str, torch.Tensor] = field(default_factory=dict)  # named inputs it reads


def _structure(dtype: torch.dtype | str | None, device: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"same_device": device}
    if dtype is not None:
        params["dtype"] = str(dtype).removeprefix("torch.")
    return params


def within_bound(name: str, target: Target, expected: Any, bound: Any, *,
                 dtype: torch.dtype | str | None = None, device: bool = False) -> Check:
    """``|got - expected| <= bound`` per element; non-finite expected values exact."""
    return Check(name, target, arrays={"expected": expected, "bound": bound},
                 params=_structure(dtype, device))


def within_interval(name: str, target: Target, lower: Any, upper: Any, *,
                    expected: Any = None, exact: Any = None, nan_ok: Any = None,
                    dtype: torch.dtype | str | None = None, device: bool = False) -> Check:
    """``lower <= got <= upper`` per element (NaN fails unless ``nan_ok``); where ``exact``,
    got equals ``expected`` instead (NaN equals NaN)."""
    arrays = {"lower": lower, "upper": upper}
    if exact is not None:
        arrays.update(exact=exact, expected=expected)
    if nan_ok is not None:
        arrays["nan_ok"] = nan_ok
    return Check(name, target, arrays=arrays, params=_structure(dtype, device))


def one_of(name: str, target: Target, alternatives: Any, *,
           dtype: torch.dtype | str | None = None, device: bool = False,
           signed_zero: bool = False) -> Check:
    """got equal (NaN equals NaN; -0.0 equals 0.0 unless ``signed_zero``) to one of the
    ``alternatives`` (stacked on a first axis; one of them: exact equality) per element."""
    return Check(name, target, arrays={"alternatives": alternatives},
                 params={**_structure(dtype, device), "signed_zero": signed_zero})


def topk(name: str, target: Target, x: torch.Tensor, expected: np.ndarray, *, k: int,
         dim: int, largest: bool, sorted: bool) -> Check:
    """TopK's properties of ``impl(x, k, dim, largest, sorted)``; ``expected`` the oracle's
    values (exact: float64 or int64)."""
    return Check(name, target, kind="topk", arrays={"values": expected},
                 params={"k": int(k), "dim": int(dim), "largest": bool(largest),
                         "sorted": bool(sorted)}, inputs={"x": x})


def _arrays(arrays: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The check's arrays as CPU tensors, copied (float64; masks bool), broadcast to the
    shape of the first of them; built only when a trace records them."""
    out: dict[str, torch.Tensor] = {}
    shape: tuple[int, ...] | None = None
    for key, value in arrays.items():
        if key == "values":  # exact oracle values in their own dtype
            a = np.array(value)
        else:
            a = np.asarray(value, dtype=bool if key in ("exact", "nan_ok") else np.float64)
            if shape is not None and key != "alternatives":
                a = np.broadcast_to(a, shape)
            a = np.array(a)
        shape = a.shape if shape is None else shape
        out[key] = torch.from_numpy(a)
    return out


@dataclass
class Recheck:
    """The checks of one call, its targets and inputs resolved to the call's T indices."""

    checks: list[dict[str, Any]]
    unchanged: list[int]
    intact: list[int]
    returns: int | None


def _resolve(call: repro_trace.Call, checks: tuple[Check, ...],
             unchanged: tuple[torch.Tensor, ...], intact: tuple[torch.Tensor, ...],
             returns: torch.Tensor | None) -> Recheck:
    out = []
    for c in checks:
        t = c.target
        if t.kind == "output":
            expr = f"out{t.ref}"
        elif t.kind == "written":
            expr = f"T[{call.input_index(t.ref)}]"
        else:
            expr = f"T[{call.input_index(t.ref)}].grad"
        out.append({"name": c.name, "kind": c.kind, "target": expr, "grad": t.kind == "grad",
                    "arrays": _arrays(c.arrays),
                    "params": {**c.params, **{f"input_{k}": call.input_index(v)
                                              for k, v in c.inputs.items()}}})
    return Recheck(out, [call.input_index(t) for t in unchanged],
                   [call.input_index(t) for t in intact],
                   None if returns is None else call.input_index(returns))


def _attach(call: repro_trace.Call, checks: tuple[Check, ...], unchanged: tuple, intact: tuple,
            returns: torch.Tensor | None) -> None:
    try:
        call.recheck = _resolve(call, checks, unchanged, intact, returns)
    except KeyError:
        call.why_no_recheck = "a tensor its check names is not an argument of the call"


def tracing() -> bool:
    """Whether the test records its calls (--repro-dir): build a check's arrays only then."""
    return repro_trace.active() is not None


def expect_next(*checks: Check, unchanged: tuple[torch.Tensor, ...] = (),
                intact: tuple[torch.Tensor, ...] = (),
                returns: torch.Tensor | None = None) -> None:
    """How the next call of the implementation is re-checked (no-op without a trace)."""
    trace = repro_trace.active()
    if trace is not None:
        trace.pending = lambda call: _attach(call, checks, unchanged, intact, returns)


def expect(*checks: Check, unchanged: tuple[torch.Tensor, ...] = (),
           intact: tuple[torch.Tensor, ...] = (), returns: torch.Tensor | None = None) -> None:
    """How the newest call of the implementation is re-checked (no-op without a trace)."""
    trace = repro_trace.active()
    if trace is not None and trace.calls and trace.calls[-1].why_not is None:
        _attach(trace.calls[-1], checks, unchanged, intact, returns)
