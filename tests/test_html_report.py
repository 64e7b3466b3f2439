"""report.html: strict HTML5, self-contained, and what a person sees in a real browser
(headless Chromium): the verdict, a failure's reproduction line, the margin plots."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    pytest.skip("[skipped] no Chromium on PATH (Debian: apt-get install chromium; "
                ".ci/run installs it)")


def _browser(html: Path, *args: str) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                               *args, html.as_uri()], capture_output=True, text=True,
                              timeout=120, check=False)


def test_html_is_strict_html5(erfcx_runs):
    import html5lib

    for run in erfcx_runs.values():
        text = (run.report_dir / "report.html").read_text()
        html5lib.HTMLParser(strict=True).parse(text)  # raises on any parse error


def test_html_needs_no_network(erfcx_runs):
    text = (erfcx_runs["planted"].report_dir / "report.html").read_text()
    assert "<link" not in text and "<script" not in text and "<img" not in text
    assert not re.search(r"""(src|href)=["']?(https?:)?//[^"']*\.(css|js|png|svg|woff2?)""",
                         text)
    assert not re.search(r"url\((?!#)", text)  # only references inside the page


def test_browser_shows_the_failures(erfcx_runs, tmp_path):
    run = erfcx_runs["planted"]
    html = run.report_dir / "report.html"
    dom = _browser(html, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = dom.stdout
    assert re.search(r'id="verdict"[^>]*>FAIL<', page)
    failed = [r for r in run.report["results"] if r["outcome"] == "failed"]
    assert failed
    repro = failed[0]["reproduce"].replace("'", "&#39;")
    assert repro in page or failed[0]["reproduce"] in page.replace("&#39;", "'")
    assert page.count('class="plot"') == 1 and "<svg" in page and "limit 1" in page
    shot = tmp_path / "shot.png"
    _browser(html, f"--screenshot={shot}", "--window-size=1200,1600")
    assert shot.exists() and shot.stat().st_size > 20_000  # a rendered page, not blank


def test_clean_run_is_a_pass(erfcx_runs):
    text = (erfcx_runs["clean"].report_dir / "report.html").read_text()
    assert re.search(r'id="verdict"[^>]*>PASS<', text)
    assert "Failures (0)" in text
    assert "pytorch/pytorch" in text  # the expected failure's upstream link
