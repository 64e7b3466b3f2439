"""A session's memo of costly, deterministic reference computations, shared by the xdist
workers through files in one private temporary directory.

Several implementations of an area are checked on the same case (the attention catalogue:
flex.eager, flex.compiled, sdpa.math and sdpa.flash_cpu, each with and without lse), and
the float64 oracle of a case does not depend on the implementation. Keys are content
addresses: a hash of every input byte (values, dtype, shape, device) and every parameter,
so a hit returns exactly what the computation would have returned, whatever test asked
first and on whichever worker. The directory lives for one session: the controller creates
it (``start``), hands it to the workers (``attach``) and removes it at exit (``stop``).
Without a session (a library call, a project test) nothing is stored.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import torch

T = TypeVar("T")
MAX_BYTES = 1 << 30  # per process; past it, results are computed and not stored

_dir: Path | None = None
_owned = False
_outer: list[tuple[Path | None, bool]] = []  # sessions run inside a session (pytester)
_written = 0
stats = {"hits": 0, "misses": 0}


def start() -> str:
    """Create the session's directory (controller, or a run without xdist)."""
    global _dir, _owned
    _outer.append((_dir, _owned))
    _dir, _owned = Path(tempfile.mkdtemp(prefix="conformance-memo-")), True
    return str(_dir)


def attach(path: str | None) -> None:
    """Use the controller's directory (an xdist worker)."""
    global _dir, _owned
    _outer.append((_dir, _owned))
    _dir, _owned = (Path(path) if path else None), False


def directory() -> str | None:
    return None if _dir is None else str(_dir)


def stop() -> None:
    """End this session's use; the process that created the directory removes it."""
    global _dir, _owned
    if _dir is not None and _owned:
        shutil.rmtree(_dir, ignore_errors=True)
    _dir, _owned = _outer.pop() if _outer else (None, False)


def active() -> bool:
    return _dir is not None and _dir.is_dir()


def key(*parts: Any) -> str:
    """The content address of ``parts``: tensors and arrays by dtype, shape, device and
    every byte; None, numbers and strings by their repr."""
    h = hashlib.blake2b(digest_size=20)
    for part in parts:
        if isinstance(part, torch.Tensor):
            t = part.detach()
            h.update(f"tensor {t.dtype} {tuple(t.shape)} {t.device}|".encode())
            flat = t.contiguous().reshape(-1).cpu()
            if flat.numel():
                h.update(flat.view(torch.uint8).numpy().data)
        elif isinstance(part, np.ndarray):
            a = np.ascontiguousarray(part)
            h.update(f"array {a.dtype.str} {a.shape}|".encode())
            h.update(a.view(np.uint8).data)
        else:
            h.update(f"{type(part).__name__} {part!r}|".encode())
    return h.hexdigest()


def get_or_compute(address: str, compute: Callable[[], T]) -> T:
    """``compute()``, or what it returned for the same address earlier in the session."""
    global _written
    if not active():
        return compute()
    path = _dir / f"{address}.pkl"  # type: ignore[operator]
    try:
        with path.open("rb") as f:
            value = pickle.load(f)
        stats["hits"] += 1
        return value
    except (OSError, EOFError, pickle.UnpicklingError):
        pass
    stats["misses"] += 1
    value = compute()
    if _written < MAX_BYTES:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        fd, tmp = tempfile.mkstemp(dir=_dir, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, path)  # atomic: a reader sees a whole file or none
            _written += len(data)
        except OSError:
            Path(tmp).unlink(missing_ok=True)
    return value
