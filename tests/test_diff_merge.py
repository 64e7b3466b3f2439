"""``torch-conformance diff`` on reports of a planted regression, ``--shard I/N`` and
``torch-conformance merge`` (two shards merged equal the unsharded run), and their usage
errors."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

from conformance.report.diff import diff_reports
from tests.conftest import PLANTED_SELECTION, run_suite

VENDOR = "--impl=special.erfcx=planted.vendor_builds:build_1"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance.cli", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def _one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 4, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr


def test_diff_names_the_regressions(erfcx_runs, tmp_path):
    old, new = (erfcx_runs[k].report_dir for k in ("clean", "planted"))
    proc = cli("diff", str(old), str(new), "--json", str(tmp_path / "d.json"))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = sorted(r["nodeid"] for r in erfcx_runs["planted"].report["results"]
                    if r["outcome"] == "failed")
    assert failed and all("vendor.erfcx" in n for n in failed)
    assert proc.stdout.startswith("torch-conformance diff: REGRESSED")
    for nodeid in failed:
        assert f"- {nodeid}: passed -> failed" in proc.stdout
    assert "reproduce: PYTHONPATH=" in proc.stdout and "vendor_builds:build_2" in proc.stdout
    data = json.loads((tmp_path / "d.json").read_text())
    assert sorted(r["nodeid"] for r in data["regressions"]) == failed
    assert not data["appeared"] and not data["disappeared"] and not data["fixed"]
    # the other way round, the same tests are fixed and nothing regressed
    back = cli("diff", str(new / "report.json"), str(old / "report.json"), "--ignore-settings")
    assert back.returncode == 0 and f"Fixed ({len(failed)})" in back.stdout, back.stdout


def test_diff_formats(erfcx_runs, tmp_path):
    import html5lib

    old, new = (str(erfcx_runs[k].report_dir) for k in ("clean", "planted"))
    md = cli("diff", old, new, "--format", "markdown")
    assert md.returncode == 1 and md.stdout.startswith("# torch-conformance diff: REGRESSED")
    assert "## Regressions (" in md.stdout
    out = tmp_path / "diff.html"
    page = cli("diff", old, new, "--format", "html", "-o", str(out))
    assert page.returncode == 1 and "REGRESSED" in page.stdout
    text = out.read_text()
    html5lib.HTMLParser(strict=True).parse(text)
    assert 'id="verdict">REGRESSED<' in text and "vendor.erfcx" in text
    assert "Settings changed (" in text
    same = cli("diff", old, old)
    assert same.returncode == 0 and "no regressions" in same.stdout


def test_diff_margins_coverage_environment(erfcx_runs):
    old = erfcx_runs["clean"].report
    new = copy.deepcopy(old)
    moved = next(r for r in new["results"] if r["outcome"] == "passed"
                 and any((c.get("margin") or 0) > 0.01 for c in r["checks"]))
    check = next(c for c in moved["checks"] if (c.get("margin") or 0) > 0.01)
    check["margin"] *= 3
    lost = next(r for r in new["results"] if r["outcome"] == "passed" and r is not moved)
    lost["outcome"], lost["reason"] = "skipped", "no device"
    new["environment"]["torch"] = "9.9.9"
    new["environment"]["python"] = "3.99"
    d = diff_reports(old, new)
    assert [(m["nodeid"], m["check"]) for m in d.margins] == [(moved["nodeid"], check["name"])]
    assert abs(d.margins[0]["ratio"] - 3) < 1e-9
    assert [r["nodeid"] for r in d.coverage_lost] == [lost["nodeid"]]
    assert ("torch", old["environment"]["torch"], "9.9.9") in d.settings
    assert ("python", old["environment"]["python"], "3.99") in d.environment
    assert d.failing() and d.failing(coverage=False)  # coverage loss, changed settings
    # the edit left NEW's counts as they were: it does not add up, which fails the diff
    assert any("summary says 0 skipped, the results have 1" in p for p in d.problems)
    d.problems = []
    assert not d.failing(coverage=False, settings=False)
    assert d.failing(coverage=False, settings=False, margin=True)
    assert not diff_reports(old, new, factor=4).margins


def test_diff_usage_errors(erfcx_runs, tmp_path):
    good = str(erfcx_runs["clean"].report_dir)
    assert "no report.json" in _one_line_error(cli("diff", str(tmp_path), good))
    (tmp_path / "report.json").write_text("{not json")
    assert "not a readable report" in _one_line_error(cli("diff", str(tmp_path), good))
    assert "--factor must be > 1" in _one_line_error(cli("diff", good, good, "--factor", "1"))
    assert "arguments are required" in _one_line_error(cli("diff", good))


def test_two_shards_merged_equal_the_unsharded_run(erfcx_runs, tmp_path):
    whole = {r["nodeid"]: r["outcome"] for r in erfcx_runs["clean"].report["results"]}
    durations = str(erfcx_runs["clean"].report_dir)
    shards = []
    for i in (1, 2):
        (tmp_path / f"s{i}").mkdir()
        run = run_suite([*PLANTED_SELECTION, VENDOR, f"--shard={i}/2",
                         f"--shard-durations={durations}"], tmp_path / f"s{i}")
        assert run.returncode == 0 and run.report, run.output[-2000:]
        assert run.report["run"]["shard"]["index"] == i
        shards.append(run)
    ids = [{r["nodeid"] for r in s.report["results"]} for s in shards]
    assert ids[0] and ids[1] and not ids[0] & ids[1]  # disjoint, both non-empty
    out = tmp_path / "merged"
    proc = cli("merge", *(str(s.report_dir) for s in shards), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert cli("verify", str(out)).returncode == 0
    merged = json.loads((out / "report.json").read_text())
    assert {r["nodeid"]: r["outcome"] for r in merged["results"]} == whole
    assert merged["summary"] == erfcx_runs["clean"].report["summary"]
    assert len(merged["run"]["merged_from"]) == 2 and not merged["warnings"]
    for name in ("summary.md", "report.html", "junit.xml"):
        assert (out / name).stat().st_size > 0
    import xml.etree.ElementTree as ET

    cases = ET.parse(out / "junit.xml").getroot().iter("testcase")
    assert sum(1 for _ in cases) >= len(whole)
    # a shard missing: refused (exit 1), or merged as a partial run when asked; the same
    # shard twice is a usage error
    alone = cli("merge", str(shards[0].report_dir), "-o", str(tmp_path / "alone"))
    assert alone.returncode == 1 and "shards 2 of 2 are missing" in alone.stderr, alone.stderr
    assert not (tmp_path / "alone").exists()
    alone = cli("merge", str(shards[0].report_dir), "-o", str(tmp_path / "alone"),
                "--allow-partial")
    assert alone.returncode == 0 and "PARTIAL" in alone.stdout, alone.stdout + alone.stderr
    warnings = json.loads((tmp_path / "alone" / "report.json").read_text())["warnings"]
    assert any("shards 2 of 2 are missing" in w for w in warnings), warnings
    twice = cli("merge", str(shards[0].report_dir), str(shards[0].report_dir), "-o",
                str(tmp_path / "twice"))
    assert "shard 1/2 twice" in _one_line_error(twice)


def test_merge_refuses_other_versions_and_matrices(erfcx_runs, tmp_path):
    base = erfcx_runs["clean"].report
    for change, words in ((("suite", "commit"), "different suite versions"),
                          (("run", "matrix_sha256"), "different device matrices")):
        other = copy.deepcopy(base)
        target = other
        for key in change[:-1]:
            target = target[key]
        target[change[-1]] = "0.0.0-other"
        path = tmp_path / f"{change[-1]}.json"
        path.write_text(json.dumps(other))
        proc = cli("merge", str(erfcx_runs["clean"].report_dir), str(path), "-o",
                   str(tmp_path / "out"))
        assert proc.returncode == 1 and words in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_shard_usage_errors(tmp_path):
    for args, words in ((["--shard=3/2"], "--shard must be I/N"),
                        (["--shard=x"], "--shard must be I/N"),
                        (["--shard-durations=nowhere"], "needs --shard"),
                        (["--shard=1/2", "--shard-durations=nowhere"], "no report.json")):
        run = run_suite([*PLANTED_SELECTION, *args], tmp_path, report=False)
        assert run.returncode == 4, run.output[-1500:]
        assert words in run.output and "Traceback" not in run.output, run.output[-1500:]


def test_report_dirs_are_what_diff_reads(erfcx_runs):
    assert (Path(erfcx_runs["clean"].report_dir) / "report.json").is_file()
