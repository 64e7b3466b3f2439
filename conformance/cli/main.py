"""``torch-conformance``: the commands around a qualification run.

    torch-conformance diff OLD NEW [--factor 2] [--format text|markdown|html] [-o FILE]
    torch-conformance merge DIR... -o OUT
    torch-conformance bundle OUTDIR [--python 3.12] [--platform TAG] [--torch]
    torch-conformance selftest [--module M] [--area A] [--json OUT] [--against|--record LIST]
    torch-conformance releases OUT [-o FILE]
    torch-conformance isolate [--device D] [--env K=V] [--isolated] MODULE:FUNCTION ARGS
    torch-conformance report DIR
    torch-conformance verify DIR
    torch-conformance must-pass [--device KEY] [--matrix FILE]
    torch-conformance fleet OUTDIR [--devices all|0,1,...] [--workers 2] [-- PYTEST ARGS]

Exit status: 0 fine; 1 regressions or changed settings (diff), a surviving fault
(selftest), a FAIL verdict (report, merge, fleet: any GPU), a refused merge, a report that
does not verify; 2 an INCOMPLETE verdict (report, merge, fleet: any GPU, none FAIL); 4 a
usage error (one line on stderr).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


class UsageError(Exception):
    """Bad input: printed as one line, exit 4."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's usage errors: one line, exit 4
        raise UsageError(f"{self.prog}: {message}")


def _diff(opts: argparse.Namespace) -> int:
    from conformance.report.diff import (
        ReportError,
        diff_reports,
        load_report,
        render_html,
        render_text,
    )

    if opts.factor <= 1:
        raise UsageError(f"--factor must be > 1, not {opts.factor:g}")
    try:
        old, new = load_report(opts.old), load_report(opts.new)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    d = diff_reports(old, new, factor=opts.factor, old_name=opts.old, new_name=opts.new)
    from conformance.report.diff import verdict_of
    if opts.format == "html":
        text = render_html(d)
    else:
        text = render_text(d, markdown=opts.format == "markdown")
    if opts.json:
        import json

        Path(opts.json).write_text(json.dumps(d.to_json(), indent=1, default=str) + "\n")
    if opts.output:
        Path(opts.output).write_text(text, encoding="utf-8")
        print(f"{verdict_of(d)}: {len(d.settings)} settings changed, {len(d.regressions)} "
              f"regressions, {len(d.coverage_lost)} coverage lost, {len(d.fixed)} fixed; "
              f"wrote {opts.output}")
    else:
        sys.stdout.write(text)
    failing = d.failing(coverage=not opts.allow_coverage_loss, margin=opts.fail_on_margin,
                        settings=not opts.ignore_settings)
    return 1 if failing else 0


def _merge(opts: argparse.Namespace) -> int:
    from conformance.report.merge import MergeError, MergeRefused, merge_dirs

    try:
        merged, written = merge_dirs([Path(p) for p in opts.reports], Path(opts.output),
                                     opts.allow_partial)
    except MergeError as exc:
        raise UsageError(str(exc)) from None
    except MergeRefused as exc:
        print(f"error: merge: {exc}", file=sys.stderr)
        return 1
    partial = merged["run"].get("partial")
    print(f"merged{' (PARTIAL: ' + '; '.join(partial) + ')' if partial else ''}: verdict "
          f"{merged['verdict']}; wrote " + ", ".join(str(p) for p in written))
    return int(merged["exit_status"])


def _bundle(opts: argparse.Namespace) -> int:
    from conformance.cli.bundle import BundleError, build

    extras = [e.strip() for e in (opts.extras or "").split(",") if e.strip()]
    try:
        reqs = build(Path(opts.outdir), extras=extras, with_torch=opts.torch,
                     python=opts.python, platform=opts.platform)
    except BundleError as exc:
        raise UsageError(str(exc)) from None
    wheels = sorted(p.name for p in Path(opts.outdir).iterdir() if p.suffix == ".whl")
    print(f"bundle: {len(wheels)} wheels for {len(reqs)} requirements in {opts.outdir}; "
          f"install offline with: pip install --no-index --find-links {opts.outdir} "
          "torch-conformance")
    return 0


def _selftest(opts: argparse.Namespace) -> int:
    import json

    from conformance.cli import selftest

    modules = [] if opts.no_planted else selftest.planted_modules()
    modules += opts.module or []
    if not modules:
        raise UsageError("no fault modules: this install has no tests/planted (run from a "
                         "clone) and no --module was given")
    try:
        entries = selftest.load_entries(modules)
    except selftest.SelftestError as exc:
        raise UsageError(str(exc)) from None
    if opts.area:
        entries = [e for e in entries if e.area in opts.area
                   or any(e.area.startswith(a + ".") for a in opts.area)]
        if not entries:
            raise UsageError(f"no planted fault for area {', '.join(opts.area)}")
    from conformance.cli import faultlist

    listed = None
    if opts.against:
        try:
            listed = faultlist.load(opts.against)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    data = selftest.summary(selftest.run(entries, device=opts.device, jobs=opts.jobs))
    print(selftest.render(data))
    if opts.json:
        Path(opts.json).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    good = all(e.good for e in entries)
    if listed is not None:
        problems = faultlist.compare(entries, listed, partial=bool(opts.area))
        print(*(f"FAULT LIST: {p}" for p in problems), sep="\n")
        print(f"fault list {opts.against}: " + (f"{len(problems)} problem(s)" if problems
                                                else f"{len(entries)} entries as listed"))
        good = good and not problems
    if opts.record:
        try:
            faultlist.write(opts.record, entries, areas=opts.area)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"fault list recorded: {opts.record} ({len(entries)} entries)")
    return 0 if good else 1


def _releases(opts: argparse.Namespace) -> int:
    from conformance.report.releases import ReleaseTableError, write_table

    target = Path(opts.output or Path(opts.out) / "release-matrix.md")
    try:
        runs = write_table(Path(opts.out), target)
    except ReleaseTableError as exc:
        raise UsageError(str(exc)) from None
    red = [r.release for r in runs if r.rc != 0]
    print(f"{len(runs)} releases, {len(red)} not green{': ' + ', '.join(red) if red else ''}; "
          f"wrote {target}")
    return 1 if red else 0


def _report(opts: argparse.Namespace) -> int:
    from conformance.run.journal import FILE, FOLDER, rebuild

    folder = Path(opts.dir)
    if not (folder / FOLDER / FILE).exists():
        raise UsageError(f"report: {folder} holds no journal ({FOLDER}/{FILE}): give the "
                         "--report DIR of a run")
    report = rebuild(folder)
    from conformance.report.manifest import write_manifest

    write_manifest(folder)
    s = report["summary"]
    counts = ", ".join(f"{n} {o}" for o, n in s.items() if n)
    print(f"{folder}: verdict {report['verdict']} ({report['collected']} collected: {counts})")
    for r in report["results"]:
        if r["outcome"] in ("crashed", "timed-out"):
            print(f"  {r['outcome']}: {r['nodeid']}: {r['reason']}")
    print(f"wrote {folder / 'report.json'}, {folder / 'summary.md'}, {folder / 'report.html'}")
    return {"PASS": 0, "FAIL": 1}.get(report["verdict"], 2)


def _verify(opts: argparse.Namespace) -> int:
    from conformance.report.manifest import verify

    folder = Path(opts.dir)
    if not folder.is_dir():
        raise UsageError(f"verify: {folder} is not a report directory")
    report, problems = verify(folder)
    for problem in problems:
        print(f"  {problem}")
    if problems:
        print(f"{folder}: NOT VERIFIED ({len(problems)} problem{'s' * (len(problems) > 1)})")
        return 1
    from conformance.report.suite import describe

    print(f"{folder}: verified: every file matches SHA256SUMS, {report['collected']} collected "
          f"add up, verdict {report['verdict']} (suite {describe(report.get('suite'))})")
    return 0


def _fleet(opts: argparse.Namespace) -> int:
    from conformance.cli.fleet import FleetError
    from conformance.cli.fleet import main as fleet_main

    try:
        return fleet_main(opts)
    except FleetError as exc:
        raise UsageError(str(exc)) from None


def _must_pass(opts: argparse.Namespace) -> int:
    from conformance.harness.errors import ConfigError
    from conformance.harness.matrix import load_matrix

    try:
        matrix = load_matrix(opts.device_matrix)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    spec = matrix.devices.get(opts.device)
    if spec is None:
        raise UsageError(f"must-pass: the matrix {matrix.path} has no device {opts.device!r} "
                         f"(it has: {', '.join(sorted(matrix.devices))})")
    must = spec.must_pass
    if must is None:
        raise UsageError(f"must-pass: the matrix {matrix.path} gives device {opts.device!r} no "
                         "must_pass list (--strict is refused there)")
    if opts.tests:
        return _must_pass_tests(opts)
    areas = sorted(must.areas & spec.areas)
    print(f"must-pass list of device {opts.device} (matrix {matrix.path}), what "
          "`pytest --strict` requires to pass:")
    print(f"  areas ({len(areas)}): {', '.join(areas)}")
    print("  implementations: " + (", ".join(must.impls) if must.impls else
                                   "every shipped one (the matrix's builtins)"))
    for patterns, reason in must.excepted:
        print(f"  except {', '.join(patterns)}: {reason}")
    print("  and not: a test the matrix marks unsupported or expected to fail on this device, "
          "or leaves out of the run's profile (budget); an emulation without --emulated")
    print("A skip, a not-run or a deselected test of the list makes a --strict run FAIL. "
          "The test ids: torch-conformance must-pass --tests (collects on this machine's "
          "device).")
    return 0


def _must_pass_tests(opts: argparse.Namespace) -> int:
    import json
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory(prefix="conformance-must-pass-") as tmp:
        cmd = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
               "-p", "no:xdist", f"--device={opts.device}", f"--report={tmp}",
               f"--profile={opts.profile}", "conformance"]
        if opts.device_matrix:
            cmd.append(f"--device-matrix={opts.device_matrix}")
        root = Path(__file__).resolve().parents[2]  # test ids as a run from there names them
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=root)
        path = Path(tmp) / "journal" / "must_pass.json"
        if proc.returncode != 0 or not path.is_file():
            tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or ["?"]
            raise UsageError(f"must-pass --tests: collecting on --device={opts.device} failed: "
                             f"{tail[0]}")
        ids = sorted(json.loads(path.read_text()))
    sys.stdout.write("".join(f"{i}\n" for i in ids))
    print(f"{len(ids)} must-pass tests on --device={opts.device}, --profile={opts.profile}",
          file=sys.stderr)
    return 0


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="torch-conformance", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    d = sub.add_parser("diff", help="what changed between two reports; exit 1 on regressions")
    d.add_argument("old", help="a report directory or report.json (the baseline)")
    d.add_argument("new", help="a report directory or report.json (the run to judge)")
    d.add_argument("--factor", type=float, default=2.0,
                   help="report margins that moved by more than this factor (default 2)")
    d.add_argument("--format", choices=("text", "markdown", "html"), default="text")
    d.add_argument("-o", "--output", help="write the diff here instead of stdout")
    d.add_argument("--json", help="also write the diff as JSON here")
    d.add_argument("--ignore-settings", action="store_true",
                   help="compare runs made under different settings (suite, matrix, profile, "
                        "seed, device, torch, implementations) without exit 1 for that")
    d.add_argument("--allow-coverage-loss", action="store_true",
                   help="no exit 1 for tests that ran in OLD and did not run in NEW")
    d.add_argument("--fail-on-coverage-loss", action="store_true",
                   help=argparse.SUPPRESS)  # the default since coverage loss fails
    d.add_argument("--fail-on-margin", action="store_true",
                   help="exit 1 also when a margin grew by more than --factor")
    d.set_defaults(run=_diff)
    m = sub.add_parser("merge", help="merge shard / per-host reports into one")
    m.add_argument("reports", nargs="+", help="report directories or report.json files")
    m.add_argument("-o", "--output", required=True, help="the merged report's directory")
    m.add_argument("--allow-partial", action="store_true",
                   help="merge even with shards missing or settings that differ (the merged "
                        "report says it is partial)")
    m.set_defaults(run=_merge)
    b = sub.add_parser("bundle", help="a wheelhouse of the suite and its dependencies, for "
                                      "offline installs (torch left out unless --torch)")
    b.add_argument("outdir")
    b.add_argument("--python", help="target Python, e.g. 3.12 (default: this one)")
    b.add_argument("--platform", help="target platform tag, e.g. manylinux_2_28_aarch64 "
                                      "(default: this machine's)")
    b.add_argument("--extras", help="comma-separated extras to include, e.g. triton,report")
    b.add_argument("--torch", action="store_true",
                   help="include this torch release too (labs usually bring their own build)")
    b.set_defaults(run=_bundle)
    t = sub.add_parser("selftest", help="run the suite against every planted fault: faults "
                                        "killed / total per area")
    t.add_argument("--module", action="append",
                   help="also a fault module of yours with a SELFTEST list (repeatable)")
    t.add_argument("--no-planted", action="store_true",
                   help="only the --module ones, not the project's tests/planted")
    t.add_argument("--area", action="append",
                   help="only faults of this area (or area prefix, e.g. sampler); repeatable")
    t.add_argument("--device", default="cpu")
    t.add_argument("-j", "--jobs", type=int, default=2, help="pytest runs at once (default 2)")
    t.add_argument("--json", help="also write the table and every fault's outcome as JSON")
    t.add_argument("--against", metavar="LIST", help="judge the run by a fault list (e.g. "
                   "tests/data/fault_list.json): exit 1 where a listed kill survives, a twin "
                   "fails, or a kill is credited to another implementation's test")
    t.add_argument("--record", metavar="LIST", help="write the fault list of this run")
    t.set_defaults(run=_selftest)
    r = sub.add_parser("releases", help="one table of ci/release-matrix.sh's runs (release x "
                                        "area); exit 1 unless every release exited 0")
    r.add_argument("out", help="ci/release-matrix.sh's output directory (OUT/<release>/)")
    r.add_argument("-o", "--output", help="the Markdown table (default OUT/release-matrix.md)")
    r.set_defaults(run=_releases)
    rp = sub.add_parser("report", help="write a run's report from its journal (a run that "
                                       "died: a crash with -n 0, a killed job)")
    rp.add_argument("dir", help="the run's --report DIR")
    rp.set_defaults(run=_report)
    mp = sub.add_parser("must-pass", help="what `pytest --strict` requires to pass on a "
                                          "device (the matrix's must_pass list)")
    mp.add_argument("--device", default="cpu", help="the matrix's device key (default cpu)")
    mp.add_argument("--device-matrix", help="a device matrix (default: the shipped one)")
    mp.add_argument("--tests", action="store_true",
                    help="list the test ids (collects on this machine: the device must exist)")
    mp.add_argument("--profile", default="ci", help="with --tests: the profile (default ci)")
    mp.set_defaults(run=_must_pass)
    v = sub.add_parser("verify", help="check a report directory: its files against its "
                                      "SHA256SUMS, its counts against collected; exit 1 if not")
    v.add_argument("dir", help="the run's --report DIR (or a merge's -o OUT)")
    v.set_defaults(run=_verify)
    from conformance.cli.fleet import add_parser as add_fleet

    add_fleet(sub).set_defaults(run=_fleet)
    sub.add_parser("isolate", add_help=False,
                   help="rerun an isolated case in the foreground (its own --help)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["isolate"]:  # its own parser (processes/foreground.py)
        from conformance.processes.foreground import main as isolate_main

        return isolate_main(args[1:])
    extra = None
    if args[:1] == ["fleet"] and "--" in args:  # the rest is pytest's (cli/fleet.py)
        at = args.index("--")
        args, extra = args[:at], args[at + 1:]
    try:
        opts = parser().parse_args(args)
        if extra is not None:
            opts.pytest_args = extra
        return int(opts.run(opts))
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 4


if __name__ == "__main__":
    sys.exit(main())
