"""Controller-side accounting: every test's outcome and record, one outcome per collected
test (crashed workers, the rest not-run), the run's verdict and exit status, the journal,
the terminal summary (per implementation: how many checks ran, why the rest did not),
vacuous runs, the report."""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from conformance.harness.outcomes import BAD_OUTCOMES, RAN_OUTCOMES
from conformance.harness.runstate import RunState
from conformance.report import mustpass
from conformance.report.collect import CRASH_KEY, Collector, build_report
from conformance.report.manifest import write_manifest
from conformance.report.write import write_report
from conformance.run import journal, junit, startup, terminal
from conformance.run.watchdog import crash_file, read_crash, read_manifest, read_must_pass

EXIT_OF = {"PASS": 0, "FAIL": 1, "INCOMPLETE": 2}  # pytest's: tests failed / interrupted


_PROJECT = Path(__file__).resolve().parents[2]  # conformance/, oracles/, impls/ live here
SUITE_WARNING = "the suite's own code warned (a defect of torch-conformance):"


def _suite_file(filename: str) -> bool:
    """True for a file of the suite (conformance/, oracles/, impls/), not a user's."""
    try:
        rel = Path(filename).resolve().relative_to(_PROJECT)
    except ValueError:
        return False
    return rel.parts[0] in ("conformance", "oracles", "impls") and "tests" not in rel.parts


class MatrixWarning(UserWarning):
    """A matrix entry matched no collected test (a typo, or a test that was renamed)."""


class Accounting:
    """Controller-side: collects every test's outcome and record; prints and writes reports."""

    def __init__(self, config: pytest.Config, state: RunState, collector: Collector) -> None:
        self.config = config
        self.state = state
        self.collector = collector
        self._plots: tuple[threading.Thread, dict[str, Any]] | None = None
        self.recovered: Path | None = None
        self.journal: journal.Journal | None = None
        self.environment: dict[str, Any] | None = None
        self.report: dict[str, Any] | None = None
        self.write_error: str | None = None
        self.tracebacks_left_out = False  # past terminal.GROUP_FROM failures
        if state.report_dir is not None:  # the journal lives with the report
            self.recovered = journal.recover(state.report_dir)
            self.folder = state.report_dir / journal.FOLDER
            self._temporary = False
        else:  # the crash files and the manifest only
            self.folder = Path(tempfile.mkdtemp(prefix="torch-conformance-run-"))
            self._temporary = True

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.state.report_dir is None:
            return
        from conformance.harness.probe import environment

        self.environment = environment(self.state.device)
        self.journal = journal.Journal(self.folder)
        self.journal.write({"e": "header", "environment": self.environment,
                            "run": self.state.run_info()})

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        if self.recovered is None:
            return []
        return [f"torch-conformance: the previous run into {self.state.report_dir} died "
                f"before it finished: its report (from its journal) is in {self.recovered}"]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        result = yield
        if self.state.report_dir is not None:  # every outcome is in: draw the margin plots
            entries = self.collector.entries.values()
            self._plots = _draw_in_background([e.to_json() for e in entries])
        return result

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.collector.add(report)
        if self.journal is not None:
            self.journal.report(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_handlecrashitem(self, crashitem: str, report: Any, sched: Any) -> None:
        """xdist lost the worker running ``crashitem``: what its crash file says (a signal
        or the watchdog, with the stack) goes into the report, which xdist then logs."""
        worker = getattr(getattr(report, "node", None), "gateway", None)
        crash = read_crash(crash_file(self.folder, worker.id)) if worker is not None else None
        if crash is None or crash["nodeid"] != crashitem:
            crash = {"outcome": "crashed", "stack": "",
                     "reason": f"crashed: {report.longrepr} (no crash file named the test)"}
        report.user_properties.append((CRASH_KEY, json.dumps(crash)))
        report.longrepr = f"{crash['reason']}\n{crash['stack']}"

    def _why_not_run(self, session: pytest.Session) -> str:
        if session.exitstatus == pytest.ExitCode.INTERRUPTED:
            return "the run was interrupted before it ran them"
        if self.config.getoption("conformance_time_budget", None):
            return (f"not started: --time-budget {self.config.getoption('conformance_time_budget')}"
                    " s was spent")
        return "the run ended before it ran them (--maxfail / -x, or its workers were lost)"

    def pytest_warning_recorded(self, warning_message: warnings.WarningMessage) -> None:
        text = None
        if issubclass(warning_message.category, MatrixWarning):
            text = str(warning_message.message)
        elif _suite_file(warning_message.filename):  # a defect of ours, never noise
            where = Path(warning_message.filename).relative_to(_PROJECT)
            text = (f"{SUITE_WARNING} {where}:{warning_message.lineno}: "
                    f"{warning_message.category.__name__}: {warning_message.message}")
        if text is not None and text not in self.collector.warnings:
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
        entries = self.collector.entries.values()
        counts = self.collector.counts()
        if entries and not lines and not counts["not-run"] and \
                not any(counts[o] for o in RAN_OUTCOMES):
            why: Counter[str] = Counter()
            for impls in by_area.values():
                for row in impls.values():
                    why.update(row["not_run"])
            reason, n = why.most_common(1)[0] if why else ("", 0)
            lines.append(f"nothing ran: all {len(entries)} collected tests were unsupported or "
                         f"skipped here (e.g. {n} {reason}): the run tested nothing (pass "
                         "--allow-empty to accept a run that tests nothing)")
        return lines

    @pytest.hookimpl(tryfirst=True)  # before junitxml writes its file
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.config.option.collectonly:
            self._close()
            return
        self.collector.collected = read_manifest(self.folder)
        not_run = [n for n in self.collector.collected if n not in self.collector.entries]
        self.collector.finalize(self._why_not_run(session))
        if startup.STOPPED_BY and startup.STOPPED_BY not in self.collector.warnings:
            self.collector.warnings.append(startup.STOPPED_BY)
        counts = self.collector.counts()
        self.tracebacks_left_out = terminal.quiet_tracebacks(
            self.config, sum(counts[o] for o in BAD_OUTCOMES))
        junit.add_not_run(self.config, [self.collector.entries[n] for n in not_run])
        # a shard may hold none of an implementation's tests: merge judges the whole run
        if self.vacuous() and session.exitstatus == 0 and self.state.shard is None:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if self.environment is None and self.state.report_dir is not None:
            from conformance.harness.probe import environment

            self.environment = environment(self.state.device)
        report = build_report(self.collector, self.environment or {}, self.state.run_info())
        report["vacuous"] = self.vacuous()
        self._must_pass(report)
        if report["vacuous"] and self.state.shard is None and report["verdict"] == "PASS":
            report["verdict"] = "FAIL"
        if session.exitstatus == pytest.ExitCode.INTERRUPTED and report["verdict"] == "PASS":
            report["verdict"] = "INCOMPLETE"  # stopped while collecting: nothing was judged
        if session.exitstatus == 0 and report["verdict"] != "PASS":
            session.exitstatus = EXIT_OF[report["verdict"]]
        report["exit_status"] = int(session.exitstatus)
        report["areas_without_implementations"] = self.areas_without_impls()
        self.report = report
        junit.add_verdict(self.config, report["verdict"], report["collected"])
        if self.state.report_dir is None:
            self._close()
            return
        plots = None
        if self._plots is not None:
            thread, box = self._plots
            thread.join()
            plots = box.get("svgs")  # None (drawn again, in the foreground) if it failed
        try:
            write_report(self.state.report_dir, report, plots=plots)
        except Exception as exc:  # the run's summary and failures still print; exit 3
            self.write_error = f"{type(exc).__name__}: {exc}"
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
        self._close()

    @pytest.hookimpl(trylast=True)  # after junitxml wrote DIR/junit.xml
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.report is not None and self.state.report_dir is not None \
                and self.write_error is None:
            write_manifest(self.state.report_dir)

    def _must_pass(self, report: dict[str, Any]) -> None:
        """The must-pass list's outcome; under --strict (not a shard: merge judges the whole
        run) a list not all passed makes the verdict FAIL."""
        mustpass.judge(report, read_must_pass(self.folder) or {})

    def _close(self) -> None:
        if self.journal is not None:
            self.journal.close(finished=True)
        if self._temporary:
            shutil.rmtree(self.folder, ignore_errors=True)

    def areas_without_impls(self) -> list[str]:
        return [a for a in self.state.matrix.areas if not self.state.registry.for_area(a)]

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        terminal.write_summary(self, terminalreporter)


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

