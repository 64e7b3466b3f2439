"""The forgeries of ``blind_trust_breakers.py``: each ``mk_*`` copies pristine report
directories and doctors, mixes up or swaps them the way a lab report goes wrong, returning
the arguments of ``torch-conformance verify | merge | diff``. Written from the README alone
(see that module's docstring)."""

import copy
import hashlib
import json
import pathlib
import shutil

REPO = pathlib.Path(__file__).resolve().parents[2]

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


def _old_new(inputs, out, fn):
    """OLD: the base report as it is; NEW: the base report edited by ``fn`` (rehashed)."""
    old = _copy(inputs, "base", out, "old")
    return [str(old), str(_edit(inputs, out, "base", fn, name="new"))]


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
    return _old_new(inputs, out, _swap_impl_spec)


def mk_diff_regression(inputs, out):
    def fn(r):
        row = _rows(r, "passed")[0]
        row["outcome"] = "failed"
        row["reason"] = "error exceeds bound"
        _recount(r)
        r["verdict"], r["exit_status"] = "FAIL", 1
    return _old_new(inputs, out, fn)


def mk_diff_duplicate_masks_regression(inputs, out):
    def fn(r):
        i = next(i for i, row in enumerate(r["results"]) if row["outcome"] == "passed")
        bad = copy.deepcopy(r["results"][i])
        bad["outcome"] = "failed"
        bad["reason"] = "error exceeds bound"
        r["results"].insert(i, bad)                    # failed row first, the passed copy after it
    return _old_new(inputs, out, fn)


def mk_diff_xfail_now_passes(inputs, out):
    def fn(r):
        for row in _rows(r, "expected-fail"):
            row["outcome"] = "unexpected-pass"
        _recount(r)
        r["verdict"], r["exit_status"] = "FAIL", 1
    return _old_new(inputs, out, fn)


def mk_diff_margin_blowup(inputs, out):
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
    return [*_old_new(inputs, out, fn), "--fail-on-margin"]


def mk_diff_torch_changed(inputs, out):
    def fn(r):
        r["environment"]["torch"] = "2.14.0+cpu"
    return _old_new(inputs, out, fn)


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
