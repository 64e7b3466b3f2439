"""Running one isolated case, shared by the child process (``_isolate_child``), the
foreground CLI and the in-process mode: name resolution, exceptions as plain strings,
device selection and the device health probe. Imports torch only when asked to."""

from __future__ import annotations

import importlib
import pickle
import time
import traceback
from collections.abc import Callable
from typing import Any


def class_name(cls: type) -> str:
    """``module.qualname`` of a class (``builtins.IndexError``, ``torch.AcceleratorError``)."""
    return f"{cls.__module__}.{cls.__qualname__}"


def case_name(fn: Callable[..., Any] | str) -> str:
    """The ``module:qualname`` of a case; a ValueError for what a child cannot import."""
    if isinstance(fn, str):
        module, sep, qualname = fn.partition(":")
        if not sep or not module or not qualname or not all(
                part.isidentifier() for part in (*module.split("."), *qualname.split("."))):
            raise ValueError(f"not a module:qualname case name: {fn!r}")
        return fn
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", None)
    if not callable(fn) or not module or not qualname:
        raise ValueError(f"not a module-level function: {fn!r}")
    if "<lambda>" in qualname or "<locals>" in qualname:
        raise ValueError(f"a case must be a module-level function, not {qualname} "
                         f"(a lambda or a local function cannot be imported by the child)")
    if module == "__main__":
        raise ValueError(f"a case must live in an importable module, not __main__ ({qualname})")
    return f"{module}:{qualname}"


def resolve(name: str) -> Callable[..., Any]:
    """Import ``module:qualname`` and return the object it names."""
    module, _, qualname = case_name(name).partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{name} is not callable")
    return obj


def exception_fields(exc: BaseException, where: str = "") -> dict[str, Any]:
    """An exception as strings only (its class need not pickle nor exist in the parent)."""
    mro = tuple(class_name(c) for c in type(exc).__mro__ if c is not object)
    try:
        message = str(exc)
    except Exception as inner:  # a __str__ that raises
        message = f"<str() failed: {type(inner).__name__}: {inner}>"
    frames = traceback.extract_tb(exc.__traceback__)
    if not where and frames:
        last = frames[-1]
        where = f"{last.filename}:{last.lineno} in {last.name}"
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"kind": "raised", "exc_type": mro[0], "exc_mro": mro, "message": message,
            "where": where, "traceback": text}


def run_case(name: str, args: tuple[Any, ...], kwargs: dict[str, Any],
             *, pickled: bool) -> dict[str, Any]:
    """Run the case; a reply dict: kind "returned" (``value``, pickled to bytes when
    ``pickled``) or "raised" (the exception's strings), and ``seconds``."""
    start = time.perf_counter()
    try:
        value = resolve(name)(*args, **kwargs)
    except BaseException as exc:  # SystemExit is handled by the caller's process
        if isinstance(exc, SystemExit):
            raise
        reply = exception_fields(exc)
    else:
        reply = {"kind": "returned", "value": value}
        if pickled:
            try:
                reply["value"] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:
                reply = exception_fields(exc, where="returning the result")
    reply["seconds"] = time.perf_counter() - start
    return reply


def select_device(device: str) -> None:
    """Make ``device`` (e.g. ``cuda:1``) the current device of its backend (cpu: nothing)."""
    import torch

    dev = torch.device(device)
    if dev.type == "cpu" or dev.index is None:
        return
    backend = getattr(torch, dev.type, None)
    set_device = getattr(backend, "set_device", None)
    if set_device is not None:
        set_device(dev.index)


def probe_device(device: str) -> str:
    """A tiny op and a synchronize on ``device``: "" when it works, else the error."""
    import torch

    try:
        dev = torch.device(device)
        x = torch.ones(4, device=dev).add_(1).sum()
        backend = getattr(torch, dev.type, None)
        sync = getattr(backend, "synchronize", None)
        if sync is not None and dev.type != "cpu":
            sync()
        if dev.type != "meta" and float(x.item()) != 8.0:
            return f"device probe on {device}: wrong result {x.item()!r}"
    except BaseException as exc:
        return f"device probe on {device} failed: {type(exc).__name__}: {exc}".strip()
    return ""
