"""report.html: strict HTML5, self-contained (inline CSS, SVG and script only, no network),
and what a person sees in a real browser (headless Chromium): the verdict, the failures
grouped, the search and filters (driven through the URL hash the page reads on load), the
All tests table's cap, the margin plots. Four browser launches in all."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import pytest

# --virtual-time-budget: run the page's script (and any timers) before dumping the DOM or
# taking the screenshot; the rest keep a headless Chromium off the network and quiet
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--virtual-time-budget=5000"]
BAD = ("failed", "error", "crashed", "timed-out", "unexpected-pass")
LIMIT = 500  # the All tests table's cap (report.js.j2)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    pytest.skip("[skipped] no Chromium on PATH (Debian: apt-get install chromium; "
                ".ci/run installs it)")


def _browser(html: Path, *args: str, fragment: str = "") -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                               *args, html.as_uri() + fragment], capture_output=True,
                              text=True, timeout=120, check=False)


def _dom(html: Path, fragment: str = "") -> str:
    proc = _browser(html, "--dump-dom", fragment=fragment)
    assert proc.returncode == 0 and "</html>" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def _table_rows(page: str) -> list[int]:
    """The All tests table's rows (their result indices), in the order shown."""
    body = re.search(r'<tbody id="rows">(.*?)</tbody>', page, re.S)
    assert body, "no All tests table"
    return [int(i) for i in re.findall(r'<tr data-i="(\d+)"', body.group(1))]


def _groups(page: str) -> list[tuple[list[int], bool, bool]]:
    """Each failure group: its result indices, whether it is shown and whether open."""
    return [([int(i) for i in rows.split()], "hidden" not in attrs, " open" in attrs)
            for rows, attrs in re.findall(r'<details class="group" data-rows="([\d ]+)"([^>]*)>',
                                          page)]


# a synthetic report with 98 failures in 6 groups (4 areas), made from a real one's rows
GROUPS = [  # area, test file, test function, implementation, dtypes, per dtype, outcomes
    ("topk", "topk/test_topk.py", "test_values", "vendor.topk",
     ("float32", "float16", "bfloat16"), 12, ("failed",)),
    ("topk", "topk/test_topk.py", "test_indices", "vendor.topk", ("float16",), 12,
     ("failed", "error")),
    ("indexing.gather", "indexing/test_indexing.py", "test_valid", "vendor.gather",
     ("float32",), 20, ("failed",)),
    ("gemm", "gemm/test_gemm.py", "test_matmul", "vendor.gemm", ("float32",), 15,
     ("crashed", "crashed", "timed-out")),
    ("special.erfcx", "special/test_erfcx.py", "test_forward", "vendor.erfcx",
     ("float32", "float16"), 6, ("failed",)),
    ("special.erfcx", "special/test_erfcx.py", "test_backward", "vendor.erfcx", ("float32",),
     3, ("unexpected-pass",)),
    # the rest: outcomes that do not fail a run
    ("topk", "topk/test_topk.py", "test_values", "torch.topk",
     ("float32", "float16", "bfloat16"), 60, ("passed",)),
    ("indexing.gather", "indexing/test_indexing.py", "test_valid", "torch.gather",
     ("float32", "int64"), 50, ("passed", "unsupported")),
    ("attention", "attention/test_attention.py", "test_forward", "fa4.sm100",
     ("bfloat16", "float16"), 100, ("unsupported",)),
    ("gemm", "gemm/test_gemm.py", "test_matmul", "torch.matmul", ("float64",), 40,
     ("skipped",)),
    ("special.erfcx", "special/test_erfcx.py", "test_forward", "torch.erfcx", ("float32",),
     5, ("expected-fail",)),
]


def _synthetic_report(base: dict) -> dict:
    report = copy.deepcopy(base)
    template = next(r for r in base["results"] if r["outcome"] == "failed")
    results = []
    for area, path, func, impl, dtypes, per, outcomes in GROUPS:
        for dtype in dtypes:
            for k in range(per):
                outcome = outcomes[k % len(outcomes)]
                nodeid = f"conformance/areas/{path}::{func}[{impl}-{dtype}-n{k}]"
                r = {**copy.deepcopy(template), "nodeid": nodeid, "area": area, "impl": impl,
                     "dtype": dtype, "params": {"impl": impl, "dtype": dtype, "n": k},
                     "outcome": outcome, "reproduce": f"pytest '{nodeid}' --device=cpu",
                     "repro_script": None, "notes": {}, "matrix_entries": []}
                r["reason"] = (f"[{area}] {func} ({dtype}): error {k + 2} ulp exceeds bound 1 ulp"
                               if outcome in BAD else f"{outcome} by design" if outcome != "passed"
                               else "")
                if outcome == "crashed":
                    r["notes"] = {"stack": f"Fatal Python error: Segmentation fault\n  {func}"}
                if outcome == "passed":
                    r["checks"], r["worst_margin"] = [], 0.25
                results.append(r)
    report["results"] = results
    report["summary"] = {o: 0 for o in base["summary"]} | dict(Counter(r["outcome"]
                                                                        for r in results))
    report["collected"], report["verdict"] = len(results), "FAIL"
    areas: dict = {}
    for r in results:
        row = areas.setdefault(r["area"], {}).setdefault(
            r["impl"], {**{o: 0 for o in report["summary"]}, "worst_margin": None})
        row[r["outcome"]] += 1
    report["areas"] = areas
    return report


@pytest.fixture(scope="module")
def triage(erfcx_runs, tmp_path_factory) -> tuple[Path, dict]:
    """The synthetic report rendered to report.html (``render_html``, as --report does)."""
    from conformance.report.html import render_html

    report = _synthetic_report(erfcx_runs["planted"].report)
    html = tmp_path_factory.mktemp("triage") / "report.html"
    html.write_text(render_html(report), encoding="utf-8")
    return html, report


def test_html_is_strict_html5(erfcx_runs, triage):
    import html5lib

    pages = [run.report_dir / "report.html" for run in erfcx_runs.values()] + [triage[0]]
    for page in pages:
        html5lib.HTMLParser(strict=True).parse(page.read_text())  # raises on any parse error


def test_html_needs_no_network(erfcx_runs, triage):
    for page in (erfcx_runs["planted"].report_dir / "report.html", triage[0]):
        text = page.read_text()
        assert "<link" not in text and "<img" not in text and "<iframe" not in text
        assert not re.search(r"<script[^>]*\ssrc=", text)  # inline scripts only
        assert not re.search(r"\ssrc=", text)
        assert re.findall(r"<script[^>]*>", text) == [
            '<script type="application/json" id="results-data">', "<script>"]
        code = text.rsplit("<script>", 1)[1].split("</script>", 1)[0]
        for word in ("://", "fetch(", "XMLHttpRequest", "import(", "WebSocket", "sendBeacon",
                     ".src", "eval("):
            assert word not in code, word
        assert not re.search(r"""(src|href)=["']?(https?:)?//[^"']*\.(css|js|png|svg|woff2?)""",
                             text)
        assert not re.search(r"url\((?!#)", text)  # only references inside the page


def test_without_script_the_failures_are_grouped(triage):
    """What a browser without JavaScript shows: the verdict, the counts and the failure
    groups (collapsed) with their first examples and tests; the filters stay hidden."""
    html, report = triage
    text = html.read_text()
    assert re.search(r'id="verdict"[^>]*>FAIL<', text)
    assert "Failures (98) <span class=\"muted\">in 6 groups" in text
    groups = _groups(text)
    assert [len(rows) for rows, _, _ in groups] == [36, 12, 20, 15, 12, 3]  # by area
    assert all(shown and not opened for _, shown, opened in groups)
    results = report["results"]
    for rows, _, _ in groups:
        assert len({(results[i]["area"], results[i]["impl"],
                     results[i]["nodeid"].split("[")[0]) for i in rows}) == 1
        assert all(results[i]["outcome"] in BAD for i in rows)
    assert "36 failed; dtypes: bfloat16 12, float16 12, float32 12" in text
    assert "10 crashed, 5 timed-out; dtypes: float32 15" in text
    assert "Fatal Python error: Segmentation fault" in text  # the crashed group's stack
    assert "pytest &#39;conformance/areas/topk/test_topk.py::test_values[vendor.topk-float32-n0]" \
           "&#39; --device=cpu" in text  # the first example's reproduce line
    assert '<div id="filters" class="filters" hidden>' in text and "<noscript>" in text


def test_browser_filters(triage, tmp_path):
    """The hash filter the page reads on load: exactly the matching rows in All tests, the
    matching failure groups (and their tests) shown, the rest hidden; unfiltered, the table
    stops at its cap, failures first; a screenshot of the page."""
    html, report = triage
    results = report["results"]
    page = _dom(html, "#q=" + quote("float16 VENDOR") + "&outcome=failed&area=topk")
    want = [i for i, r in enumerate(results) if r["outcome"] == "failed"  # every term, any
            and r["area"] == "topk" and "float16" in r["nodeid"]  # case; bfloat16 too
            and r["impl"].startswith("vendor")]
    assert len(want) == 12 + 12 + 6  # test_values float16 and bfloat16, test_indices' failed
    assert _table_rows(page) == want
    body = page.split('<tbody id="rows">', 1)[1].split("</tbody>", 1)[0]
    assert re.findall(r'<td class="code id" title="([^"]+)"', body) == [
        results[i]["nodeid"] for i in want]  # the node ids, rebuilt from the compact rows
    assert f"{len(want)} of {len(results)} tests match the filter; {len(want)} shown" in page
    assert f'id="status">{len(want)} of {len(results)} tests match; {len(want)} of the ' \
           "failures<" in page
    shown = [(rows, opened) for rows, visible, opened in _groups(page) if visible]
    assert [len(rows) for rows, _ in shown] == [36, 12]  # topk's two groups
    assert re.search(r'<section class="farea" data-area="gemm" hidden', page)
    assert '(24 match)' in page and '(6 match)' in page
    hidden_tests = re.findall(r'<tr data-i="(\d+)" hidden', page)
    assert len(hidden_tests) == 36 - 24 + 12 - 6 + 20 + 15 + 12 + 3  # in the groups
    assert re.search(r'<select id="area"[^>]*>.*<option value="indexing">\s*indexing\.\* '
                     r'\(120\)</option>', page, re.S)

    page = _dom(html)  # unfiltered: the cap, failures first
    rows = _table_rows(page)
    assert len(rows) == LIMIT < len(results)
    assert [results[i]["outcome"] for i in rows[:98]] == sorted(
        (r["outcome"] for r in results if r["outcome"] in BAD), key=BAD.index)
    assert f"{len(results) - LIMIT} more: refine the filter" in page
    assert '<div id="filters" class="filters">' in page  # the script ran and showed them

    shot = tmp_path / "report-html-screenshot.png"
    proc = _browser(html, f"--screenshot={shot}", "--window-size=1400,1000",
                    fragment="#outcome=" + ",".join(BAD) + "&area=topk&open=1")
    assert shot.exists() and shot.stat().st_size > 30_000, proc.stderr[-2000:]


def test_browser_shows_the_failures(erfcx_runs):
    run = erfcx_runs["planted"]
    page = _dom(run.report_dir / "report.html")
    assert re.search(r'id="verdict"[^>]*>FAIL<', page)
    failed = [r for r in run.report["results"] if r["outcome"] == "failed"]
    assert failed
    repro = failed[0]["reproduce"].replace("'", "&#39;")
    assert repro in page or failed[0]["reproduce"] in page.replace("&#39;", "'")
    assert page.count('class="plot"') == 1 and "<svg" in page and "limit 1" in page
    assert len(_table_rows(page)) == len(run.report["results"])
    # erfcx's forward, backward and backward_large (x >= 16) of the planted build
    assert len(_groups(page)) == 3


def test_clean_run_is_a_pass(erfcx_runs):
    text = (erfcx_runs["clean"].report_dir / "report.html").read_text()
    assert re.search(r'id="verdict"[^>]*>PASS<', text)
    assert "Failures (0)" in text
    assert "pytorch/pytorch" in text  # the expected failure's upstream link
