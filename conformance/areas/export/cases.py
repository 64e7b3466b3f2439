"""The child side of a round trip (run by the isolation runner, so that a program that
crashes at some size ends the child, not the session): build the model, deep-copy it, hand
the original to the implementation with the variant's dynamic shapes, run the program and
eager at every size. Verdicts are the parent's (checks.py); this returns plain data.

Eager runs on the copy made before the implementation saw the module, so a round trip that
modifies the module it was given (swaps gate rows, folds weights, casts in place) cannot
change its own baseline; what it changed is reported (``mutated``) after the build and
again after the runs. TF32 is pinned off (``torch.backends.cuda.matmul.allow_tf32`` and
``torch.backends.cudnn.allow_tf32``; float32 matmul precision "highest"): the error-ratio
rule certifies float32 arithmetic, and cuDNN's RNNs and convolutions default to TF32 on
Ampere and later GPUs. ``tf32=True`` turns both on (test_tf32.py's bound names TF32).
"""

from __future__ import annotations

import copy
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


def set_tf32(enabled: bool) -> dict[str, Any]:
    """Turn TF32 on or off for float32 matmuls and cuDNN; returns the settings now in force."""
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    torch.set_float32_matmul_precision("high" if enabled else "highest")
    return {"cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision()}


def _fingerprint(module: torch.nn.Module) -> dict[str, Any]:
    """What a module computes with: every tensor of its state (dtype, shape, device, bytes),
    its submodules' types and its training flags."""
    state = {k: (str(v.dtype), tuple(v.shape), v.device.type,
                 v.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
                 if v.numel() else b"")
             for k, v in module.state_dict(keep_vars=True).items()}
    parts = {name or "(root)": (type(m).__qualname__, m.training)
             for name, m in module.named_modules()}
    return {"state": state, "modules": parts}


def mutations(before: dict[str, Any], module: torch.nn.Module) -> list[str]:
    """What changed in ``module`` since its ``_fingerprint`` ``before``."""
    now = _fingerprint(module)
    out = []
    for key in sorted(set(before["state"]) | set(now["state"])):
        a, b = before["state"].get(key), now["state"].get(key)
        if a is None or b is None:
            out.append(f"{key} {'added' if a is None else 'removed'}")
        elif a != b:
            what = [n for n, x, y in zip(("dtype", "shape", "device", "values"), a, b,
                                         strict=True) if x != y]
            out.append(f"{key}: {', '.join(what)} changed")
    for name in sorted(set(before["modules"]) | set(now["modules"])):
        if before["modules"].get(name) != now["modules"].get(name):
            out.append(f"submodule {name}: {before['modules'].get(name)} -> "
                       f"{now['modules'].get(name)}")
    return out


def roundtrip(spec: str, model_name: str, variant: str, dtype: str, device: str,
              sizes: list[tuple[int, int]], inputs: list[list[np.ndarray]],
              example: list[np.ndarray], tf32: bool = False) -> dict[str, Any]:
    """Build the program at ``example``, then run it and eager on each of ``inputs``."""
    model = MODELS[model_name]
    t = getattr(torch, dtype)
    fn = load_object(spec, "--impl export")
    result: dict[str, Any] = {"runs": [], "tf32": set_tf32(tf32)}
    module = build(model, t).to(device)
    reference = copy.deepcopy(module)  # eager's, before the implementation sees the module
    before = _fingerprint(module)
    args = tuple(to_tensors(example, t, device))
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
    result["trace"] = getattr(program, "trace", None)
    result["delegated"] = getattr(program, "delegated", None)  # ExecuTorch: ops per backend
    result["mutated"] = mutations(before, module)
    for size, arrays in zip(sizes, inputs, strict=True):
        run: dict[str, Any] = {"size": list(size)}
        xs = to_tensors(arrays, t, device)
        with torch.no_grad():
            eager = reference(*xs)
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
    result["mutated"] = result["mutated"] or mutations(before, module)
    return result

