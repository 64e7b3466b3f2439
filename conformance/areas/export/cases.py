"""The child side of a round trip (run by the isolation runner, so that a program that
crashes at some size ends the child, not the session): build the model, hand it to the
implementation with the variant's dynamic shapes, run the program and eager at every size.
Verdicts are the parent's (checks.py); this returns plain data.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import numpy as np
import torch
from torch.export import Dim

from conformance.areas.export.catalogue import MAX_BATCH, MAX_SEQ, MODELS, Model, build, to_tensors
from conformance.harness.registry import load_object
from conformance.harness.tensors import exact_numpy

VARIANTS = ("static", "batch", "seq", "auto")


def dynamic_shapes(model: Model, variant: str) -> dict[str, Any] | None:
    """The ``dynamic_shapes`` a variant asks for: none, a named batch or seq ``Dim`` with
    the largest size the area runs as its max, or ``Dim.AUTO`` on both."""
    if variant == "static":
        return None
    spec: dict[str, dict[int, Any]] = {name: {} for name in model.inputs}
    if variant in ("batch", "auto"):
        dim = Dim.AUTO if variant == "auto" else Dim("batch", min=1, max=MAX_BATCH)
        for name, i in model.dims("batch").items():
            spec[name][i] = dim
    if variant in ("seq", "auto"):
        dim = Dim.AUTO if variant == "auto" else Dim("seq", min=1, max=MAX_SEQ)
        for name, i in model.dims("seq").items():
            spec[name][i] = dim
    return {k: (v or None) for k, v in spec.items()}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def _outputs(out: Any) -> list[dict[str, Any]]:
    items = out if isinstance(out, (tuple, list)) else (out,)
    return [{"dtype": str(t.dtype).removeprefix("torch."), "values": exact_numpy(t)}
            if isinstance(t, torch.Tensor) else {"dtype": type(t).__name__, "values": None}
            for t in items]


def roundtrip(spec: str, model_name: str, variant: str, dtype: str, device: str,
              sizes: list[tuple[int, int]], inputs: list[list[np.ndarray]],
              example: list[np.ndarray]) -> dict[str, Any]:
    """Build the program at ``example``, then run it and eager on each of ``inputs``."""
    model = MODELS[model_name]
    t = getattr(torch, dtype)
    fn = load_object(spec, "--impl export")
    module = build(model, t).to(device)
    args = tuple(to_tensors(example, t, device))
    result: dict[str, Any] = {"runs": []}
    start = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = fn(module, args, dynamic_shapes(model, variant))
    except ImportError as exc:  # a missing optional dependency: skipped, with the reason
        result["missing"] = f"{type(exc).__name__}: {str(exc)[:300]}"
        return result
    except Exception as exc:
        result["build_error"] = _first_line(exc)
        result["build_s"] = time.perf_counter() - start
        return result
    result["build_s"] = time.perf_counter() - start
    result["dynamic_dims"] = getattr(program, "dynamic_dims", None)
    result["artefact"] = getattr(program, "artefact", None)
    for size, arrays in zip(sizes, inputs, strict=True):
        run: dict[str, Any] = {"size": list(size)}
        xs = to_tensors(arrays, t, device)
        with torch.no_grad():
            eager = module(*xs)
        run["eager"] = [o["values"] for o in _outputs(eager)]
        start = time.perf_counter()
        try:
            with torch.no_grad():
                out = program(*xs)
            run["outputs"] = _outputs(out)
        except Exception as exc:
            run["refused"] = _first_line(exc)
        run["seconds"] = time.perf_counter() - start
        result["runs"].append(run)
    return result

