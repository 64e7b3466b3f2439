"""Per-test record of checks: margins for the report, uniform failure messages.

A test gets one ``Record`` (the ``record`` fixture). Hypothesis tests call ``case`` once per
example; the record keeps, per check name, the number of evaluations and the worst margin
with the case that produced it.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conformance.harness.compare import Measurement
from conformance.harness.expectations import CheckFailure


def _jsonable(value: Any) -> Any:
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value).removeprefix("torch.")


def reproduce_command(nodeid: str, args: list[str], path: str | Path | None = None,
                      impl_spec: str | None = None) -> str:
    """The shell command that reruns one test with the run's options, from any directory:
    the test by its file's absolute ``path`` (the item's; pytest finds the rootdir from it),
    an absolute --device-matrix, and ``PYTHONPATH=DIR`` first when the test's
    implementation (``impl_spec``) or an --impl module is not importable by a clean
    interpreter (one found through pytest's rootdir or the run's PYTHONPATH, e.g.
    ``planted.*`` from tests/)."""
    target = nodeid
    if path is not None and "::" in nodeid:
        target = f"{_resolved(str(path))}::{nodeid.split('::', 1)[1]}"
    args = [_absolute_matrix(a) for a in args]
    specs = [a.split("=", 2)[2] for a in args if a.startswith("--impl=") and a.count("=") >= 2]
    roots = import_roots([*specs, *([impl_spec] if impl_spec else [])])
    env = [f"PYTHONPATH={os.pathsep.join(roots)}"] if roots else []
    return " ".join([*map(shlex.quote, env), shlex.join(["pytest", target, *args])])


def _absolute_matrix(arg: str) -> str:
    if arg.startswith("--device-matrix="):
        return f"--device-matrix={_resolved(arg.split('=', 1)[1])}"
    return arg


_CLEAN: dict[str, bool] = {}  # top-level module -> a clean interpreter imports this one


def import_roots(specs: list[str]) -> list[str]:
    """The directories to put on PYTHONPATH so that a clean interpreter (no PYTHONPATH, no
    working directory on sys.path) imports the modules of ``specs`` (``module:attr``) as
    this process does: the folder above each top-level package it would not find."""
    tops = {s.split(":", 1)[0].split(".")[0] for s in specs}
    mine = {t: _origin(t) for t in tops}
    unknown = sorted(t for t in tops if t not in _CLEAN and mine[t] is not None)
    if unknown:
        _CLEAN.update(_clean_finds(unknown, mine))
    roots = []
    for top in sorted(tops):
        origin = mine[top]
        if origin is None or _CLEAN.get(top, True):
            continue
        root = str(Path(origin).parent.parent if Path(origin).name == "__init__.py"
                   else Path(origin).parent)
        if root not in roots:
            roots.append(root)
    return roots


def _origin(top: str) -> str | None:
    """Where this process imports top-level module ``top`` from (None: unknown)."""
    module = sys.modules.get(top)
    if module is None:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return None
        return _resolved(spec.origin) if spec and spec.origin else None
    path = getattr(module, "__file__", None)
    return _resolved(path) if path else None


def _resolved(path: str) -> str:
    """``path`` made absolute with its links resolved; an absolute path is resolved once
    (every collected test's reproducer names its file and the run's matrix)."""
    return _resolved_absolute(path) if os.path.isabs(path) else str(Path(path).resolve())


@functools.lru_cache(maxsize=4096)
def _resolved_absolute(path: str) -> str:
    return str(Path(path).resolve())


_FIND = """import importlib.util, json, pathlib, sys
sys.path[:] = [p for p in sys.path if p not in ("", ".")]
out = {}
for name in json.loads(sys.argv[1]):
    try:
        spec = importlib.util.find_spec(name)
        out[name] = str(pathlib.Path(spec.origin).resolve()) if spec and spec.origin else None
    except Exception:
        out[name] = None
print(json.dumps(out))
"""


def _clean_finds(tops: list[str], mine: dict[str, str | None]) -> dict[str, bool]:
    """Whether a clean interpreter (``python -E``, outside any project) finds each module
    where this process does; False where it cannot tell."""
    try:
        proc = subprocess.run([sys.executable, "-E", "-c", _FIND, json.dumps(tops)],
                              cwd=tempfile.gettempdir(), capture_output=True, text=True,
                              timeout=60, check=True)
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return {t: False for t in tops}
    return {t: found.get(t) is not None and found.get(t) == mine[t] for t in tops}


@dataclass
class CheckSummary:
    name: str
    evaluations: int = 0
    failures: int = 0
    worst_ratio: float = -1.0
    measured: float = 0.0
    bound: float = 0.0
    exact: bool = False
    case: dict[str, Any] = field(default_factory=dict)
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "evaluations": self.evaluations,
            "failures": self.failures,
            "exact": self.exact,
            "measured": self.measured,
            "bound": self.bound,
            "margin": None if self.exact else self.worst_ratio,
            "case": self.case,
            "detail": self.detail,
        }


class Record:
    """Collects the checks of one test; raises a uniform CheckFailure (an AssertionError)
    on a failed check."""

    def __init__(
        self,
        *,
        nodeid: str,
        area: str,
        impl: str,
        device: str,
        dtype: str | None,
        repro_args: list[str],
        tolerance_factor: float = 1.0,
        tolerance_reasons: tuple[str, ...] = (),
        path: str | Path | None = None,
        impl_spec: str | None = None,
    ) -> None:
        self.nodeid = nodeid
        self.path = path  # the test file (the reproduce line names it absolutely)
        self.impl_spec = impl_spec
        self.area = area
        self.impl = impl
        self.device = device
        self.dtype = dtype
        self.repro_args = repro_args
        self.tolerance_factor = tolerance_factor
        self.tolerance_reasons = tolerance_reasons
        self.params: dict[str, Any] = {}
        self.checks: dict[str, CheckSummary] = {}
        self.notes: dict[str, Any] = {}
        self.failure: str | None = None
        # --repro-dir: writes a standalone script for a failure, returns its path
        self.on_failure: Callable[[Record, str, Measurement | None], str | None] | None = None
        self.repro_script: str | None = None

    @property
    def reproduce(self) -> str:
        return reproduce_command(self.nodeid, self.repro_args, self.path, self.impl_spec)

    def case(self, **params: Any) -> None:
        """Set the parameters of the case being checked (replaces the previous case)."""
        self.params = {k: _jsonable(v) for k, v in params.items()}

    def note(self, **notes: Any) -> None:
        """Attach facts to the report (e.g. which BLAS served the call)."""
        self.notes.update({k: _jsonable(v) for k, v in notes.items()})

    def require(self, m: Measurement) -> Measurement:
        """Record ``m`` (loosened by the matrix's tolerance factor) and fail if it is out."""
        __tracebackhide__ = True
        m = m.scaled(self.tolerance_factor)
        summary = self.checks.setdefault(m.name, CheckSummary(m.name, exact=m.exact))
        summary.evaluations += 1
        ratio = m.ratio
        if ratio > summary.worst_ratio or not m.ok:
            summary.worst_ratio = ratio
            summary.measured, summary.bound = m.measured, m.bound
            summary.case = dict(self.params)
            summary.detail = m.detail
        if not m.ok:
            summary.failures += 1
            self.failure = self.message(m)
            self.write_repro(self.failure, m)
            raise CheckFailure(self.failure, m.name)
        return m

    def write_repro(self, message: str, m: Measurement | None) -> None:
        """With --repro-dir, the failure's standalone script (once per test); its path is
        appended to ``self.failure``."""
        if self.on_failure is None or self.repro_script is not None:
            return
        path = self.on_failure(self, message, m)
        if path:
            self.repro_script = path
            if self.failure is not None:
                self.failure += f"\n  standalone reproducer: {path}"

    def message(self, m: Measurement) -> str:
        if m.exact:
            head = f"{m.name}: {m.detail}"
        else:
            head = (f"{m.name}: error {m.measured:.4g} exceeds bound {m.bound:.4g} "
                    f"(ratio {m.ratio:.3g}); {m.detail}")
        return self.context(head)

    def context(self, head: str) -> str:
        """The uniform failure block: head line, impl/device/dtype, case, reproduce."""
        dtype = f" dtype={self.dtype}" if self.dtype else ""
        lines = [
            f"[{self.area}] {head}",
            f"  impl={self.impl} device={self.device}{dtype}",
            "  case: " + (", ".join(f"{k}={v}" for k, v in self.params.items()) or "(none)"),
        ]
        if self.tolerance_factor != 1.0:
            lines.append(f"  bound loosened x{self.tolerance_factor:g} by the matrix: "
                         + "; ".join(self.tolerance_reasons))
        lines.append(f"  reproduce: {self.reproduce}")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "area": self.area,
            "impl": self.impl,
            "device": self.device,
            "dtype": self.dtype,
            "tolerance_factor": self.tolerance_factor,
            "tolerance_reasons": list(self.tolerance_reasons),
            "checks": [c.to_json() for c in self.checks.values()],
            "notes": self.notes,
            "failure": self.failure,
            "reproduce": self.reproduce,
            "repro_script": self.repro_script,
        }
