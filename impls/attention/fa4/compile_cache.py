"""A content-addressed cache of kernel compile results (registers, shared memory, spills),
so that CI recompiles only the kernels whose inputs changed.

A compile is a pure function of its inputs: the kernel sources (every ``.py`` under
``impls/attention/fa4/`` that a kernel is built from), the variant, the kernel kind, the
architecture and the pinned compiler (nvidia-cutlass-dsl and its libraries). The key hashes
all of them; a change to any source file or to the compiler's version misses for every
variant. A hit returns what an earlier compile of exactly these inputs measured, on any
machine; the test that reads it still checks it against the committed table.

Location: ``$FA4_COMPILE_CACHE`` if set, else ``~/.cache/torch-conformance/fa4-compile``.
``FA4_COMPILE_CACHE=off`` disables it (every call compiles).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

FA4 = Path(__file__).resolve().parent
_COMPILER = ("nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-core")
# the numerics model and the torch adapters do not enter a kernel's compile
_NOT_KERNEL = {"model.py", "compile_cache.py", "catalogue_map.py"}


def cache_dir() -> Path | None:
    """The cache folder, or None when disabled."""
    where = os.environ.get("FA4_COMPILE_CACHE", "")
    if where.lower() == "off":
        return None
    return Path(where) if where else Path.home() / ".cache" / "torch-conformance" / "fa4-compile"


@cache
def sources_digest() -> str:
    """SHA-256 over the kernel sources (path and bytes) and the compiler's versions."""
    h = hashlib.sha256()
    for path in sorted(FA4.rglob("*.py")):
        if path.name in _NOT_KERNEL or "__pycache__" in path.parts:
            continue
        h.update(path.relative_to(FA4).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    for dist in _COMPILER:
        try:
            version = metadata.version(dist)
        except metadata.PackageNotFoundError:
            version = "absent"
        h.update(f"{dist}=={version}\0".encode())
    return h.hexdigest()


def key(arch: str, kernel: str, name: str) -> str:
    return hashlib.sha256(f"{sources_digest()}|{arch}|{kernel}|{name}".encode()).hexdigest()


def is_cached(arch: str, kernel: str, name: str) -> bool:
    """Whether a compile of exactly these inputs is recorded (reading it costs no compile)."""
    folder = cache_dir()
    return folder is not None and (folder / f"{key(arch, kernel, name)}.json").is_file()


def cached_compile(arch: str, kernel: str, name: str,
                   compile_fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """compile_fn()'s result for these inputs, from the cache when an identical compile was
    recorded; the result says which (``"cached": True``). Only JSON-serialisable results are
    stored; a failing compile is never stored."""
    folder = cache_dir()
    path = folder / f"{key(arch, kernel, name)}.json" if folder else None
    if path is not None and path.is_file():
        try:
            return {**json.loads(path.read_text()), "cached": True}
        except (OSError, ValueError):
            pass  # unreadable entry: compile again and overwrite it
    result = compile_fn()
    if path is not None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(result, sort_keys=True))
            tmp.replace(path)  # atomic: concurrent xdist workers never read half a file
        except (OSError, TypeError):
            pass  # read-only home or a result that is not JSON: the cache is an optimisation
    return {**result, "cached": False}
