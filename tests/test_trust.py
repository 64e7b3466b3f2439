"""Results a lab can trust and compare (issue 38), as planted scenarios: a merge with a
shard missing, a diff across changed settings, an implementation that takes a shipped one's
name, a tampered report, the --strict must-pass list, and matrix entries that touch only the
implementations they name (correct stricter outside implementations pass where torch has an
expected failure; a user's wrapper of torch is failed for torch's bug unless it says it
wraps the shipped one)."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conformance.harness.matrix import DEFAULT_MATRIX
from tests.conftest import PLANTED_SELECTION, run_suite

ROOT = Path(__file__).resolve().parents[1]
HARNESS_ONLY = pytest.mark.harness_only  # reports, not torch's behaviour: newest torch only in CI


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "conformance.cli", *args],
                          capture_output=True, text=True, timeout=300, check=False)


def _write(tmp_path: Path, name: str, report: dict) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "report.json").write_text(json.dumps(report))
    return folder


# ---- whose bug: matrix entries touch the implementations they name ---------------------

OUTSIDE = [
    "--impl=indexing.index_select=planted.outside_impls:index_select",
    "--impl=indexing.embedding_bag=planted.outside_impls:embedding_bag",
    "--impl=indexing.embedding_bag=planted.trust_impls:plain_wrapper",
    "--impl=indexing.embedding_bag=planted.trust_impls:declared_wrapper",
    "--impl=export=planted.outside_impls:torchscript",
    "--impl=special.erfcx=planted.trust_impls:declared_erfcx",
]


@pytest.fixture(scope="module")
def whose_bug(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("whose-bug")
    areas = ROOT / "conformance" / "areas"
    paths = [str(areas / "indexing"), str(areas / "export" / "test_export.py"),
             str(areas / "special")]
    run = run_suite([*paths, *OUTSIDE, "-n", "2", "-q", "-k",
                     "test_compiled or offset_decreasing or (roundtrip and rnn_ and seq) "
                     "or test_backward_huge or test_backward_large"],
                    tmp, timeout=900)
    assert run.report is not None, run.output[-3000:]
    return {r["nodeid"]: r for r in run.report["results"]}


def _of(results: dict, impl: str, words: str) -> list[dict]:
    found = [r for n, r in results.items() if r["impl"] == impl and words in n]
    assert found, (impl, words, sorted(results)[:20])
    return found


def test_outside_implementations_pass_where_torch_is_expected_to_fail(whose_bug):
    # the shipped ones: their entries apply (strict expected failures of torch's bugs)
    for impl, words in (("F.embedding_bag", "offset_decreasing"),
                        ("torch.index_select", "test_compiled"),
                        ("torch.Tensor.index_add_", "test_compiled"),
                        ("export", "rnn_tanh-seq")):
        assert {r["outcome"] for r in _of(whose_bug, impl, words)} == {"expected-fail"}, impl
    # a correct stricter outside implementation: a plain pass, not XPASS
    for impl, words in (("planted.outside_impls:embedding_bag", "offset_decreasing"),
                        ("torchscript", "float32-rnn_")):
        rows = _of(whose_bug, impl, words)
        assert {r["outcome"] for r in rows} == {"passed"}, [(r["nodeid"], r["reason"])
                                                           for r in rows]
        assert all(not r["matrix_entries"] for r in rows)
    # torch.compile(impl) only for an implementation that declares it can be compiled
    (compiled,) = _of(whose_bug, "planted.outside_impls:index_select", "test_compiled")
    assert compiled["outcome"] == "unsupported" and "compile" in compiled["reason"]
    # a user's wrapper of torch has torch's bug: failed, unless it declares what it wraps
    # (one test with the above: the run is a module fixture, set up once per xdist worker)
    plain = _of(whose_bug, "user.embedding_bag", "offset_decreasing")
    assert {r["outcome"] for r in plain} == {"failed"}, plain
    assert all("error raised" in r["reason"] for r in plain)
    declared = _of(whose_bug, "user.embedding_bag_declared", "offset_decreasing")
    assert {r["outcome"] for r in declared} == {"expected-fail"}
    assert all(r["matrix_entries"] for r in declared)
    # entries that name the shipped one in their match (test_backward_large[torch.special.
    # erfcx-*]) reach a declared wrapper's ids too: its outcomes are the shipped one's
    for words in ("test_backward_large", "test_backward_huge"):
        shipped = {r["nodeid"].replace("torch.special.erfcx", "X"): r["outcome"]
                   for r in _of(whose_bug, "torch.special.erfcx", words)}
        wrapped = {r["nodeid"].replace("user.erfcx_declared", "X"): r["outcome"]
                   for r in _of(whose_bug, "user.erfcx_declared", words)}
        assert wrapped == shipped and "expected-fail" in shipped.values(), (shipped, wrapped)


# ---- the suite's version, from git -------------------------------------------------------

@HARNESS_ONLY
def test_every_report_names_the_suite_commit(erfcx_runs):
    suite = erfcx_runs["clean"].report["suite"]
    assert suite["version"] == erfcx_runs["clean"].report["tool_version"]
    release = "dev" not in suite["version"] and "+" not in suite["version"]
    if (ROOT / ".git").exists():
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        assert suite["commit"] == head and suite["source"] == "git checkout"
        if release:  # a plain X.Y.Z only where git has its tag (CHANGELOG.md's releases)
            tags = subprocess.run(["git", "-C", str(ROOT), "tag", "-l", f"v{suite['version']}"],
                                  capture_output=True, text=True, check=True).stdout.split()
            assert tags == [f"v{suite['version']}"], suite


# ---- a tampered report -------------------------------------------------------------------

@HARNESS_ONLY
def test_verify_finds_a_tampered_report(erfcx_runs, tmp_path):
    folder = tmp_path / "r"
    shutil.copytree(erfcx_runs["planted"].report_dir, folder)
    ok = cli("verify", str(folder))
    assert ok.returncode == 0 and "verified" in ok.stdout, ok.stdout + ok.stderr
    assert "SHA256SUMS" in {p.name for p in folder.iterdir()}
    # one failure rewritten as a pass: the manifest says report.json changed ...
    report = json.loads((folder / "report.json").read_text())
    failed = next(r for r in report["results"] if r["outcome"] == "failed")
    failed["outcome"] = "passed"
    (folder / "report.json").write_text(json.dumps(report))
    bad = cli("verify", str(folder))
    assert bad.returncode == 1 and "report.json: changed" in bad.stdout, bad.stdout
    # ... and with the manifest rewritten too, the counts no longer add up
    subprocess.run(["sh", "-c", "sha256sum $(find . -type f ! -name SHA256SUMS | sed "
                    "'s|^./||' | sort) > SHA256SUMS"], cwd=folder, check=True)
    again = cli("verify", str(folder))
    assert again.returncode == 1 and "report.json" not in again.stdout.split("summary")[0]
    assert "the results have" in again.stdout, again.stdout
    # a file added after the run, one removed
    (folder / "extra.txt").write_text("x")
    (folder / "summary.md").unlink()
    out = cli("verify", str(folder)).stdout
    assert "extra.txt: not in SHA256SUMS" in out and "summary.md: listed" in out, out
    assert "is not a report directory" in cli("verify", str(tmp_path / "nowhere")).stderr


# ---- merge: shards are partial runs -------------------------------------------------------

@HARNESS_ONLY
def test_merge_refuses_reports_of_different_settings(erfcx_runs, tmp_path):
    base = erfcx_runs["clean"].report
    for where, key, value, words in (
            ("run", "seed", 7, "different seeds"),
            ("run", "profile", "dev", "different profiles"),
            ("suite", "commit", "0" * 40, "different suite versions"),
            ("run", "matrix_sha256", "f" * 64, "different device matrices")):
        other = copy.deepcopy(base)
        other[where][key] = value
        folder = _write(tmp_path, f"{key}", other)
        args = ("merge", str(erfcx_runs["clean"].report_dir), str(folder), "-o")
        proc = cli(*args, str(tmp_path / f"out-{key}"))
        assert proc.returncode == 1 and words in proc.stderr, (key, proc.stderr)
        assert "--allow-partial" in proc.stderr and proc.stderr.count("\n") == 1
        assert not (tmp_path / f"out-{key}").exists()
        partial = cli(*args, str(tmp_path / f"partial-{key}"), "--allow-partial")
        assert partial.returncode == 0 and "PARTIAL" in partial.stdout, partial.stderr
        merged = json.loads((tmp_path / f"partial-{key}" / "report.json").read_text())
        assert merged["run"]["partial"] and any("partial merge" in w for w in merged["warnings"])
    # a renamed implementation: same display name, another module:attr
    other = copy.deepcopy(base)
    impl = next(i for i in other["run"]["implementations"] if i["origin"] != "builtin")
    impl["spec"] = "somewhere.else:erfcx"
    proc = cli("merge", str(erfcx_runs["clean"].report_dir), str(_write(tmp_path, "spec", other)),
               "-o", str(tmp_path / "out-spec"))
    assert proc.returncode == 1 and "somewhere.else:erfcx" in proc.stderr, proc.stderr


# ---- diff: like with like -------------------------------------------------------------------

@HARNESS_ONLY
def test_diff_reports_changed_settings_first(erfcx_runs, tmp_path):
    base = erfcx_runs["clean"].report
    other = copy.deepcopy(base)
    other["run"]["seed"] = 1234
    proc = cli("diff", str(erfcx_runs["clean"].report_dir), str(_write(tmp_path, "s", other)))
    assert proc.returncode == 1, proc.stdout
    head = proc.stdout.split("regressions,")[0]
    assert "SETTINGS CHANGED" in head and "- seed: 0 -> 1234" in head, proc.stdout
    same = cli("diff", str(erfcx_runs["clean"].report_dir), str(tmp_path / "s"),
               "--ignore-settings")
    assert same.returncode == 0 and "- seed: 0 -> 1234" in same.stdout, same.stdout


@HARNESS_ONLY
def test_diff_shows_an_implementation_behind_the_same_name(erfcx_runs):
    # the clean and planted runs: vendor.erfcx both times, build_1 then build_2
    old, new = (str(erfcx_runs[k].report_dir) for k in ("clean", "planted"))
    proc = cli("diff", old, new, "--ignore-settings")
    assert proc.returncode == 1  # its regressions still fail the diff
    lines = proc.stdout.splitlines()
    changed = [ln for ln in lines if ln.startswith("- implementation special.erfcx:vendor.erfcx")]
    assert changed and "vendor_builds:build_1" in changed[0] and "build_2" in changed[0]
    assert lines.index(changed[0]) < lines.index(next(ln for ln in lines if "Regressions" in ln))


@HARNESS_ONLY
def test_diff_coverage_loss_fails_by_default(erfcx_runs, tmp_path):
    """The clean run again with its backward tests deselected: same settings, less ran."""
    args = list(PLANTED_SELECTION)
    args[args.index("-k") + 1] = f"({args[args.index('-k') + 1]}) and not test_backward"
    run = run_suite([*args, "--impl=special.erfcx=planted.vendor_builds:build_1"], tmp_path)
    assert run.report is not None, run.output[-2000:]
    old = str(erfcx_runs["clean"].report_dir)
    proc = cli("diff", old, str(run.report_dir))
    assert proc.returncode == 1 and "COVERAGE LOST" in proc.stdout, proc.stdout
    assert "Settings changed" not in proc.stdout
    lost = [r["nodeid"] for r in erfcx_runs["clean"].report["results"]
            if "test_backward" in r["nodeid"] and r["outcome"] in ("passed", "expected-fail")]
    assert lost and all(f"- {n}: " in proc.stdout for n in lost)
    allowed = cli("diff", old, str(run.report_dir), "--allow-coverage-loss")
    assert allowed.returncode == 0, allowed.stdout


# ---- --strict: the must-pass list -----------------------------------------------------------

def _matrix_with(tmp_path: Path, must_pass: dict | None) -> Path:
    data = yaml.safe_load(DEFAULT_MATRIX.read_text())
    if must_pass is None:
        data["devices"]["cpu"].pop("must_pass", None)
    else:
        data["devices"]["cpu"]["must_pass"] = must_pass
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_strict_requires_the_must_pass_list(tmp_path):
    matrix = _matrix_with(tmp_path, {"areas": ["special.erfcx"]})
    args = [str(ROOT / "conformance" / "areas" / "special" / "test_erfcx.py"), "-n", "0", "-q",
            f"--device-matrix={matrix}", "--strict"]
    (tmp_path / "a").mkdir()
    whole = run_suite(args, tmp_path / "a")
    assert whole.returncode == 0 and whole.report["verdict"] == "PASS", whole.output[-2000:]
    must = whole.report["must_pass"]
    assert must["strict"] and must["required"] > 0 and must["passed"] == must["required"]
    # one must-pass test deselected: the run is not a conformance run
    (tmp_path / "b").mkdir()
    part = run_suite([*args, "-k", "not test_backward"], tmp_path / "b")
    assert part.returncode == 1 and part.report["verdict"] == "FAIL", part.output[-2000:]
    lost = part.report["must_pass"]["tests_not_passed"]
    assert lost and all(t["outcome"] == "not-run" and "deselected" in t["reason"] for t in lost)
    assert "must-pass (--strict)" in part.output
    # without --strict the same run passes, and says what it would lack
    (tmp_path / "c").mkdir()
    lax = run_suite([*args[:-1], "-k", "not test_backward"], tmp_path / "c")
    assert lax.returncode == 0 and lax.report["must_pass"]["not_passed"] == len(lost)
    # a device the matrix gives no list: --strict is a usage error
    bare = _matrix_with(tmp_path, None)
    (tmp_path / "d").mkdir()
    refused = run_suite([*PLANTED_SELECTION, f"--device-matrix={bare}", "--strict"],
                        tmp_path / "d", report=False)
    assert refused.returncode == 4 and "no must_pass list" in refused.output


@HARNESS_ONLY
def test_must_pass_prints_the_list():
    proc = cli("must-pass", "--device", "cuda")
    assert proc.returncode == 0 and "areas (" in proc.stdout and "except" in proc.stdout
    mps = cli("must-pass", "--device", "mps")
    assert mps.returncode == 0 and "collectives" not in mps.stdout  # not an mps area
    assert cli("must-pass", "--device", "nowhere").returncode == 4


# ---- blind: ways a report is doctored or mixed up, written from the README alone ---------

@HARNESS_ONLY
def test_blind_trust_breakers(tmp_path):
    """tests/planted/blind_trust_breakers.py: 57 scenarios (9 of them controls that must be
    accepted) a helper wrote from the README without reading the code; each must end with
    the documented exit status."""
    from tests.planted import blind_trust_breakers as breakers

    inputs = breakers.build_inputs(tmp_path / "inputs")
    (tmp_path / "work").mkdir()
    rows = breakers.run_scenarios(inputs, tmp_path / "work")
    assert len(rows) >= 50
    misses = [f"{name}: expected exit {exp}, got {got} ({status} {notes}): {first}"
              for name, exp, got, status, notes, first, _ in rows if status != "OK"]
    assert not misses, "\n".join(misses)


def test_an_outside_onnx_runtime_round_trip_is_judged_on_its_own(tmp_path):
    """ONNX Runtime (tests/planted/outside_impls_onnx.py) cannot keep a plain RNN's sequence
    length dynamic, as torch.export cannot: for the shipped export paths that is torch's
    known bug (an expected failure); for an outside implementation that claims dynamic.seq
    it is its own failure, not hidden by torch's entry, and its LSTM passes."""
    pytest.importorskip("onnxruntime", reason="onnx, onnxruntime and onnxscript are not in "
                                              "the dev extra (pip install them to run this)")
    pytest.importorskip("onnxscript")
    impl = "--impl=export=planted.outside_impls_onnx:onnxruntime_roundtrip"
    run = run_suite([str(ROOT / "conformance" / "areas" / "export"), "-n", "0", "-q",
                     "--no-builtins", impl, "-k", "float32 and (rnn_tanh-seq or lstm-seq)"],
                    tmp_path, timeout=900)
    results = {r["nodeid"].split("[")[1]: r for r in run.report["results"]}
    assert results["onnxruntime-float32-lstm-seq]"]["outcome"] == "passed", results
    rnn = results["onnxruntime-float32-rnn_tanh-seq]"]
    assert rnn["outcome"] == "failed" and not rnn["matrix_entries"], rnn
