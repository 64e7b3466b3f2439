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

import os
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
TOOL = [sys.executable, "-m", "conformance.cli"]  # torch-conformance, in this interpreter
PYTEST = [sys.executable, "-m", "pytest"]




if __package__ in (None, ""):  # run as a script: the repository's root on the path
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from tests.planted import blind_trust_forgeries as f  # noqa: E402

# --------------------------------------------------------------------------- the scenarios

SCENARIOS = [
    # ---- controls: must be accepted
    dict(name="CONTROL verify pristine copy", command="verify", make=f.mk_verify_pristine("base"),
         why="an untouched report copied to another machine must verify",
         expect_exit=0, expect_words="verified"),
    dict(name="CONTROL verify honest FAIL", command="verify", make=f.mk_verify_pristine("failing"),
         why="a report whose verdict is FAIL is still an authentic report: verify checks the "
             "report, not the device", expect_exit=0, expect_words="verified"),
    dict(name="CONTROL verify honest strict FAIL", command="verify",
         make=f.mk_verify_pristine("strict"),
         why="a --strict run that honestly FAILs its must-pass list verifies",
         expect_exit=0, expect_words="verified"),
    dict(name="CONTROL merge two shards", command="merge", make=f.mk_merge_ok,
         why="the two halves of one run merge into one PASS", expect_exit=0, expect_words=""),
    dict(name="CONTROL diff report with itself", command="diff", make=f.mk_diff_self,
         why="two copies of the same report: no settings changed, nothing regressed",
         expect_exit=0, expect_words=""),
    dict(name="CONTROL diff fixed tests only", command="diff", make=f.mk_diff_fixed,
         why="the vendor fixed its failures: NEW is better, not worse, so no exit 1",
         expect_exit=0, expect_words="fixed"),

    # ---- verify: edits the manifest catches
    dict(name="verdict flipped by hand", command="verify", make=f.mk_verdict_flipped_by_hand,
         why="someone opened report.json in an editor and changed FAIL to PASS before "
             "sending it on", expect_exit=1, expect_words="report.json"),
    dict(name="JSON re-indented", command="verify", make=f.mk_reformatted,
         why="an editor's JSON formatter re-indented report.json (same data, other bytes): "
             "the file no longer matches its manifest", expect_exit=1, expect_words="report.json"),
    dict(name="trailing newline in summary.md", command="verify", make=f.mk_trailing_newline,
         why="a one-byte whitespace change to the human summary", expect_exit=1,
         expect_words="summary.md"),
    dict(name="extra file dropped in", command="verify", make=f.mk_extra_file,
         why="a report.json.orig left next to the (possibly edited) report: 'no file added'",
         expect_exit=1, expect_words="report.json.orig"),
    dict(name="file renamed", command="verify", make=f.mk_file_renamed,
         why="summary.md renamed to summary.old.md on upload: one listed file gone, one added",
         expect_exit=1, expect_words="summary.md"),
    dict(name="listed file deleted", command="verify", make=f.mk_file_deleted,
         why="junit.xml (with the failures in it) removed from the directory",
         expect_exit=1, expect_words="junit.xml"),
    dict(name="report.json is a symlink to another run", command="verify",
         make=f.mk_symlinked_report,
         why="a FAIL run's report.json replaced by a symlink to a PASS run's report.json",
         expect_exit=1, expect_words="report.json"),
    dict(name="report.json copied from another run", command="verify",
         make=f.mk_results_copied_from_other_run,
         why="results copied between lab directories: a PASS report.json over a FAIL run's "
             "other files and manifest", expect_exit=1, expect_words="report.json"),
    dict(name="report.json + SHA256SUMS copied from another run", command="verify",
         make=f.mk_report_and_manifest_copied,
         why="the copier also took the other run's manifest: summary.md/report.html/junit.xml "
             "now disagree with it", expect_exit=1, expect_words=""),
    dict(name="SHA256SUMS deleted", command="verify", make=f.mk_manifest_deleted,
         why="no manifest at all: nothing can be verified", expect_exit=1,
         expect_words="SHA256SUMS"),
    dict(name="report.json's manifest line dropped", command="verify",
         make=f.mk_manifest_line_dropped,
         why="the forger removed report.json's line from SHA256SUMS so its hash is not checked: "
             "report.json is then an added file", expect_exit=1, expect_words="report.json"),
    dict(name="journal edited", command="verify", make=f.mk_journal_edited,
         why="the failing rows scrubbed from journal/journal.jsonl (every file is hashed)",
         expect_exit=1, expect_words="journal"),
    dict(name="no such directory", command="verify", make=f.mk_no_such_dir,
         why="a typo'd path must not read as 'nothing wrong'", expect_exit=4, expect_words=""),

    # ---- verify: edits with a regenerated manifest (only 'the report adds up' can catch them)
    dict(name="verdict flipped, manifest regenerated", command="verify",
         make=f.mk_verdict_flipped_rehashed,
         why="FAIL->PASS and exit_status 1->0, then SHA256SUMS regenerated: the verdict is not "
             "the one the results give", expect_exit=1, expect_words="verdict"),
    dict(name="failures relabelled passed, counts stale", command="verify",
         make=f.mk_failures_relabelled_counts_stale,
         why="failed rows turned to passed and the verdict to PASS, summary counts left as they "
             "were: counts no longer match the results", expect_exit=1, expect_words=""),
    dict(name="strict must-pass failure hidden", command="verify", make=f.mk_strict_mustpass_hidden,
         why="a --strict run that failed its must-pass list: must_pass rewritten to all-passed "
             "and verdict PASS; the listed tests are still not in the results",
         expect_exit=1, expect_words="must"),
    dict(name="strict verdict flipped only", command="verify", make=f.mk_strict_verdict_only,
         why="a PASS over a failed must-pass list under --strict (README: does not verify)",
         expect_exit=1, expect_words="must"),
    dict(name="truncated run sold as PASS", command="verify", make=f.mk_truncated_run_sold_as_pass,
         why="a run cut short (one test not-run, counts recomputed honestly) keeps the verdict "
             "PASS: a not-run makes it INCOMPLETE", expect_exit=1, expect_words="verdict"),
    dict(name="NaN collected", command="verify", make=f.mk_nan_collected,
         why="collected written as NaN (comparisons with NaN are all False, so a naive "
             "'sum != collected' check passes)", expect_exit=1, expect_words="collected"),
    dict(name="'inf' string in a count", command="verify", make=f.mk_inf_count,
         why="a count written as the non-finite string 'inf' (the report's own encoding of "
             "non-finite numbers)", expect_exit=1, expect_words=""),
    dict(name="duplicate result row, counts recomputed", command="verify",
         make=f.mk_duplicate_row_recounted,
         why="two reports concatenated / a row pasted twice: one test counted twice, collected "
             "bumped to match", expect_exit=1, expect_words="",
         stretch="README: 'Every collected test ends as exactly one outcome' / one row per test"),
    dict(name="failures laundered as expected-fail", command="verify",
         make=f.mk_failure_laundered_as_xfail,
         why="failed rows relabelled expected-fail (counts, verdict PASS, manifest all redone) "
             "though no matrix entry covers them", expect_exit=1, expect_words="",
         stretch="expected-fail is 'a known bug listed in the matrix'; the rows name no entry"),
    dict(name="per-area table doctored", command="verify", make=f.mk_areas_table_doctored,
         why="the area x implementation table (what report.html shows first) says 0 failed "
             "for the vendor build; summary and results untouched, manifest redone",
         expect_exit=1, expect_words="",
         stretch="README says 'counts per outcome ... match the results'; areas are counts too"),

    dict(name="unknown outcome label", command="verify", make=f.mk_unknown_outcome,
         why="failed rows relabelled 'flaky' (no such outcome), counts recomputed with that key, "
             "verdict PASS, manifest redone", expect_exit=1, expect_words=""),
    dict(name="failed rows deleted, counts redone", command="verify", make=f.mk_failed_rows_deleted,
         why="the failing rows cut out of results, collected/summary/verdict recomputed and "
             "SHA256SUMS redone; journal/manifest.json (the collection) still lists them",
         expect_exit=1, expect_words="",
         stretch="the README's checks are internal sums; only a cross-check with the journal "
                 "that ships in the same directory catches it"),
    dict(name="strict run relabelled non-strict", command="verify",
         make=f.mk_strict_declared_non_strict,
         why="a --strict run that failed its must-pass list re-labelled run.strict=false and "
             "PASS; run.command still says --strict", expect_exit=1, expect_words="",
         stretch="needs a cross-check of run.strict against run.command"),
    dict(name="exit_status contradicts verdict", command="verify",
         make=f.mk_exit_status_contradicts,
         why="verdict FAIL kept but exit_status set to 0 (what a CI gate reading the JSON sees)",
         expect_exit=1, expect_words="",
         stretch="the Outcomes table ties FAIL to exit status 1"),

    # ---- merge
    dict(name="merge with a shard missing", command="merge", make=f.mk_merge_missing,
         why="runner 2 of 2 never uploaded; shard 1 alone passed off as the run",
         expect_exit=1, expect_words="missing", nothing_written=True),
    dict(name="merge the same shard twice", command="merge", make=f.mk_merge_same_twice,
         why="two runners uploaded the same shard-1 artefact (a CI cache hit)",
         expect_exit=4, expect_words="", nothing_written=True),
    dict(name="merge shard-2 dir holding shard-1's report.json", command="merge",
         make=f.mk_merge_renamed_copy,
         why="results copied between dirs: shard-2/report.json is really shard 1's",
         expect_exit=4, expect_words="", nothing_written=True),
    dict(name="merge shard from another commit", command="merge",
         make=f._merge_with_s2_edited(f._other_commit),
         why="shard 2 reused from yesterday's run on another suite commit",
         expect_exit=1, expect_words="commit", nothing_written=True),
    dict(name="merge shard with another seed", command="merge",
         make=f._merge_with_s2_edited(f._other_seed),
         why="shard 2 reused from a run with another --seed", expect_exit=1,
         expect_words="seed", nothing_written=True),
    dict(name="merge shard with another matrix", command="merge",
         make=f._merge_with_s2_edited(f._other_matrix),
         why="shard 2 ran against a locally edited device_matrix.yaml", expect_exit=1,
         expect_words="matri", nothing_written=True),
    dict(name="merge shard on another device", command="merge",
         make=f._merge_with_s2_edited(f._other_device),
         why="shard 2's directory came from the GPU queue", expect_exit=1,
         expect_words="device", nothing_written=True),
    dict(name="merge strict with non-strict shard", command="merge",
         make=f._merge_with_s2_edited(f._strict_on),
         why="one runner ran --strict, the other did not", expect_exit=1,
         expect_words="strict", nothing_written=True),
    dict(name="merge impl swapped behind same name", command="merge",
         make=f._merge_with_s2_edited(f._swap_impl_spec),
         why="shard 2 tested another module:attr under the display name torch.special.erfcx",
         expect_exit=1, expect_words="", nothing_written=True),
    dict(name="merge shards of different splits", command="merge",
         make=f._merge_with_s2_edited(f._other_split),
         why="shard 1/2 merged with a shard 2/3 from another fleet size", expect_exit=4,
         expect_words="", nothing_written=True),
    dict(name="merge different report schemas", command="merge",
         make=f._merge_with_s2_edited(f._other_schema),
         why="shard 2 written by a newer tool with another schema_version", expect_exit=1,
         expect_words="schema", nothing_written=True),
    dict(name="merge a full run with a shard", command="merge", make=f.mk_merge_full_run_plus_shard,
         why="an unsharded run's dir mixed into the shard uploads (not one split)",
         expect_exit=4, expect_words="", nothing_written=True,
         stretch="'shards of different splits' (no split vs 2/2) -> 4; a refusal with 1 would "
                 "also be defensible, accepting it (0) would not"),
    dict(name="merge keeps worst of a duplicated test", command="merge",
         make=f.mk_merge_test_in_two_shards,
         why="runner 1 also ran one of runner 2's tests and it failed there; runner 2 says passed: "
             "the merged report must keep the failure", expect_exit=1, expect_words=""),
    dict(name="merge launders a tampered shard", command="merge",
         make=f._merge_with_s2_edited(f._hide_xfail_no_rehash, rehash=False),
         why="shard 2's report.json edited after the run (its SHA256SUMS no longer matches); "
             "merge would write a fresh, valid SHA256SUMS over the edit", expect_exit=1,
         expect_words="", nothing_written=True,
         stretch="README does not say merge verifies its inputs; a trustworthy merge should"),

    # ---- diff
    dict(name="CONTROL diff report.json vs dir", command="diff", make=f.mk_diff_file_vs_dir,
         why="OLD given as a report.json file, NEW as a directory, same report: documented input "
             "forms", expect_exit=0, expect_words=""),
    dict(name="diff shard passed off as full run", command="diff", make=f.mk_diff_shard_as_full,
         why="tonight's 'full' report is only shard 1/2: four tests that ran last night are gone",
         expect_exit=1, expect_words=""),
    dict(name="diff impl swapped behind same name", command="diff", make=f.mk_diff_impl_swapped,
         why="the vendor swapped the implementation behind the same display name",
         expect_exit=1, expect_words="implementation"),
    dict(name="diff torch build changed", command="diff", make=f.mk_diff_torch_changed,
         why="NEW ran on another torch build: not like with like", expect_exit=1,
         expect_words="torch"),
    dict(name="diff a regression", command="diff", make=f.mk_diff_regression,
         why="a test that passed last night fails tonight", expect_exit=1, expect_words=""),
    dict(name="diff xfail now passes", command="diff", make=f.mk_diff_xfail_now_passes,
         why="a known bug got fixed: unexpected-pass counts as a regression (strict xfail)",
         expect_exit=1, expect_words=""),
    dict(name="diff duplicate row masks a regression", command="diff",
         make=f.mk_diff_duplicate_masks_regression,
         why="NEW has the same test twice, failed then passed (concatenated reports): a "
             "last-row-wins reader hides the failure", expect_exit=1, expect_words="",
         stretch="worst-outcome-wins is what merge documents for duplicates"),
    dict(name="diff margin grew 18x with --fail-on-margin", command="diff",
         make=f.mk_diff_margin_blowup,
         why="a test still passes but its margin went from 0.05 to 0.9 of its bound",
         expect_exit=1, expect_words=""),
    dict(name="diff NEW has no report.json", command="diff", make=f.mk_diff_missing_report,
         why="an upload that kept only summary.md: bad input", expect_exit=4, expect_words=""),
    dict(name="diff NEW report.json truncated", command="diff", make=f.mk_diff_corrupt_json,
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
