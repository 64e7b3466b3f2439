"""Blind "trust breaker" scenarios for ``torch-conformance verify / merge / diff``.

Written from the README alone ("Outcomes", "The report", "Comparing runs",
"Fleets of runners", "A report a third party can trust", "Conformance mode"),
without reading the implementation.  Each scenario is a way a lab report ends
up untrustworthy in real life -- a report edited by hand, a manifest
regenerated after an edit, a shard reused from another run or another commit,
results copied between directories, a verdict flipped, a must-pass failure
hidden, duplicated result rows, non-finite counts, a file swapped for a
symlink, renamed or reformatted -- and the exit status the documented
behaviour says a trustworthy tool must give.  A few CONTROL scenarios must be
accepted (exit 0) so that false alarms show too.

``SCENARIOS`` is a list of dicts:

* ``name``, ``why`` (the real-world story), ``command`` ("verify", "merge" or
  "diff");
* ``make(inputs, out) -> list[str]``: ``inputs`` maps "base", "s1", "s2",
  "failing", "strict" to pristine report directories (never modified: every
  ``make`` copies what it changes into ``out``, an empty directory), and the
  result is the argument list after ``torch-conformance <command>``;
* ``expect_exit``: the documented exit status; ``expect_words``: a short
  phrase expected in stdout+stderr ("" for none);
* optional ``nothing_written``: True for a refused merge, whose output
  directory must stay empty ("one line, nothing written");
* optional ``stretch``: a one-line note where the expectation goes a step
  beyond the README's literal wording (it follows from its intent).

Two kinds of forgery are used for the report-consistency checks: an edit with
SHA256SUMS left as it was (must be caught by the manifest) and an edit with
SHA256SUMS regenerated (the manifest is then consistent, so only the
documented "the report adds up" checks can catch it).  A fully consistent
forgery (results, counts and verdict all rewritten together, manifest
regenerated) is out of scope: the README says the manifest makes a report
tamper-evident, not authentic.

``python tests/planted/blind_trust_breakers.py`` builds the five inputs with
the suite's own pytest runs (about a minute on 2 cores; set ``BT_INPUTS`` to a
directory that already holds base/, s1/, s2/, failing/ and strict/ to reuse
them), runs every scenario and prints a table.
"""

import copy
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOL = [sys.executable, "-m", "conformance.cli"]  # torch-conformance, in this interpreter
PYTEST = [sys.executable, "-m", "pytest"]

OUTCOMES = ("passed", "failed", "error", "crashed", "timed-out", "expected-fail",
            "unexpected-pass", "unsupported", "skipped", "not-run")
RAN = ("passed", "failed", "error", "crashed", "timed-out", "expected-fail",
       "unexpected-pass")
BAD = ("failed", "error", "crashed", "timed-out", "unexpected-pass")


# --------------------------------------------------------------------------- helpers

def _copy(inputs, key, out, name=None):
    dst = out / (name or key)
    shutil.copytree(inputs[key], dst, symlinks=True)
    return dst


def _load(d):
    return json.loads((d / "report.json").read_text())


def _save(d, report, indent=1):
    path = d / "report.json"
    if path.is_symlink():
        path.unlink()
    path.write_text(json.dumps(report, indent=indent) + "\n")


def _rehash(d):
    """What a forger does after an edit: regenerate SHA256SUMS over every file."""
    lines = []
    for p in sorted(d.rglob("*")):
        if p.is_file() and p.name != "SHA256SUMS":
            digest = hashlib.sha256(p.read_bytes()).hexdigest()
            lines.append(f"{digest}  {p.relative_to(d).as_posix()}\n")
    (d / "SHA256SUMS").write_text("".join(lines))


def _recount(report):
    """Make summary / areas / collected agree with the results (a careful forger)."""
    summary = {k: 0 for k in OUTCOMES}
    areas = {}
    for row in report["results"]:
        summary[row["outcome"]] = summary.get(row["outcome"], 0) + 1
        cell = areas.setdefault(row["area"], {}).setdefault(
            row["impl"], dict({k: 0 for k in OUTCOMES}, ran=0, not_run={}, worst_margin=None))
        cell[row["outcome"]] = cell.get(row["outcome"], 0) + 1
        if row["outcome"] in RAN:
            cell["ran"] += 1
    for area, impls in areas.items():
        for impl, cell in impls.items():
            old = report.get("areas", {}).get(area, {}).get(impl, {})
            cell["worst_margin"] = old.get("worst_margin")
    report["summary"] = summary
    report["areas"] = areas
    report["collected"] = len(report["results"])
    return report


def _rows(report, outcome):
    return [r for r in report["results"] if r["outcome"] == outcome]


def _set_pass(report):
    report["verdict"] = "PASS"
    report["exit_status"] = 0


def _flip_failed_to(report, outcome, **extra):
    for row in _rows(report, "failed"):
        row["outcome"] = outcome
        row["reason"] = extra.get("reason", "")
        for check in row.get("checks", []):
            check["failures"] = 0
    return report


def _swap_impl_spec(report, name="torch.special.erfcx", spec="vendorlib.erfcx:erfcx"):
    for impl in report["run"]["implementations"]:
        if impl["name"] == name:
            impl["spec"] = spec
            impl["origin"] = "--impl"
            break
    else:
        raise AssertionError(f"no implementation {name} in the report")
    return report


def _edit(inputs, out, key, fn, rehash=True, name="r"):
    d = _copy(inputs, key, out, name)
    r = _load(d)
    fn(r)
    _save(d, r)
    if rehash:
        _rehash(d)
    return d


# --------------------------------------------------------------------------- makers: verify

def mk_verify_pristine(key):
    def make(inputs, out):
        return [str(_copy(inputs, key, out, "r"))]
    return make


def mk_verdict_flipped_by_hand(inputs, out):
    return [str(_edit(inputs, out, "failing", _set_pass, rehash=False))]


def mk_verdict_flipped_rehashed(inputs, out):
    return [str(_edit(inputs, out, "failing", _set_pass))]


def mk_failures_relabelled_counts_stale(inputs, out):
    def fn(r):
        _flip_failed_to(r, "passed")
        _set_pass(r)
    return [str(_edit(inputs, out, "failing", fn))]


def mk_strict_mustpass_hidden(inputs, out):
    def fn(r):
        mp = r["must_pass"]
        mp["passed"] = mp["required"]
        mp["not_passed"] = 0
        mp["tests_not_passed"] = []
        if "areas_not_collected" in mp:
            mp["areas_not_collected"] = []
        _set_pass(r)
    return [str(_edit(inputs, out, "strict", fn))]


def mk_strict_verdict_only(inputs, out):
    return [str(_edit(inputs, out, "strict", _set_pass))]


def mk_truncated_run_sold_as_pass(inputs, out):
    def fn(r):
        row = _rows(r, "passed")[-1]
        row["outcome"] = "not-run"
        row["reason"] = "interrupted (Ctrl-C)"
        row["checks"] = []
        _recount(r)
        _set_pass(r)
    return [str(_edit(inputs, out, "base", fn))]


def mk_failure_laundered_as_xfail(inputs, out):
    def fn(r):
        _flip_failed_to(r, "expected-fail", reason="known bug")
        _recount(r)
        _set_pass(r)
    return [str(_edit(inputs, out, "failing", fn))]


def mk_duplicate_row_recounted(inputs, out):
    def fn(r):
        r["results"].append(copy.deepcopy(_rows(r, "passed")[0]))
        _recount(r)
    return [str(_edit(inputs, out, "base", fn))]


def mk_nan_collected(inputs, out):
    def fn(r):
        r["collected"] = float("nan")
    return [str(_edit(inputs, out, "base", fn))]


def mk_inf_count(inputs, out):
    def fn(r):
        r["summary"]["skipped"] = "inf"
    return [str(_edit(inputs, out, "base", fn))]


def mk_areas_table_doctored(inputs, out):
    def fn(r):
        for impls in r["areas"].values():
            for cell in impls.values():
                cell["passed"] += cell["failed"]
                cell["failed"] = 0
    return [str(_edit(inputs, out, "failing", fn))]


def mk_unknown_outcome(inputs, out):
    def fn(r):
        for row in _rows(r, "failed"):
            row["outcome"] = "flaky"                   # not one of the documented outcomes
        _recount(r)
        _set_pass(r)
    return [str(_edit(inputs, out, "failing", fn))]


def mk_strict_declared_non_strict(inputs, out):
    def fn(r):
        r["run"]["strict"] = False
        r["must_pass"]["strict"] = False
        _set_pass(r)
    return [str(_edit(inputs, out, "strict", fn))]


def mk_failed_rows_deleted(inputs, out):
    def fn(r):
        r["results"] = [row for row in r["results"] if row["outcome"] not in BAD]
        _recount(r)
        _set_pass(r)
    return [str(_edit(inputs, out, "failing", fn))]


def mk_exit_status_contradicts(inputs, out):
    def fn(r):
        r["exit_status"] = 0                           # verdict stays FAIL
    return [str(_edit(inputs, out, "failing", fn))]


def mk_diff_file_vs_dir(inputs, out):
    old = _copy(inputs, "base", out, "old")
    return [str(old / "report.json"), str(_copy(inputs, "base", out, "new"))]


def mk_extra_file(inputs, out):
    d = _copy(inputs, "base", out, "r")
    (d / "report.json.orig").write_text((d / "report.json").read_text())
    return [str(d)]


def mk_file_renamed(inputs, out):
    d = _copy(inputs, "base", out, "r")
    (d / "summary.md").rename(d / "summary.old.md")
    return [str(d)]


def mk_file_deleted(inputs, out):
    d = _copy(inputs, "failing", out, "r")
    (d / "junit.xml").unlink()
    return [str(d)]


def mk_symlinked_report(inputs, out):
    other = _copy(inputs, "base", out, "other")          # a PASS from another run
    d = _copy(inputs, "failing", out, "r")
    (d / "report.json").unlink()
    (d / "report.json").symlink_to(other / "report.json")
    return [str(d)]


def mk_results_copied_from_other_run(inputs, out):
    d = _copy(inputs, "failing", out, "r")
    shutil.copy2(inputs["base"] / "report.json", d / "report.json")
    return [str(d)]


def mk_report_and_manifest_copied(inputs, out):
    d = _copy(inputs, "failing", out, "r")
    for f in ("report.json", "SHA256SUMS"):
        shutil.copy2(inputs["base"] / f, d / f)
    return [str(d)]


def mk_reformatted(inputs, out):
    d = _copy(inputs, "base", out, "r")
    r = _load(d)
    _save(d, r, indent=4)                                  # same data, other whitespace
    return [str(d)]


def mk_trailing_newline(inputs, out):
    d = _copy(inputs, "base", out, "r")
    with open(d / "summary.md", "a") as f:
        f.write("\n")
    return [str(d)]


def mk_manifest_deleted(inputs, out):
    d = _copy(inputs, "failing", out, "r")
    (d / "SHA256SUMS").unlink()
    return [str(d)]


def mk_manifest_line_dropped(inputs, out):
    d = _copy(inputs, "base", out, "r")
    lines = (d / "SHA256SUMS").read_text().splitlines(keepends=True)
    kept = [ln for ln in lines if not ln.rstrip().endswith(" report.json")]
    (d / "SHA256SUMS").write_text("".join(kept))
    return [str(d)]


def mk_journal_edited(inputs, out):
    d = _copy(inputs, "failing", out, "r")
    j = d / "journal" / "journal.jsonl"
    kept = [ln for ln in j.read_text().splitlines(keepends=True) if '"failed"' not in ln]
    j.write_text("".join(kept))
    return [str(d)]


def mk_no_such_dir(inputs, out):
    return [str(out / "does-not-exist")]


# --------------------------------------------------------------------------- makers: merge

def mk_merge_ok(inputs, out):
    return [str(_copy(inputs, "s1", out)), str(_copy(inputs, "s2", out)), "-o", str(out / "m")]


def mk_merge_missing(inputs, out):
    return [str(_copy(inputs, "s1", out)), "-o", str(out / "m")]


def mk_merge_same_twice(inputs, out):
    a = _copy(inputs, "s1", out, "runner-a")
    b = _copy(inputs, "s1", out, "runner-b")
    return [str(a), str(b), "-o", str(out / "m")]


def mk_merge_renamed_copy(inputs, out):
    # runner 2's upload is really runner 1's report.json (copied into runner 2's dir)
    a = _copy(inputs, "s1", out, "shard-1")
    b = _copy(inputs, "s2", out, "shard-2")
    shutil.copy2(a / "report.json", b / "report.json")
    return [str(a), str(b), "-o", str(out / "m")]


def _merge_with_s2_edited(fn, rehash=True):
    def make(inputs, out):
        a = _copy(inputs, "s1", out)
        b = _edit(inputs, out, "s2", fn, rehash=rehash, name="s2")
        return [str(a), str(b), "-o", str(out / "m")]
    return make


def _other_commit(r):
    r["suite"]["commit"] = "0123456789abcdef0123456789abcdef01234567"
    r["suite"]["version"] = "0.1.dev199+g0123456"
    r["tool_version"] = "0.1.dev199+g0123456"


def _other_seed(r):
    r["run"]["seed"] = 1


def _other_matrix(r):
    r["run"]["matrix_sha256"] = "0" * 64


def _strict_on(r):
    r["run"]["strict"] = True
    r["must_pass"]["strict"] = True


def _other_split(r):
    r["run"]["shard"]["count"] = 3


def _other_schema(r):
    r["schema_version"] = r["schema_version"] + 1


def _other_device(r):
    dev = r["environment"]["device"]
    dev.update(requested_kind="cuda", matrix_key="cuda", torch_device="cuda:0",
               name="NVIDIA H100 80GB HBM3")


def _hide_xfail_no_rehash(r):
    for row in _rows(r, "expected-fail"):
        row["outcome"] = "passed"
    _recount(r)


def mk_merge_full_run_plus_shard(inputs, out):
    return [str(_copy(inputs, "base", out)), str(_copy(inputs, "s2", out)), "-o", str(out / "m")]


def mk_merge_test_in_two_shards(inputs, out):
    a = _copy(inputs, "s1", out)
    b = _copy(inputs, "s2", out)
    ra, rb = _load(a), _load(b)
    row = copy.deepcopy(_rows(rb, "passed")[0])        # runner 1 also ran one of runner 2's tests
    row["outcome"] = "failed"
    row["reason"] = "error 3.1 exceeds bound (ratio 3.1)"
    ra["results"].append(row)
    _recount(ra)
    ra["verdict"], ra["exit_status"] = "FAIL", 1
    _save(a, ra)
    _rehash(a)
    return [str(a), str(b), "-o", str(out / "m")]


# --------------------------------------------------------------------------- makers: diff

def mk_diff_self(inputs, out):
    return [str(_copy(inputs, "base", out, "old")), str(_copy(inputs, "base", out, "new"))]


def mk_diff_fixed(inputs, out):
    old = _copy(inputs, "failing", out, "old")

    def fn(r):
        _flip_failed_to(r, "passed")
        _recount(r)
        _set_pass(r)
    new = _edit(inputs, out, "failing", fn, name="new")
    return [str(old), str(new)]


def mk_diff_shard_as_full(inputs, out):
    return [str(_copy(inputs, "base", out, "old")), str(_copy(inputs, "s1", out, "new"))]


def mk_diff_impl_swapped(inputs, out):
    old = _copy(inputs, "base", out, "old")
    new = _edit(inputs, out, "base", _swap_impl_spec, name="new")
    return [str(old), str(new)]


def mk_diff_regression(inputs, out):
    old = _copy(inputs, "base", out, "old")

    def fn(r):
        row = _rows(r, "passed")[0]
        row["outcome"] = "failed"
        row["reason"] = "error exceeds bound"
        _recount(r)
        r["verdict"], r["exit_status"] = "FAIL", 1
    new = _edit(inputs, out, "base", fn, name="new")
    return [str(old), str(new)]


def mk_diff_duplicate_masks_regression(inputs, out):
    old = _copy(inputs, "base", out, "old")

    def fn(r):
        i = next(i for i, row in enumerate(r["results"]) if row["outcome"] == "passed")
        bad = copy.deepcopy(r["results"][i])
        bad["outcome"] = "failed"
        bad["reason"] = "error exceeds bound"
        r["results"].insert(i, bad)                    # failed row first, the passed copy after it
    new = _edit(inputs, out, "base", fn, name="new")
    return [str(old), str(new)]


def mk_diff_xfail_now_passes(inputs, out):
    old = _copy(inputs, "base", out, "old")

    def fn(r):
        for row in _rows(r, "expected-fail"):
            row["outcome"] = "unexpected-pass"
        _recount(r)
        r["verdict"], r["exit_status"] = "FAIL", 1
    new = _edit(inputs, out, "base", fn, name="new")
    return [str(old), str(new)]


def mk_diff_margin_blowup(inputs, out):
    old = _copy(inputs, "base", out, "old")

    def fn(r):
        # the tightest-but-small margin (0.05) grows 18x to 0.9: still passing, much closer
        row = min((x for x in r["results"] if isinstance(x.get("worst_margin"), float)
                   and x["worst_margin"] > 1e-3), key=lambda x: x["worst_margin"])
        old_m = row["worst_margin"]
        row["worst_margin"] = 0.9
        for check in row["checks"]:
            if isinstance(check.get("margin"), float) and check["margin"] == old_m:
                check["measured"] = check["measured"] * 0.9 / old_m
                check["margin"] = 0.9
    new = _edit(inputs, out, "base", fn, name="new")
    return [str(old), str(new), "--fail-on-margin"]


def mk_diff_torch_changed(inputs, out):
    old = _copy(inputs, "base", out, "old")

    def fn(r):
        r["environment"]["torch"] = "2.14.0+cpu"
    new = _edit(inputs, out, "base", fn, name="new")
    return [str(old), str(new)]


def mk_diff_missing_report(inputs, out):
    new = out / "new"
    new.mkdir()
    (new / "summary.md").write_text("# torch-conformance report\n\n- verdict: **PASS**\n")
    return [str(_copy(inputs, "base", out, "old")), str(new)]


def mk_diff_corrupt_json(inputs, out):
    new = _copy(inputs, "base", out, "new")
    text = (new / "report.json").read_text()
    (new / "report.json").write_text(text[: len(text) // 2])   # a truncated upload
    return [str(_copy(inputs, "base", out, "old")), str(new)]


# --------------------------------------------------------------------------- the scenarios

SCENARIOS = [
    # ---- controls: must be accepted
    dict(name="CONTROL verify pristine copy", command="verify", make=mk_verify_pristine("base"),
         why="an untouched report copied to another machine must verify",
         expect_exit=0, expect_words="verified"),
    dict(name="CONTROL verify honest FAIL", command="verify", make=mk_verify_pristine("failing"),
         why="a report whose verdict is FAIL is still an authentic report: verify checks the "
             "report, not the device", expect_exit=0, expect_words="verified"),
    dict(name="CONTROL verify honest strict FAIL", command="verify",
         make=mk_verify_pristine("strict"),
         why="a --strict run that honestly FAILs its must-pass list verifies",
         expect_exit=0, expect_words="verified"),
    dict(name="CONTROL merge two shards", command="merge", make=mk_merge_ok,
         why="the two halves of one run merge into one PASS", expect_exit=0, expect_words=""),
    dict(name="CONTROL diff report with itself", command="diff", make=mk_diff_self,
         why="two copies of the same report: no settings changed, nothing regressed",
         expect_exit=0, expect_words=""),
    dict(name="CONTROL diff fixed tests only", command="diff", make=mk_diff_fixed,
         why="the vendor fixed its failures: NEW is better, not worse, so no exit 1",
         expect_exit=0, expect_words="fixed"),

    # ---- verify: edits the manifest catches
    dict(name="verdict flipped by hand", command="verify", make=mk_verdict_flipped_by_hand,
         why="someone opened report.json in an editor and changed FAIL to PASS before "
             "sending it on", expect_exit=1, expect_words="report.json"),
    dict(name="JSON re-indented", command="verify", make=mk_reformatted,
         why="an editor's JSON formatter re-indented report.json (same data, other bytes): "
             "the file no longer matches its manifest", expect_exit=1, expect_words="report.json"),
    dict(name="trailing newline in summary.md", command="verify", make=mk_trailing_newline,
         why="a one-byte whitespace change to the human summary", expect_exit=1,
         expect_words="summary.md"),
    dict(name="extra file dropped in", command="verify", make=mk_extra_file,
         why="a report.json.orig left next to the (possibly edited) report: 'no file added'",
         expect_exit=1, expect_words="report.json.orig"),
    dict(name="file renamed", command="verify", make=mk_file_renamed,
         why="summary.md renamed to summary.old.md on upload: one listed file gone, one added",
         expect_exit=1, expect_words="summary.md"),
    dict(name="listed file deleted", command="verify", make=mk_file_deleted,
         why="junit.xml (with the failures in it) removed from the directory",
         expect_exit=1, expect_words="junit.xml"),
    dict(name="report.json is a symlink to another run", command="verify", make=mk_symlinked_report,
         why="a FAIL run's report.json replaced by a symlink to a PASS run's report.json",
         expect_exit=1, expect_words="report.json"),
    dict(name="report.json copied from another run", command="verify",
         make=mk_results_copied_from_other_run,
         why="results copied between lab directories: a PASS report.json over a FAIL run's "
             "other files and manifest", expect_exit=1, expect_words="report.json"),
    dict(name="report.json + SHA256SUMS copied from another run", command="verify",
         make=mk_report_and_manifest_copied,
         why="the copier also took the other run's manifest: summary.md/report.html/junit.xml "
             "now disagree with it", expect_exit=1, expect_words=""),
    dict(name="SHA256SUMS deleted", command="verify", make=mk_manifest_deleted,
         why="no manifest at all: nothing can be verified", expect_exit=1,
         expect_words="SHA256SUMS"),
    dict(name="report.json's manifest line dropped", command="verify",
         make=mk_manifest_line_dropped,
         why="the forger removed report.json's line from SHA256SUMS so its hash is not checked: "
             "report.json is then an added file", expect_exit=1, expect_words="report.json"),
    dict(name="journal edited", command="verify", make=mk_journal_edited,
         why="the failing rows scrubbed from journal/journal.jsonl (every file is hashed)",
         expect_exit=1, expect_words="journal"),
    dict(name="no such directory", command="verify", make=mk_no_such_dir,
         why="a typo'd path must not read as 'nothing wrong'", expect_exit=4, expect_words=""),

    # ---- verify: edits with a regenerated manifest (only 'the report adds up' can catch them)
    dict(name="verdict flipped, manifest regenerated", command="verify",
         make=mk_verdict_flipped_rehashed,
         why="FAIL->PASS and exit_status 1->0, then SHA256SUMS regenerated: the verdict is not "
             "the one the results give", expect_exit=1, expect_words="verdict"),
    dict(name="failures relabelled passed, counts stale", command="verify",
         make=mk_failures_relabelled_counts_stale,
         why="failed rows turned to passed and the verdict to PASS, summary counts left as they "
             "were: counts no longer match the results", expect_exit=1, expect_words=""),
    dict(name="strict must-pass failure hidden", command="verify", make=mk_strict_mustpass_hidden,
         why="a --strict run that failed its must-pass list: must_pass rewritten to all-passed "
             "and verdict PASS; the listed tests are still not in the results",
         expect_exit=1, expect_words="must"),
    dict(name="strict verdict flipped only", command="verify", make=mk_strict_verdict_only,
         why="a PASS over a failed must-pass list under --strict (README: does not verify)",
         expect_exit=1, expect_words="must"),
    dict(name="truncated run sold as PASS", command="verify", make=mk_truncated_run_sold_as_pass,
         why="a run cut short (one test not-run, counts recomputed honestly) keeps the verdict "
             "PASS: a not-run makes it INCOMPLETE", expect_exit=1, expect_words="verdict"),
    dict(name="NaN collected", command="verify", make=mk_nan_collected,
         why="collected written as NaN (comparisons with NaN are all False, so a naive "
             "'sum != collected' check passes)", expect_exit=1, expect_words="collected"),
    dict(name="'inf' string in a count", command="verify", make=mk_inf_count,
         why="a count written as the non-finite string 'inf' (the report's own encoding of "
             "non-finite numbers)", expect_exit=1, expect_words=""),
    dict(name="duplicate result row, counts recomputed", command="verify",
         make=mk_duplicate_row_recounted,
         why="two reports concatenated / a row pasted twice: one test counted twice, collected "
             "bumped to match", expect_exit=1, expect_words="",
         stretch="README: 'Every collected test ends as exactly one outcome' / one row per test"),
    dict(name="failures laundered as expected-fail", command="verify",
         make=mk_failure_laundered_as_xfail,
         why="failed rows relabelled expected-fail (counts, verdict PASS, manifest all redone) "
             "though no matrix entry covers them", expect_exit=1, expect_words="",
         stretch="expected-fail is 'a known bug listed in the matrix'; the rows name no entry"),
    dict(name="per-area table doctored", command="verify", make=mk_areas_table_doctored,
         why="the area x implementation table (what report.html shows first) says 0 failed "
             "for the vendor build; summary and results untouched, manifest redone",
         expect_exit=1, expect_words="",
         stretch="README says 'counts per outcome ... match the results'; areas are counts too"),

    dict(name="unknown outcome label", command="verify", make=mk_unknown_outcome,
         why="failed rows relabelled 'flaky' (no such outcome), counts recomputed with that key, "
             "verdict PASS, manifest redone", expect_exit=1, expect_words=""),
    dict(name="failed rows deleted, counts redone", command="verify", make=mk_failed_rows_deleted,
         why="the failing rows cut out of results, collected/summary/verdict recomputed and "
             "SHA256SUMS redone; journal/manifest.json (the collection) still lists them",
         expect_exit=1, expect_words="",
         stretch="the README's checks are internal sums; only a cross-check with the journal "
                 "that ships in the same directory catches it"),
    dict(name="strict run relabelled non-strict", command="verify",
         make=mk_strict_declared_non_strict,
         why="a --strict run that failed its must-pass list re-labelled run.strict=false and "
             "PASS; run.command still says --strict", expect_exit=1, expect_words="",
         stretch="needs a cross-check of run.strict against run.command"),
    dict(name="exit_status contradicts verdict", command="verify", make=mk_exit_status_contradicts,
         why="verdict FAIL kept but exit_status set to 0 (what a CI gate reading the JSON sees)",
         expect_exit=1, expect_words="",
         stretch="the Outcomes table ties FAIL to exit status 1"),

    # ---- merge
    dict(name="merge with a shard missing", command="merge", make=mk_merge_missing,
         why="runner 2 of 2 never uploaded; shard 1 alone passed off as the run",
         expect_exit=1, expect_words="missing", nothing_written=True),
    dict(name="merge the same shard twice", command="merge", make=mk_merge_same_twice,
         why="two runners uploaded the same shard-1 artefact (a CI cache hit)",
         expect_exit=4, expect_words="", nothing_written=True),
    dict(name="merge shard-2 dir holding shard-1's report.json", command="merge",
         make=mk_merge_renamed_copy,
         why="results copied between dirs: shard-2/report.json is really shard 1's",
         expect_exit=4, expect_words="", nothing_written=True),
    dict(name="merge shard from another commit", command="merge",
         make=_merge_with_s2_edited(_other_commit),
         why="shard 2 reused from yesterday's run on another suite commit",
         expect_exit=1, expect_words="commit", nothing_written=True),
    dict(name="merge shard with another seed", command="merge",
         make=_merge_with_s2_edited(_other_seed),
         why="shard 2 reused from a run with another --seed", expect_exit=1,
         expect_words="seed", nothing_written=True),
    dict(name="merge shard with another matrix", command="merge",
         make=_merge_with_s2_edited(_other_matrix),
         why="shard 2 ran against a locally edited device_matrix.yaml", expect_exit=1,
         expect_words="matri", nothing_written=True),
    dict(name="merge shard on another device", command="merge",
         make=_merge_with_s2_edited(_other_device),
         why="shard 2's directory came from the GPU queue", expect_exit=1,
         expect_words="device", nothing_written=True),
    dict(name="merge strict with non-strict shard", command="merge",
         make=_merge_with_s2_edited(_strict_on),
         why="one runner ran --strict, the other did not", expect_exit=1,
         expect_words="strict", nothing_written=True),
    dict(name="merge impl swapped behind same name", command="merge",
         make=_merge_with_s2_edited(_swap_impl_spec),
         why="shard 2 tested another module:attr under the display name torch.special.erfcx",
         expect_exit=1, expect_words="", nothing_written=True),
    dict(name="merge shards of different splits", command="merge",
         make=_merge_with_s2_edited(_other_split),
         why="shard 1/2 merged with a shard 2/3 from another fleet size", expect_exit=4,
         expect_words="", nothing_written=True),
    dict(name="merge different report schemas", command="merge",
         make=_merge_with_s2_edited(_other_schema),
         why="shard 2 written by a newer tool with another schema_version", expect_exit=1,
         expect_words="schema", nothing_written=True),
    dict(name="merge a full run with a shard", command="merge", make=mk_merge_full_run_plus_shard,
         why="an unsharded run's dir mixed into the shard uploads (not one split)",
         expect_exit=4, expect_words="", nothing_written=True,
         stretch="'shards of different splits' (no split vs 2/2) -> 4; a refusal with 1 would "
                 "also be defensible, accepting it (0) would not"),
    dict(name="merge keeps worst of a duplicated test", command="merge",
         make=mk_merge_test_in_two_shards,
         why="runner 1 also ran one of runner 2's tests and it failed there; runner 2 says passed: "
             "the merged report must keep the failure", expect_exit=1, expect_words=""),
    dict(name="merge launders a tampered shard", command="merge",
         make=_merge_with_s2_edited(_hide_xfail_no_rehash, rehash=False),
         why="shard 2's report.json edited after the run (its SHA256SUMS no longer matches); "
             "merge would write a fresh, valid SHA256SUMS over the edit", expect_exit=1,
         expect_words="", nothing_written=True,
         stretch="README does not say merge verifies its inputs; a trustworthy merge should"),

    # ---- diff
    dict(name="CONTROL diff report.json vs dir", command="diff", make=mk_diff_file_vs_dir,
         why="OLD given as a report.json file, NEW as a directory, same report: documented input "
             "forms", expect_exit=0, expect_words=""),
    dict(name="diff shard passed off as full run", command="diff", make=mk_diff_shard_as_full,
         why="tonight's 'full' report is only shard 1/2: four tests that ran last night are gone",
         expect_exit=1, expect_words=""),
    dict(name="diff impl swapped behind same name", command="diff", make=mk_diff_impl_swapped,
         why="the vendor swapped the implementation behind the same display name",
         expect_exit=1, expect_words="implementation"),
    dict(name="diff torch build changed", command="diff", make=mk_diff_torch_changed,
         why="NEW ran on another torch build: not like with like", expect_exit=1,
         expect_words="torch"),
    dict(name="diff a regression", command="diff", make=mk_diff_regression,
         why="a test that passed last night fails tonight", expect_exit=1, expect_words=""),
    dict(name="diff xfail now passes", command="diff", make=mk_diff_xfail_now_passes,
         why="a known bug got fixed: unexpected-pass counts as a regression (strict xfail)",
         expect_exit=1, expect_words=""),
    dict(name="diff duplicate row masks a regression", command="diff",
         make=mk_diff_duplicate_masks_regression,
         why="NEW has the same test twice, failed then passed (concatenated reports): a "
             "last-row-wins reader hides the failure", expect_exit=1, expect_words="",
         stretch="worst-outcome-wins is what merge documents for duplicates"),
    dict(name="diff margin grew 18x with --fail-on-margin", command="diff",
         make=mk_diff_margin_blowup,
         why="a test still passes but its margin went from 0.05 to 0.9 of its bound",
         expect_exit=1, expect_words=""),
    dict(name="diff NEW has no report.json", command="diff", make=mk_diff_missing_report,
         why="an upload that kept only summary.md: bad input", expect_exit=4, expect_words=""),
    dict(name="diff NEW report.json truncated", command="diff", make=mk_diff_corrupt_json,
         why="a half-uploaded report.json: bad input, not 'no change'", expect_exit=4,
         expect_words=""),
]


# --------------------------------------------------------------------------- the runner

def build_inputs(root):
    base = ["-p", "no:cacheprovider", "-n", "0", "-q",
            str(REPO / "conformance/areas/special/test_erfcx.py"), "-k", "float32"]
    runs = {
        "base": [],
        "s1": ["--shard=1/2"],
        "s2": ["--shard=2/2"],
        "strict": ["--strict"],
        "failing": ["--impl=special.erfcx=planted.vendor_builds:build_2"],
    }
    inputs = {}
    root.mkdir(parents=True, exist_ok=True)
    for name, extra in runs.items():
        env = dict(os.environ)
        env.pop("PYTEST_XDIST_WORKER", None)  # a child of an xdist worker is not one
        env.pop("PYTEST_ADDOPTS", None)
        if name == "failing":
            env["PYTHONPATH"] = str(REPO / "tests")
        dest = root / name
        cmd = [*PYTEST, *base, *extra, f"--report={dest}"]
        print(f"building {name}: {' '.join(cmd)}", flush=True)
        proc = subprocess.run(cmd, cwd=str(root), env=env, capture_output=True, text=True)
        if not (dest / "report.json").is_file():
            sys.exit(f"could not build {name} (exit {proc.returncode}):\n{proc.stdout[-3000:]}"
                     f"\n{proc.stderr[-3000:]}")
        inputs[name] = dest
    return inputs


def _fingerprint(inputs):
    return {k: sorted((p.relative_to(v).as_posix(), p.stat().st_size, p.stat().st_mtime_ns)
                      for p in v.rglob("*") if p.is_file()) for k, v in inputs.items()}


def run_scenarios(inputs, work):
    before = _fingerprint(inputs)
    rows = []
    for i, sc in enumerate(SCENARIOS):
        out = work / f"{i:02d}"
        out.mkdir()
        args = sc["make"](inputs, out)
        proc = subprocess.run([*TOOL, sc["command"], *args], cwd=str(work),
                              capture_output=True, text=True)
        text = proc.stdout + proc.stderr
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        status = "OK" if proc.returncode == sc["expect_exit"] else "MISS"
        notes = []
        if "Traceback (most recent call last)" in text:
            # exit 1 from an uncaught exception is Python's, not a verdict
            status = "CRASH"
            notes.append(text.strip().splitlines()[-1][:80])
        if status == "OK" and sc.get("expect_words") and \
                sc["expect_words"].lower() not in text.lower():
            notes.append(f"no '{sc['expect_words']}' in output")
        if sc.get("nothing_written") and "-o" in args:
            o = pathlib.Path(args[args.index("-o") + 1])
            if o.exists() and any(o.iterdir()):
                notes.append("refused merge wrote output")
                status = "MISS" if proc.returncode == sc["expect_exit"] else status
        rows.append((sc["name"], sc["expect_exit"], proc.returncode, status,
                     "; ".join(notes), first, text))
    if _fingerprint(inputs) != before:
        sys.exit("BUG: a scenario modified the pristine inputs")
    return rows


def main(argv=None):
    keep = os.environ.get("BT_INPUTS")
    with tempfile.TemporaryDirectory(prefix="blind-trust-") as tmp:
        tmp = pathlib.Path(tmp)
        if keep and all((pathlib.Path(keep) / k / "report.json").is_file()
                        for k in ("base", "s1", "s2", "failing", "strict")):
            inputs = {k: pathlib.Path(keep) / k for k in ("base", "s1", "s2", "failing", "strict")}
        else:
            inputs = build_inputs(tmp / "inputs")
        work = tmp / "work"
        work.mkdir()
        rows = run_scenarios(inputs, work)
    w = max(len(r[0]) for r in rows)
    print(f"{'scenario':<{w}}  exp  got  result  first line of output")
    for name, exp, got, status, notes, first, _ in rows:
        label = status + (f" ({notes})" if notes else "")
        print(f"{name:<{w}}  {exp:>3}  {got:>3}  {label:<6}  {first[:110]}")
    misses = [r for r in rows if r[3] != "OK"]
    print(f"\n{len(rows) - len(misses)}/{len(rows)} as documented; {len(misses)} MISS/CRASH")
    if os.environ.get("BT_VERBOSE"):
        for name, exp, got, _status, _notes, _first, text in misses:
            print(f"\n--- {name} (expected {exp}, got {got})\n{text[-2000:]}")
    return 1 if misses else 0


if __name__ == "__main__":
    sys.exit(main())
