"""``torch-conformance fleet``: one pytest run per GPU at once, a per-GPU table, the exit
status of the worst verdict; runs that die or hang are INCOMPLETE rows and leave no process
behind. GPUs are mocked for the usage errors; the end-to-end runs use ``--fake-devices``
(copies on --device=cpu) on a small selection of the special area."""

from __future__ import annotations

import json
import os
import subprocess
import time
import xml.etree.ElementTree as ET
from types import SimpleNamespace

import pytest
import torch

from conformance.cli import fleet
from conformance.cli.main import main
from conformance.report.manifest import verify

pytestmark = pytest.mark.harness_only

SELECTION = ["conformance/areas/special", "-q", "-k", "float32 and forward"]


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)


def _usage(capsys, *argv: str) -> str:
    assert main(["fleet", *argv]) == 4
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    return err


def test_usage_errors(tmp_path, capsys, two_gpus):
    out = str(tmp_path / "out")
    assert "--devices '0,x': give all or GPU indices" in _usage(capsys, out, "--devices", "0,x")
    assert "each index once" in _usage(capsys, out, "--devices", "1,1")
    assert "this host has 2 cuda devices (indices 0-1), not 2" in \
        _usage(capsys, out, "--devices", "0,2")
    for own in ("--device=cuda:1", "--report", "-n", "-n4", "--numprocesses=2"):
        assert "fleet sets --device, --report and -n" in _usage(capsys, out, "--", "-q", own)
    assert "--workers -1" in _usage(capsys, out, "--workers", "-1")
    assert "--timeout 0" in _usage(capsys, out, "--timeout", "0")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    assert "is not an empty directory" in _usage(capsys, str(tmp_path / "full"))
    assert not (tmp_path / "out").exists()  # a usage error writes nothing


def test_no_gpu_is_a_usage_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    if hasattr(torch, "xpu"):
        monkeypatch.setattr(torch.xpu, "is_available", lambda: False)
    assert "sees no GPU" in _usage(capsys, str(tmp_path / "out"))


def test_each_gpu_gets_its_own_run(tmp_path, two_gpus, monkeypatch):
    started = []

    class FakePopen:
        def __init__(self, cmd, **kwargs):
            started.append((cmd, kwargs))
            self.pid = 4242

    monkeypatch.setattr(fleet.subprocess, "Popen", FakePopen)
    rows = fleet.members(SimpleNamespace(fake_devices=0, devices="all"))
    assert [(m.label, m.device, m.index) for m in rows] == [("cuda-0", "cuda:0", 0),
                                                           ("cuda-1", "cuda:1", 1)]
    fleet.start(rows[1], tmp_path, ["--strict"], 2, {})
    cmd, kwargs = started[0]
    assert cmd[-5:] == ["--strict", "--device=cuda:1", f"--report={tmp_path / 'cuda-1'}",
                        "-n", "2"]
    assert kwargs["start_new_session"] is True  # its own process group
    assert [m.label for m in fleet.members(SimpleNamespace(fake_devices=0,
                                                           devices="1"))] == ["cuda-1"]


def test_verdicts_and_rows_without_a_report(tmp_path):
    def row(verdict: str) -> fleet.Member:
        m = fleet.Member("x", "cpu", None)
        m.verdict = verdict
        return m
    assert fleet.fleet_verdict([row("PASS"), row("PASS")]) == "PASS"
    assert fleet.fleet_verdict([row("PASS"), row("INCOMPLETE")]) == "INCOMPLETE"
    assert fleet.fleet_verdict([row("INCOMPLETE"), row("FAIL")]) == "FAIL"
    (tmp_path / "dead.log").write_text("collecting ...\nERROR: out of memory\n")
    dead = fleet.Member("dead", "cuda:3", 3, exit_code=-9, log="dead.log")
    fleet.judge(dead, tmp_path)
    assert (dead.verdict, dead.reason) == ("INCOMPLETE", "died by SIGKILL")
    quit_ = fleet.Member("dead", "cuda:3", 3, exit_code=3, log="dead.log")
    fleet.judge(quit_, tmp_path)
    assert quit_.verdict == "INCOMPLETE"
    assert quit_.reason == "exited with status 3 and wrote no report: ERROR: out of memory"


def test_a_fleet_of_two_fake_devices(tmp_path):
    """End to end: two runs at once, each its report; the table, JSON and index agree."""
    out = tmp_path / "fleet"
    assert main(["fleet", str(out), "--fake-devices", "2", "--workers", "0", "--",
                 *SELECTION]) == 0
    data = json.loads((out / "fleet.json").read_text())
    assert data["verdict"] == "PASS" and data["exit_status"] == 0
    rows = data["devices"]
    assert [r["label"] for r in rows] == ["fake-0", "fake-1"]
    for r in rows:
        assert r["verdict"] == "PASS" and r["reason"] == "" and r["exit_code"] == 0
        assert r["counts"]["passed"] > 0 and r["wall_s"] > 0
        assert r["cmd"][-4:-2] == ["--device=cpu", f"--report={out / r['label']}"]
        assert verify(out / r["label"])[1] == []
    table = (out / "fleet.md").read_text()
    assert "# torch-conformance fleet: PASS" in table
    assert sum(line.startswith("| fake-") for line in table.splitlines()) == 2
    assert 'href="fake-1/report.html"' in (out / "index.html").read_text()
    suites = ET.parse(out / "junit.xml").getroot().findall("testsuite")
    assert len(suites) == 2 and all(s.get("name").startswith("torch-conformance[cpu ")
                                    for s in suites)


def _gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize(("body", "options", "reason"), [
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", [], "died by SIGKILL"),
    ("import time\ntime.sleep(600)\n", ["--timeout", "3"], "hung: stopped after --timeout 3 s"),
])
def test_a_run_that_dies_or_hangs_is_incomplete(tmp_path, capsys, body, options, reason):
    (tmp_path / "test_bad.py").write_text(body)
    out = tmp_path / "fleet"
    assert main(["fleet", str(out), "--fake-devices", "1", "--workers", "0", *options,
                 "--", str(tmp_path / "test_bad.py"), "-q"]) == 2
    row = json.loads((out / "fleet.json").read_text())["devices"][0]
    assert row["verdict"] == "INCOMPLETE" and row["reason"] == reason
    assert _gone(row["pid"])  # its process group is gone: no orphans
    assert f"fake-0   INCOMPLETE  -  ({reason})" in capsys.readouterr().out


def test_a_refused_argument_is_a_usage_error(tmp_path, capsys):
    out = tmp_path / "fleet"
    err = _usage(capsys, str(out), "--fake-devices", "1", "--workers", "0", "--",
                 "--profile=nonsense", "conformance/areas/special")
    assert "every run refused its arguments" in err and "nonsense" in err


def test_children_leave_no_process_behind_on_interrupt(tmp_path):
    """Ctrl-C (KeyboardInterrupt) in the fleet stops every child's group; the rows say so."""
    (tmp_path / "test_slow.py").write_text("import time\ntime.sleep(600)\n")
    rows = fleet.members(SimpleNamespace(fake_devices=2, devices="all"))
    calls = []

    def sleep(seconds: float) -> None:  # the third poll after starting: Ctrl-C
        calls.append(seconds)
        if len(calls) == 3:
            raise KeyboardInterrupt
        time.sleep(seconds)

    clock = SimpleNamespace(sleep=sleep, monotonic=time.monotonic)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(fleet, "time", clock)
        with pytest.raises(KeyboardInterrupt):
            fleet.run_all(rows, tmp_path, [str(tmp_path / "test_slow.py")], 0, None)
    for m in rows:
        assert m.reason == "interrupted: the fleet was stopped" and m.exit_code is not None
        assert _gone(m.pid)
    assert subprocess.run(["pgrep", "-f", str(tmp_path / "test_slow.py")],
                          capture_output=True, check=False).returncode == 1
