"""Known-bad dependency pairs, detected at start-up by tiny probes.

Each probe turns into a capability tag that implementations can require
(``conformance_requires``); when a probe fails, the tag is absent and the reason (with
the fix) is what the report shows for every case that needed it, instead of hundreds of
identical failures.

- ``triton-interpreter``: Triton's CPU interpreter runs a small kernel. It does not on
  triton < 3.7 with numpy >= 2.4 (triton-lang/triton#9171: the interpreter calls ``int()``
  on a one-element array, which numpy 2.4 turned from a deprecation into a TypeError).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

from conformance.harness.versions import installed_version

PROBED_TAGS = ("triton-interpreter",)
TRITON_NUMPY_LINK = "https://github.com/triton-lang/triton/issues/9171"


def interpreter_in_use() -> bool:
    """Our Triton kernels run interpreted where CUDA is absent (or when asked to)."""
    import torch

    return os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available()


def _triton_advice() -> str:
    triton_v, numpy_v = installed_version("triton"), installed_version("numpy")
    from packaging.version import Version

    if triton_v and numpy_v and Version(triton_v) < Version("3.7") \
            and Version(numpy_v) >= Version("2.4"):
        return (f"triton {triton_v}'s interpreter does not work with numpy {numpy_v} "
                f"({TRITON_NUMPY_LINK}); fix: pip install \"numpy<2.4\" "
                f"(or a torch whose triton is >= 3.7)")
    return f"triton {triton_v} with numpy {numpy_v}"


def probe_triton_interpreter() -> str | None:
    """None if the interpreter runs the probe kernel correctly, else why not (one line)."""
    with warnings.catch_warnings():  # numpy < 2.4 warns where 2.4 raises: keep stderr clean
        warnings.simplefilter("ignore")
        return _run_triton_probe()


def _run_triton_probe() -> str | None:
    try:
        import torch
        from triton.runtime.interpreter import InterpretedFunction

        from conformance.harness.probes.triton_kernel import loop_sum

        kernel = InterpretedFunction(loop_sum)
        x = torch.arange(3 * 16, dtype=torch.float32)
        out = torch.empty(16, dtype=torch.float32)
        kernel[(1,)](x, out, 3, BLOCK=16)
        expected = x.view(3, 16).sum(0)
        if not torch.equal(out, expected):
            return (f"Triton's interpreter computed a wrong result in the start-up probe "
                    f"({_triton_advice()})")
    except Exception as exc:  # any failure means the interpreter cannot be used
        text = " ".join(str(exc).split())[:160]
        return (f"Triton's interpreter fails the start-up probe: {type(exc).__name__}: "
                f"{text}; {_triton_advice()}")
    return None


CUTE_ENV = "CONFORMANCE_CUTE_DSL"  # the import probe's answer, for the workers and children


def _cute_cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "torch-conformance" / "cute-dsl-probe.json"


def _cute_key(spec: Any) -> str:
    """The installation the answer is for: the interpreter and every cutlass package
    folder's __init__.py and cute/__init__.py (path, size, mtime)."""
    parts = [sys.executable, sys.version]
    for loc in sorted(spec.submodule_search_locations or []):
        for f in (Path(loc) / "__init__.py", Path(loc) / "cute" / "__init__.py"):
            try:
                st = f.stat()
                parts.append(f"{f}:{st.st_size}:{st.st_mtime_ns}")
            except OSError:
                parts.append(f"{f}:absent")
    return "|".join(parts)


def _cached_cute(key: str) -> str | None:
    """The cached answer ("" for "it imports"), None if none."""
    try:
        return json.loads(_cute_cache_file().read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None


def _cache_cute(key: str, why: str | None) -> None:
    path = _cute_cache_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({key: why or ""}))
        os.replace(tmp, path)
    except OSError:  # an unwritable home: the next process imports again
        pass


def probe_cute_dsl() -> str | None:
    """None when ``import cutlass.cute`` gives the real module, else why not (one line).
    A ``cutlass`` folder alone is not enough: nvidia-cutlass-dsl without its libs-core
    package leaves a namespace ``cutlass`` whose ``cute`` imports as an empty namespace
    (every CuTe DSL kernel would then fail). The import costs about 1 s, so the answer
    is cached per installation (the interpreter and the package's files, in
    ~/.cache/torch-conformance) and handed to xdist workers and isolation children in
    ``CONFORMANCE_CUTE_DSL``."""
    known = os.environ.get(CUTE_ENV)
    if known:
        return None if known == "ok" else known
    spec = importlib.util.find_spec("cutlass")
    if spec is None:
        why: str | None = "package cutlass is not installed (pip install -e '.[cute]')"
    else:
        key = _cute_key(spec)
        cached = _cached_cute(key)
        if cached is not None:
            why = cached or None
        else:
            why = _import_cute()
            _cache_cute(key, why)
    os.environ[CUTE_ENV] = "ok" if why is None else why
    return why


def _import_cute() -> str | None:
    try:
        cute = importlib.import_module("cutlass.cute")
    except Exception as exc:  # any failure means the DSL cannot be used
        text = " ".join(str(exc).split())[:160]
        return (f"cutlass is installed but cutlass.cute does not import ({type(exc).__name__}: "
                f"{text}); nvidia-cutlass-dsl-libs-core holds it (pip install -e '.[cute]')")
    if getattr(cute, "__file__", None) is None:
        return ("cutlass.cute imports as an empty namespace (nvidia-cutlass-dsl without its "
                "libs-core package: pip install -e '.[cute]')")
    return None


def probe_tags() -> tuple[set[str], dict[str, str]]:
    """(tags present, {absent tag: why}) for the dependency probes."""
    present: set[str] = set()
    absent: dict[str, str] = {}
    if importlib.util.find_spec("triton") is None:
        absent["triton-interpreter"] = "triton is not installed (pip install triton)"
    elif interpreter_in_use():
        # as the adapter does (impls/attention/triton_fa.py): Triton reads TRITON_INTERPRET
        # when it is first imported, and its language library must be the interpreted one
        os.environ.setdefault("TRITON_INTERPRET", "1")
        problem = probe_triton_interpreter()
        if problem is None:
            present.add("triton-interpreter")
        else:
            absent["triton-interpreter"] = problem
    else:
        absent["triton-interpreter"] = "CUDA is present: Triton compiles, no interpreter"
    return present, absent
