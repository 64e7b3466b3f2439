"""Per-test record of checks: margins for the report, uniform failure messages.

A test gets one ``Record`` (the ``record`` fixture). Hypothesis tests call ``case`` once per
example; the record keeps, per check name, the number of evaluations and the worst margin
with the case that produced it.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
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


def reproduce_command(nodeid: str, args: list[str]) -> str:
    """The shell command that reruns one test with the run's options."""
    return shlex.join(["pytest", nodeid, *args])


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
    ) -> None:
        self.nodeid = nodeid
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
        return reproduce_command(self.nodeid, self.repro_args)

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
