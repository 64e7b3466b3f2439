"""ci/release-matrix.sh's table (torch-conformance releases), and the docs page showing it
(docs/guides/versions.md, "Which releases qualify")."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conformance.cli.main import main
from conformance.report.releases import load_runs, render

pytestmark = pytest.mark.harness_only
ROOT = Path(__file__).parents[1]


def _run(out: Path, release: str, rc: int, results: list[tuple[str, str]]) -> None:
    d = out / release
    (d / "report").mkdir(parents=True)
    (d / "rc").write_text(f"{rc}\n")
    (d / "seconds").write_text("321\n")
    (d / "packages.txt").write_text(f"torch=={release}+cu130\nnumpy==2.4.6\ntriton==3.9.0\n")
    rows = [{"nodeid": f"t::{i}", "area": area, "outcome": o, "reason": "why"}
            for i, (area, o) in enumerate(results)]
    counts = {o: sum(r["outcome"] == o for r in rows) for o in
              ("passed", "failed", "error", "expected-fail", "unexpected-pass",
               "unsupported", "skipped")}
    entries = [{"entry": "expected_failures[3]", "area": "export", "fixed_in": "torch 2.15.0",
                "narrow_to": "torch<2.15", "fixed_tests": 2}] if release == "2.15.0" else []
    (d / "report" / "report.json").write_text(json.dumps({
        "summary": counts, "results": rows, "run": {"matrix_entries": entries},
        "environment": {"cpu": "a CPU", "cpu_count": 2, "python": "3.11.7"}}))


def test_the_table_per_release_and_area(tmp_path):
    _run(tmp_path, "2.15.0", 0, [("sampler.normal", "passed"), ("export", "passed")])
    _run(tmp_path, "2.11.0", 1, [("sampler.normal", "failed"), ("sampler.uniform",
                                                                 "expected-fail")])
    runs = load_runs(tmp_path)
    assert [r.release for r in runs] == ["2.11.0", "2.15.0"]  # by version, not by name
    text = render(runs)
    assert "| 2.11.0+cu130 | 3.9.0 | 2.4.6 | 1 | 5m21 | 0 | 1 | 0 | 1 | 0 | 0 | 0 |" in text
    assert "| area | 2.11.0 | 2.15.0 |" in text
    assert "| sampler | 0 / 1 / 1 | 1 / 0 / 0 |" in text  # areas by family
    assert "| export | - | 1 / 0 / 0 |" in text
    assert "- failed: `t::0`: why" in text
    assert "fixed in torch 2.15.0? narrow its versions to `torch<2.15`" in text
    assert main(["releases", str(tmp_path), "-o", str(tmp_path / "t.md")]) == 1  # 2.11 red
    assert (tmp_path / "t.md").read_text() == text


def test_nothing_to_tabulate_is_a_usage_error(tmp_path, capsys):
    assert main(["releases", str(tmp_path)]) == 4
    assert "no release directories" in capsys.readouterr().err


def test_the_versions_page_shows_the_committed_table():
    """The release table of docs/guides/versions.md, between its release-table markers, is
    the one ci/release-matrix.sh wrote last."""
    table = (ROOT / "docs" / "results" / "release-matrix.md").read_text()
    first = re.search(r"^\| torch \| triton .*?(?=\n\n)", table, re.S | re.M)
    assert first, "docs/results/release-matrix.md has no release table"
    page = (ROOT / "docs" / "guides" / "versions.md").read_text()
    shown = re.search(r"^<!-- release-table\b.*?-->\n(.*?)\n<!-- /release-table -->$", page,
                      re.S | re.M)
    assert shown, "docs/guides/versions.md has no release-table markers"
    assert shown.group(1) == first.group(0)
    assert "release-table" not in (ROOT / "README.md").read_text()  # one copy, in the docs
