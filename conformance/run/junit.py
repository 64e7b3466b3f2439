"""The run in pytest's JUnit XML (``--junitxml``, or ``DIR/junit.xml`` with ``--report DIR``).

pytest writes the file; this module adds what a CI reading it needs:

- one skipped test case per collected test that never ran (not-run), so that the XML counts
  every collected test as the report does;
- the test suite named ``torch-conformance[<device> <GPU name>]``, with properties: the
  verdict and the collected count (``conformance_verdict``, ``conformance_collected``), the
  device, its name, index, UUID and PCI address, the driver, torch (and CUDA/HIP), the
  suite's version and commit, the profile, seed, --strict and the must-pass count;
- every test case named with its device (``[cuda:0] test_x[...]``, classname alike), with
  an ``outcome`` property (the report's: passed, failed, expected-fail, unsupported,
  skipped, not-run, crashed, ...), and its ``<skipped>`` / ``<failure>`` / ``<error>``
  typed by that outcome: ``<skipped type="expected-fail">`` and ``<skipped
  type="unsupported">`` are told apart in the XML itself.

The rewrite runs after pytest wrote the file and before the report's SHA256SUMS
(``pytest_unconfigure``); if it fails, pytest's file stays as it was.
"""

from __future__ import annotations

import os
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from conformance.harness.outcomes import NOT_RUN_TAG
from conformance.harness.runstate import STATE

ACCOUNTING = "torch-conformance-accounting"  # the controller's Accounting plugin
PLUGIN = "torch-conformance-junit"
PROBLEM_TYPES = ("failed", "error", "crashed", "timed-out", "unexpected-pass")


def _logxml(config: pytest.Config) -> Any:
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - a pytest without it writes no XML of ours
        return None
    return config.stash.get(xml_key, None)


def add_verdict(config: pytest.Config, verdict: str, collected: int) -> None:
    """The verdict and count as suite properties; the rest after pytest wrote the file."""
    xml = _logxml(config)
    if xml is None:
        return
    xml.add_global_property("conformance_verdict", verdict)
    xml.add_global_property("conformance_collected", str(collected))
    if not config.pluginmanager.has_plugin(PLUGIN):
        config.pluginmanager.register(_Rewrite(Path(xml.logfile)), PLUGIN)


def add_not_run(config: pytest.Config, entries: list[Any]) -> None:
    """One skipped case per test that never reported (not-run), with its reason."""
    xml = _logxml(config)
    if xml is None:
        return
    for entry in entries:
        path = entry.nodeid.split("::", 1)[0]
        for when, outcome, longrepr in (
                ("setup", "skipped", (path, 0, f"Skipped: {NOT_RUN_TAG} {entry.reason}")),
                ("teardown", "passed", None)):
            xml.pytest_runtest_logreport(pytest.TestReport(
                nodeid=entry.nodeid, location=(path, None, entry.nodeid), keywords={},
                outcome=outcome, longrepr=longrepr, when=when))


class _Rewrite:
    """Registered once the verdict is known; rewrites pytest's file at unconfigure."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @pytest.hookimpl(tryfirst=True)  # before the report's SHA256SUMS (trylast)
    def pytest_unconfigure(self, config: pytest.Config) -> None:
        accounting = config.pluginmanager.get_plugin(ACCOUNTING)
        report = getattr(accounting, "report", None)
        if report is None or not self.path.is_file():
            return
        try:
            rewrite_file(self.path, report, _device(config, report),
                         getattr(config.option, "junitprefix", None))
        except Exception as exc:  # pytest's file stands
            print(f"torch-conformance: {self.path} left as pytest wrote it: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)


def _device(config: pytest.Config, report: dict[str, Any]) -> dict[str, Any]:
    """The report's device (its environment), or the run's, probed, without --report."""
    device = dict((report.get("environment") or {}).get("device") or {})
    if device:
        gpus = report["environment"].get("gpus")
        if gpus:  # --device=cuda with xdist workers spread over GPUs
            device["label"] = (f"{device['requested_kind']}:"
                               f"{'+'.join(str(g['index']) for g in gpus)}")
        return device
    info = config.stash[STATE].device
    device = {"torch_device": info.torch_device, "name": info.name,
              "matrix_key": info.matrix_key, "index": info.index}
    if info.index is not None:
        from conformance.harness.gpu import identity

        device.update({k: v for k, v in identity(info.kind, info.index).items()
                       if k in ("uuid", "pci_bus_id", "driver_version")})
    return device


def suite_properties(report: dict[str, Any], device: dict[str, Any]) -> dict[str, str]:
    """The test suite's properties beyond the verdict (None values left out)."""
    env = report.get("environment") or {}
    run = report.get("run") or {}
    suite = report.get("suite") or {}
    must = report.get("must_pass") or {}
    values = {
        "device": device.get("label") or device.get("torch_device"),
        "device_name": device.get("name"),
        "matrix_key": device.get("matrix_key"),
        "gpu_index": device.get("index"),
        "gpu_uuid": device.get("uuid"),
        "gpu_pci_bus_id": device.get("pci_bus_id"),
        "driver": device.get("driver_version") or env.get("cuda_driver"),
        "torch": env.get("torch") or _torch_version(),
        "cuda": env.get("cuda"),
        "hip": env.get("hip"),
        "suite_version": suite.get("version"),
        "suite_commit": suite.get("commit"),
        "profile": run.get("profile"),
        "seed": run.get("seed"),
        "strict": run.get("strict"),
        "must_pass": (f"{must['passed']}/{must['required']}"
                      if "passed" in must and "required" in must else None),
        "exit_status": report.get("exit_status"),
    }
    return {k: str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in values.items() if v is not None}


def _torch_version() -> str | None:
    torch = sys.modules.get("torch")
    return getattr(torch, "__version__", None)


def case_key(nodeid: str, prefix: str | None = None) -> tuple[str, str]:
    """(classname, name) of a test id as pytest's junitxml writes them."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join([*([prefix] if prefix else []), *names[:-1]]), names[-1]


def _xml_outcome(case: ET.Element) -> str:
    for tag, outcome in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
        if case.find(tag) is not None:
            return outcome
    return "passed"


INTERNAL = "conformance_"  # user properties the harness passes between processes


def _case_properties(outcome: str, result: dict[str, Any] | None) -> list[tuple[str, str]]:
    """A test case's properties: its outcome, area, implementation and dtype."""
    props = [("outcome", outcome)]
    for key, name in (("area", "area"), ("impl", "implementation"), ("dtype", "dtype")):
        if result and result.get(key):
            props.append((name, str(result[key])))
    return props


def rewrite(root: ET.Element, report: dict[str, Any], device: dict[str, Any],
            prefix: str | None = None) -> None:
    """Name, properties and outcome types, in place (``root``: <testsuites> or <testsuite>)."""
    run_device = device.get("label") or device.get("torch_device") or "?"
    results = {case_key(r["nodeid"], prefix): r for r in report.get("results", ())}
    if root.tag == "testsuites":
        root.set("name", "torch-conformance")
    for suite in root.iter("testsuite"):
        name = device.get("name")
        suite.set("name", f"torch-conformance[{run_device}{' ' + name if name else ''}]")
        props = suite.find("properties")
        if props is None:
            props = ET.Element("properties")
            suite.insert(0, props)
        have = {p.get("name") for p in props}
        for key, value in suite_properties(report, device).items():
            if key not in have:
                props.append(ET.Element("property", name=key, value=value))
        for case in suite.iter("testcase"):
            result = results.get((case.get("classname", ""), case.get("name", "")))
            outcome = result["outcome"] if result else _xml_outcome(case)
            where = (result or {}).get("device") or run_device
            for attr in ("classname", "name"):
                case.set(attr, f"[{where}] {case.get(attr, '')}")
            cprops = case.find("properties")
            if cprops is None:
                cprops = ET.Element("properties")
                case.insert(0, cprops)
            for prop in [p for p in cprops if (p.get("name") or "").startswith(INTERNAL)]:
                cprops.remove(prop)  # the harness's own records: report.json has them
            for i, (key, value) in enumerate(_case_properties(outcome, result)):
                cprops.insert(i, ET.Element("property", name=key, value=value))
            for tag in ("skipped", "failure", "error"):
                for node in case.findall(tag):
                    if tag == "skipped" or outcome in PROBLEM_TYPES:
                        node.set("type", outcome)


def rewrite_file(path: Path, report: dict[str, Any], device: dict[str, Any],
                 prefix: str | None = None) -> None:
    """Rewrite pytest's junit.xml at ``path`` (atomically: a temporary file, renamed)."""
    tree = ET.parse(path)
    rewrite(tree.getroot(), report, device, prefix)
    tmp = path.with_name(path.name + ".tmp")
    tree.write(tmp, encoding="utf-8", xml_declaration=True)
    os.replace(tmp, path)
