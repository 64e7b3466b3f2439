"""The GPU campaign (conformance/cli/campaign*.py, ci/gpu-campaign.sh): its dry run writes
the deliverable within the device tool's limits after every stage; a campaign killed from
outside part-way still leaves a README that says how far it got, and no process behind;
stages that need the CuTe DSL wait for a call that has it, and that call runs only what
the first did not; a stage past its cap is killed with its process group; ratios are
given only for checked results. CI runs the whole dry run (.ci/run); here parts of it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conformance.cli import campaign, campaign_run
from conformance.cli.campaign_stages import Stage
from conformance.harness.deps import CUTE_ENV
from conformance.report import campaign_summary

ROOT = Path(__file__).resolve().parents[1]
EIGHT = sorted(["README.md", "SHA256SUMS", "benchmark.json", "environment.txt", "report.html",
                "report.json", "stages.tar.gz", "summary.md"])


def _campaign(out: Path, work: Path, *args: str, env: dict[str, str] | None = None,
              timeout: float = 400) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(ROOT / "ci" / "gpu-campaign.sh"), "--dry-run", str(out),
                           "--work", str(work), *args], capture_output=True, text=True,
                          timeout=timeout, check=False, env={**os.environ, **(env or {})})


def _within_limits(out: Path) -> list[Path]:
    files = sorted(p for p in out.rglob("*") if p.is_file())
    assert len(files) <= 8 and all(p.parent == out for p in files), files
    assert all(p.stat().st_size < 16 * 2**20 for p in files)
    assert sum(p.stat().st_size for p in files) < 64 * 2**20
    return files


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out, work = tmp_path_factory.mktemp("campaign"), tmp_path_factory.mktemp("work")
    proc = _campaign(out, work, "--only", "toolchain,bench,graphs")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return out


def test_dry_run_writes_the_deliverable_within_the_device_limits(dry_run):
    assert [p.name for p in _within_limits(dry_run)] == EIGHT
    verify = subprocess.run([sys.executable, "-m", "conformance.cli.main", "verify",
                             str(dry_run)], capture_output=True, text=True, check=False)
    assert verify.returncode == 0, verify.stdout + verify.stderr  # SHA256SUMS and report


def test_dry_run_readme_and_merged_report(dry_run):
    readme = (dry_run / "README.md").read_text()
    assert readme.startswith("# GPU campaign: a dry run on the CPU")
    assert "**Finished** after" in readme and "partial by design" in readme
    for stage in ("toolchain", "bench", "graphs"):
        assert f"| {stage} | 1 |" in readme
    assert "## Benchmark" in readme and "| bench | sdpa.math | 128 | 64 |" in readme
    assert "not given: triton_fa not measured; sdpa.flash not measured" in readme
    merged = json.loads((dry_run / "report.json").read_text())
    assert {"toolchain", "graphs"} <= {r["area"] for r in merged["results"]}
    assert len(merged["run"]["merged_from"]) == 2


def _stage_processes(work: Path) -> str:
    ps = subprocess.run(["pgrep", "-af", str(work)], capture_output=True, text=True,
                        check=False)
    return "\n".join(line for line in ps.stdout.splitlines() if "pgrep" not in line)


@pytest.mark.parametrize("sig", ["KILL", "TERM"])
def test_a_campaign_killed_part_way_leaves_its_readme_and_no_process(tmp_path, sig):
    """An outer timeout kills the campaign while a stage runs: OUT holds at most eight
    files, the README says what ran and what did not (SIGKILL: as of the last stage;
    SIGTERM: the campaign says it was interrupted, and the running stage's report is
    written from its journal), and no stage process outlives it."""
    out, work = tmp_path / "out", tmp_path / "work"
    # `timeout` puts itself and the campaign in a process group and signals the group, as
    # an outer timeout does; here the test sends that signal once attention has started
    # (its tests run for 60 s: the kill lands in it), not after a fixed time, which a loaded
    # machine overran while toolchain still ran
    cmd = ["timeout", "-s", sig, "170", "bash", str(ROOT / "ci" / "gpu-campaign.sh"),
           "--dry-run", str(out), "--work", str(work), "--only", "toolchain,attention,samplers",
           "--dry-window", "60"]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while "stage attention is running" not in (
                (out / "README.md").read_text() if (out / "README.md").exists() else ""):
            assert proc.poll() is None and time.monotonic() - start < 150, \
                "the campaign ended or took 150 s before attention started"
            time.sleep(0.2)
        time.sleep(2.0)
        os.killpg(proc.pid, getattr(signal, f"SIG{sig}"))
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(1.0)
    assert _stage_processes(work) == "", "a stage outlived the campaign"
    _within_limits(out)
    readme = (out / "README.md").read_text()
    assert "| toolchain | 1 |" in readme  # ran before the kill
    if sig == "KILL":
        assert "**In progress** (stage attention is running" in readme
        assert "| samplers | - | - | - | not reached |" in readme
    else:
        assert "**Interrupted by SIGTERM**" in readme
        assert "| attention | 1 |" in readme and "interrupted" in readme
        state = json.loads((work / "campaign.json").read_text())
        assert {r["name"]: r["status"] for r in state["results"]}["attention"] == "interrupted"


def test_cute_stages_wait_for_a_call_that_has_it_and_a_later_call_runs_only_the_rest(
        tmp_path):
    out1, out2, work = tmp_path / "out1", tmp_path / "out2", tmp_path / "work"
    only = ("--only", "fa4_sm90,bench_cute,toolchain")
    first = _campaign(out1, work, *only, env={CUTE_ENV: "absent for this test"})
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    readme = (out1 / "README.md").read_text()
    assert "| fa4_sm90 | 1 | 0 | 0 | waiting for the CuTe DSL |" in readme
    assert "| bench_cute | 1 | 0 | 0 | waiting for the CuTe DSL |" in readme
    assert "| toolchain | 1 |" in readme and "absent for this test" in readme
    second = _campaign(out2, work, *only)
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "toolchain:" not in second.stdout  # done by the first call
    readme = (out2 / "README.md").read_text()
    assert "| fa4_sm90 | 2 |" in readme and "| bench_cute | 2 | 3 |" in readme
    assert "| toolchain | 1 |" in readme  # the first call's result, merged
    merged = json.loads((out2 / "report.json").read_text())
    assert len(merged["run"]["merged_from"]) == 2


def test_a_stage_past_its_cap_is_killed_with_its_children(tmp_path):
    marker = "31.4159"  # a sleep only this test starts
    script = f"import subprocess, time; subprocess.Popen(['sleep', '{marker}']); time.sleep(60)"
    start = time.monotonic()
    rc, wall = campaign_run.Runner().run([sys.executable, "-c", script], 2.0, tmp_path / "log")
    assert rc is None and wall < 10 and time.monotonic() - start < 10
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True,
                          check=False)
    assert left.stdout.strip() == "", "the stage's child outlived the stage"
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def test_the_deadline_leaves_later_stages_not_run_with_why(tmp_path, monkeypatch):
    monkeypatch.setattr(campaign, "STAGES", (
        Stage("first", 60, "a stage that fits", ("toolchain",), workers=0, startup_s=5),
        Stage("second", 60, "a stage that would start too late", ("topk",), startup_s=40)))
    monkeypatch.setattr(campaign_run, "run_stage", lambda runner, stage, work, window, cap,
                        dry, call: campaign_run.StageResult(stage.name, window, stage.purpose,
                                                            status="ok", call=call))
    monkeypatch.setattr(campaign, "environment", lambda dry_run: ("env\n", None))
    (tmp_path / "out").mkdir()
    (tmp_path / "work").mkdir()
    c = campaign.Campaign(tmp_path / "out", tmp_path / "work", dry_run=False, deadline_s=60)
    c.run(campaign_run.Runner())
    first, second = c.results["first"], c.results["second"]
    assert first.status == "ok" and first.window_s == pytest.approx(60 - 12 - 5, abs=2)
    assert second.status == "not run" and "under 40 s of start-up + 20 s of tests" in second.why
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def _rows(**rates):
    return {"results": [
        {"impl": impl, "status": "ok", "S": 4096, "D": 128, "causal": causal,
         "fwd_tflops": f, "bwd_tflops": b, "fwd_check": "pass", "bwd_check": check}
        for impl, (f, b, check) in rates.items() for causal in (False, True)]}


def test_ratios_only_for_checked_results():
    bench = _rows(**{"triton_fa": (400.0, 100.0, "fail: dq at (b, h) = (0, 0): error"),
                     "sdpa.flash": (450.0, 300.0, "pass"),
                     "fa4.sm90": (500.0, 200.0, "pass"),
                     "fa4.flash_attn_func": (600.0, 400.0, "pass")})
    got = {(r["name"], r["causal"]): r for r in campaign_summary.ratios(bench)}
    triton = got[("our Triton forward / sdpa.flash", False)]
    assert triton["ratio"] == pytest.approx(400 / 450) and triton["meets"] is True
    wrong = got[("our Triton backward / sdpa.flash", False)]
    assert wrong["ratio"] is None and "triton_fa's result fail: dq" in wrong["why"][0]
    fa4 = got[("our FA4 sm90 forward / flash-attn-4", True)]
    assert fa4["ratio"] == pytest.approx(500 / 600) and fa4["meets"] is False
    assert got[("our FA4 sm90 backward / flash-attn-4", False)]["meets"] is None  # no target
    partial = campaign_summary.ratios(_rows(**{"sdpa.flash": (450.0, 300.0, "pass")}))
    assert partial[0]["ratio"] is None and partial[0]["why"] == ["triton_fa not measured"]


def test_the_guide_states_the_targets_the_code_checks():
    guide = (ROOT / "docs" / "guides" / "gpu-campaign.md").read_text()
    for name, _num, _den, _side, low in campaign_summary.TARGETS:
        assert f"| {name} | {'-' if low is None else f'>= {low}'} |" in guide, name


def test_the_guide_lists_the_stages_as_the_code_runs_them():
    from conformance.cli.campaign_stages import STAGES

    guide = (ROOT / "docs" / "guides" / "gpu-campaign.md").read_text()
    rows = [line.split("|")[1:4] for line in guide.splitlines()
            if line.startswith("| ") and line.count("|") == 5]
    listed = [(a.strip(), b.strip(), c.strip()) for a, b, c in rows
              if a.strip() in {s.name for s in STAGES}]
    assert listed == [(s.name, str(s.window_s), "yes" if s.needs_cute else "no")
                      for s in STAGES]


SLEEPERS = """
import os, time, pytest

@pytest.mark.parametrize("i", range(2))
def test_sleep(i):
    open(os.path.join(os.environ["PID_DIR"], str(os.getpid())), "w").close()
    time.sleep(60)
"""

CAMPAIGN_LIKE = """
import sys
from pathlib import Path
from conformance.cli.campaign_run import Runner
Runner().run(sys.argv[1:], 120, Path(sys.argv[0]).with_suffix(".log"))
"""


def test_xdist_workers_of_a_stage_die_with_the_campaign(tmp_path):
    """SIGKILL the campaign while a stage runs two xdist workers: the stage's controller
    (PR_SET_PDEATHSIG from the campaign) dies with it, and its workers with the controller
    (execnet ends a worker whose controller went; the plugin's PR_SET_PDEATHSIG, asked for
    by CONFORMANCE_DIE_WITH_PARENT, also covers a worker whose threads are all stuck)."""
    (tmp_path / "test_sleepers.py").write_text(SLEEPERS)
    pids = tmp_path / "pids"
    pids.mkdir()
    driver = tmp_path / "driver.py"
    driver.write_text(CAMPAIGN_LIKE)
    cmd = [sys.executable, str(driver), sys.executable, "-m", "pytest", "-q",
           "-p", "no:cacheprovider", "--device=cpu",
           str(tmp_path / "test_sleepers.py"), "-n", "2"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PID_DIR": str(pids)})
    deadline = time.monotonic() + 90
    while (len(list(pids.iterdir())) < 2 and time.monotonic() < deadline
           and proc.poll() is None):
        time.sleep(0.2)
    workers = [int(p.name) for p in pids.iterdir()]
    assert len(workers) == 2, (tmp_path / "driver.log").read_text()[-2000:]
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    alive = workers
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [w for w in workers if Path(f"/proc/{w}").exists()
                 and "Z" not in Path(f"/proc/{w}/stat").read_text().split()[2]]
    assert not alive, f"xdist workers {alive} outlived the campaign"
