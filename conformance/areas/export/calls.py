"""How a program behaves across calls and builds (test_calls.py): the child side, run by the
isolation runner, and the parent's verdicts.

In one process, at the example size (static shapes, so every path can take part):

1. ``first``: call the program on inputs A;
2. ``in_place``: copy inputs B into the same input tensors and call again (a result cached
   by the inputs' addresses comes back stale);
3. ``kept``: the tensors the first call returned, read again after the second (a runtime
   that returns its static output buffers overwrites them);
4. ``strided``: inputs B as non-contiguous views (every other element of a larger buffer;
   a runtime that reads an input's data pointer as contiguous scrambles them; refusing
   them, with an exception, is allowed);
5. ``other_weights``: a second module of the same architecture with other weights
   (seed 1), built by the implementation in the same process and called on A (a cache keyed
   by the architecture and the input specs hands back the first program);
6. ``artefact``: the ``.pt2`` the program reports as its artefact (``program.artefact``),
   loaded by a fresh Python process (impls/export_loader.py, as ``torch.export.load``,
   else as an AOTInductor package) and called on A: the file a deployment ships must
   compute what the program computed.

Each output is held to the error-ratio rule (checks.py) against the float64 oracle of its
inputs and weights; ``kept`` must equal what the first call returned bit for bit.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from conformance.areas.export.cases import _first_line, _outputs, set_tf32
from conformance.areas.export.catalogue import (
    EXAMPLE,
    MODELS,
    build,
    make_inputs,
    oracle,
    same_precision,
    to_tensors,
)
from conformance.areas.export.checks import _compare, _max_err
from conformance.harness.compare import exact
from conformance.harness.record import Record
from conformance.harness.registry import load_object

MODEL = "lstm"  # batch_first with (h0, c0): three inputs, three outputs


def _values(out: Any) -> list[dict[str, Any]]:
    return _outputs(out)


def _strided(t: torch.Tensor) -> torch.Tensor:
    """``t``'s values as a non-contiguous view (every other element of its last dim)."""
    wide = torch.zeros(*t.shape[:-1], 2 * t.shape[-1], dtype=t.dtype, device=t.device)
    view = wide[..., ::2]
    view.copy_(t)
    assert not view.is_contiguous()
    return view


def _artefact(path: str, args: list[torch.Tensor]) -> Any:
    from impls.export_loader import Refused, Served

    server = Served()
    try:
        try:
            server.load("export.saved", path)
        except Refused:
            server.load("aoti", path)
        return server(*args)
    finally:
        server.close()


def child(spec: str, dtype: str, device: str, a: list[np.ndarray], b: list[np.ndarray]
          ) -> dict[str, Any]:
    """Steps 1-6 of the module docstring; each step's outputs, or why it raised."""
    model = MODELS[MODEL]
    t = getattr(torch, dtype)
    fn = load_object(spec, "--impl export")
    set_tf32(False)
    out: dict[str, Any] = {}

    def step(name: str, call: Any) -> Any:
        try:
            with torch.no_grad():
                value = call()
            out[name] = _values(value)
            return value
        except ImportError:
            raise
        except Exception as exc:
            out[name] = _first_line(exc)
            return None

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = fn(build(model, t).to(device), tuple(to_tensors(a, t, device)), None)
    except ImportError as exc:
        return {"missing": f"{type(exc).__name__}: {str(exc)[:300]}"}
    except Exception as exc:
        return {"build_error": _first_line(exc)}
    xs = to_tensors(a, t, device)
    first = step("first", lambda: program(*xs))
    for x, v in zip(xs, to_tensors(b, t, device), strict=True):
        x.copy_(v)
    step("in_place", lambda: program(*xs))
    if first is not None:
        out["kept"] = _values(first)
    step("strided", lambda: program(*(_strided(x) for x in to_tensors(b, t, device))))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            other = fn(build(model, t, seed=1).to(device), tuple(to_tensors(a, t, device)), None)
        step("other_weights", lambda: other(*to_tensors(a, t, device)))
    except Exception as exc:
        out["other_weights"] = f"build: {_first_line(exc)}"
    path = getattr(program, "artefact", None)
    out["artefact_path"] = path
    if isinstance(path, str) and path.endswith(".pt2"):
        step("artefact", lambda: _artefact(path, to_tensors(a, t, device)))
    return out


def inputs(dtype: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    model = MODELS[MODEL]
    return make_inputs(model, *EXAMPLE, dtype), make_inputs(model, *EXAMPLE, dtype, seed=1)


def judge(record: Record, dtype: str, result: dict[str, Any], a: list[np.ndarray],
          b: list[np.ndarray]) -> None:
    """The verdicts of the module docstring on ``child``'s result."""
    model = MODELS[MODEL]
    t = getattr(torch, dtype)
    if "build_error" in result:
        record.require(exact("program builds", 1, 1, result["build_error"]))
    record.note(artefact=result.get("artefact_path"))
    weights = {0: build(model, t), 1: build(model, t, seed=1)}
    plan = [("first", a, 0), ("in_place", b, 0), ("strided", b, 0), ("other_weights", a, 1),
            ("artefact", a, 0)]
    for name, arrays, seed in plan:
        got = result.get(name)
        if got is None:
            continue
        label = {"first": "first call", "in_place": "new values in the same input tensors",
                 "strided": "non-contiguous inputs",
                 "other_weights": "a second module with other weights, same process",
                 "artefact": "its artefact, loaded by a fresh process"}[name]
        record.case(step=name)
        if isinstance(got, str):
            if name == "strided":  # a refusal of a layout it does not take is allowed
                record.note(strided_refused=got)
            else:
                record.require(exact(f"{label}: runs", 1, 1, got))
            continue
        module = weights[seed]
        ref = oracle(model, module, arrays)
        base = [max(_max_err(x[k], r) for x in same_precision(model, module, arrays, t))
                for k, r in enumerate(ref)]
        _compare(record, model, got, ref, base, dtype, "plain baseline", prefix=f"{label}: ")
    kept, first = result.get("kept"), result.get("first")
    if isinstance(kept, list) and isinstance(first, list):
        changed = sum(int(not np.array_equal(k["values"], f["values"], equal_nan=True))
                      for k, f in zip(kept, first, strict=True))
        record.require(exact("the first call's outputs unchanged by the second call", changed,
                             len(first), "a later call overwrote tensors an earlier call "
                             "returned" if changed else ""))
