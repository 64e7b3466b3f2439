"""Controller-side accounting: every test's outcome and record, the terminal summary
(per implementation: how many checks ran, why the rest did not), vacuous runs, the report."""

from __future__ import annotations

import threading
import warnings
from typing import Any

import pytest

from conformance.harness.outcomes import OUTCOMES
from conformance.harness.runstate import RunState
from conformance.report.collect import Collector, build_report, entries_to_narrow
from conformance.report.write import write_report

NOT_RUN_SHOWN = 5  # reasons listed per plugged-in implementation in the terminal summary


class MatrixWarning(UserWarning):
    """A matrix entry matched no collected test (a typo, or a test that was renamed)."""


class Accounting:
    """Controller-side: collects every test's outcome and record; prints and writes reports."""

    def __init__(self, config: pytest.Config, state: RunState, collector: Collector) -> None:
        self.config = config
        self.state = state
        self.collector = collector
        self._plots: tuple[threading.Thread, dict[str, Any]] | None = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        result = yield
        if self.state.report_dir is not None:  # every outcome is in: draw the margin plots
            entries = self.collector.entries.values()
            self._plots = _draw_in_background([e.to_json() for e in entries])
        return result

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.collector.add(report)

    def pytest_warning_recorded(self, warning_message: warnings.WarningMessage) -> None:
        if issubclass(warning_message.category, MatrixWarning):
            text = str(warning_message.message)
            if text not in self.collector.warnings:
                self.collector.warnings.append(text)

    def vacuous(self) -> list[str]:
        """One line per --impl / entry-point implementation that ran no check."""
        if self.config.option.conformance_allow_empty:
            return []
        by_area = self.collector.by_area()
        lines = []
        for impl in self.state.registry.all():
            if impl.origin == "builtin":
                continue
            row = by_area.get(impl.area, {}).get(impl.name)
            if row is not None and row["ran"]:
                continue
            why = "; ".join(f"{n} {reason}" for reason, n in (row or {}).get("not_run", {})
                            .items()) or "no test of its area was collected"
            lines.append(f"implementation {impl.name} ({impl.origin} {impl.area}={impl.spec}) "
                         f"ran no check: {why} (pass --allow-empty to accept a run that "
                         "tests nothing)")
        return lines

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        # a shard may hold none of an implementation's tests: merge judges the whole run
        if self.vacuous() and session.exitstatus == 0 and self.state.shard is None:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.state.report_dir is None:
            return
        from conformance.harness.probe import environment

        report = build_report(self.collector, environment(self.state.device),
                              self.state.run_info())
        report["vacuous"] = self.vacuous()
        report["areas_without_implementations"] = self.areas_without_impls()
        plots = None
        if self._plots is not None:
            thread, box = self._plots
            thread.join()
            plots = box.get("svgs")  # None (drawn again, in the foreground) if it failed
        write_report(self.state.report_dir, report, plots=plots)

    def areas_without_impls(self) -> list[str]:
        return [a for a in self.state.matrix.areas if not self.state.registry.for_area(a)]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        empty, vacuous = self.areas_without_impls(), self.vacuous()
        if not self.collector.entries and not empty and not vacuous:
            return
        tr.section("torch-conformance")
        for area in empty:
            tr.write_line(f"  {area:<8} no implementation registered"
                          + (" (--no-builtins)" if not self.state.include_builtins else ""))
        for line in vacuous:
            if self.state.shard is None:
                tr.write_line(f"ERROR: {line}", red=True)
            else:
                tr.write_line(f"note (this shard only; merge judges the run): {line}")
        if not self.collector.entries:
            return
        counts = self.collector.counts()
        tr.write_line(", ".join(f"{counts[o]} {o}" for o in OUTCOMES))
        plugged = {i.name for i in self.state.registry.all() if i.origin != "builtin"}
        for area, impls in sorted(self.collector.by_area().items()):
            for impl, row in sorted(impls.items()):
                margin = row["worst_margin"]
                shown = "-" if margin is None else f"{margin:.3g}"
                tr.write_line(
                    f"  {area:<8} {impl:<24} ran {row['ran']:>4}  passed {row['passed']:>4}  "
                    f"failed {row['failed'] + row['error']:>3}  "
                    f"xfail {row['expected-fail']:>3}  unsupported {row['unsupported']:>4}  "
                    f"skipped {row['skipped']:>3}  worst margin {shown}")
                if impl in plugged:  # a user's implementation: why the rest did not run
                    for reason, n in list(row["not_run"].items())[:NOT_RUN_SHOWN]:
                        tr.write_line(f"      not run: {n} {reason}")
        for label, (release, gate, n) in entries_to_narrow(self.collector.entries.values()).items():
            tr.write_line(f"fixed in {release}? matrix {label}: {n} expected "
                          f"failure{'s' if n > 1 else ''} passed past the releases it was "
                          f"measured on (counted as passed); narrow its versions to {gate}",
                          yellow=True)
        if self.state.report_dir is not None:
            tr.write_line(f"report: {self.state.report_dir / 'report.json'}, "
                          f"{self.state.report_dir / 'report.html'}, "
                          f"{self.state.report_dir / 'summary.md'}, {self.config.option.xmlpath}")


def _draw_in_background(results: list[dict[str, Any]]) -> tuple[threading.Thread, dict[str, Any]]:
    """Draw report.html's margin plots in a thread: under xdist it runs while the controller
    waits for the workers to exit (2 to 3 s), which it otherwise followed."""
    from conformance.report.plots import all_area_svgs

    box: dict[str, Any] = {}

    def draw() -> None:
        try:
            box["svgs"] = all_area_svgs(results)
        except Exception as exc:  # the foreground drawing reports it
            box["error"] = exc

    thread = threading.Thread(target=draw, name="conformance-plots", daemon=True)
    thread.start()
    return thread, box

