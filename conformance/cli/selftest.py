"""``torch-conformance selftest``: detection power, measured. Runs the suite against every
planted fault (deliberately wrong implementations) and their correct twins, and reports
per area how many faults were killed (the suite flagged them) and which survived.

A fault module declares what to run in a module-level ``SELFTEST`` list, one dict per
implementation (the project's are in ``tests/planted/``; a user names theirs with
``--module``)::

    SELFTEST = [
        {"area": "special.erfcx", "impl": "naive", "path": "special/test_erfcx.py",
         "select": "test_forward and float32", "expect": "killed"},
        {"area": "special.erfcx", "impl": "correct", "path": "special/test_erfcx.py",
         "select": "test_forward and float32", "expect": "passes"},
    ]

``impl`` is an attribute of the module; ``path`` is relative to the suite's test folder
(``conformance/``); ``select`` a pytest ``-k`` expression; ``args`` (optional) extra pytest
arguments (``--no-builtins`` is always given); ``expect`` is ``killed`` (some test of the
implementation fails) or ``passes`` (a correct twin: none fails, and some test ran).
Entries with the same path and args share one pytest run, in which each implementation
stops at its first failure (``--stop-impl-after-failure``: one failure kills a fault).
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SUITE = Path(__file__).resolve().parents[1] / "areas"
PLANTED = SUITE.parents[1] / "tests" / "planted"
FAILED = ("failed", "error")
RAN = ("passed", "failed", "error", "expected-fail", "unexpected-pass")


class SelftestError(ValueError):
    """A bad module or entry (a usage error)."""


@dataclass
class Entry:
    module: str
    area: str
    impl: str
    path: str
    select: str
    expect: str
    args: tuple[str, ...] = ()
    outcomes: dict[str, int] = field(default_factory=dict)
    first_failure: str = ""
    seconds: float = 0.0
    killed_by: str = ""  # the first failing test: function[dtype]
    dtypes: set[str] = field(default_factory=set)  # the dtypes of its tests that ran
    names: set[str] = field(default_factory=set)  # the report's implementation names
    miscredited: list[str] = field(default_factory=list)  # failures of another impl's test

    @property
    def spec(self) -> str:
        return f"{self.module}:{self.impl}"

    @property
    def verdict(self) -> str:
        failed = sum(self.outcomes.get(o, 0) for o in FAILED)
        ran = sum(self.outcomes.get(o, 0) for o in RAN)
        if self.miscredited:
            return "miscredited"
        if self.expect == "killed":
            return "killed" if failed else "survived"
        return "passes" if ran and not failed else ("no test ran" if not ran else "FAILS")

    @property
    def good(self) -> bool:
        return self.verdict in ("killed", "passes")


def planted_modules() -> list[str]:
    """The project's fault modules (``tests/planted``) that declare SELFTEST."""
    if not PLANTED.is_dir():
        return []
    out = []
    for p in sorted(PLANTED.glob("*.py")):
        if p.stem != "__init__" and "SELFTEST" in p.read_text(encoding="utf-8"):
            out.append(f"planted.{p.stem}")
    return out


def load_entries(modules: Iterable[str]) -> list[Entry]:
    if PLANTED.is_dir() and str(PLANTED.parent) not in sys.path:
        sys.path.insert(0, str(PLANTED.parent))
    entries = []
    for name in modules:
        try:
            mod = importlib.import_module(name)
        except Exception as exc:  # a user's module: one line, whatever went wrong
            raise SelftestError(f"--module {name}: import failed: "
                                f"{type(exc).__name__}: {exc}".splitlines()[0]) from None
        table = getattr(mod, "SELFTEST", None)
        if not isinstance(table, list) or not table:
            raise SelftestError(f"{name}: no SELFTEST list (see torch-conformance selftest -h)")
        for i, row in enumerate(table):
            missing = {"area", "impl", "path", "select", "expect"} - set(row)
            if missing or row["expect"] not in ("killed", "passes"):
                raise SelftestError(f"{name}: SELFTEST[{i}]: needs area, impl, path, select "
                                    f"and expect killed|passes (missing {sorted(missing)})")
            if not hasattr(mod, row["impl"]):
                raise SelftestError(f"{name}: SELFTEST[{i}]: no attribute {row['impl']!r}")
            entries.append(Entry(name, row["area"], row["impl"], row["path"], row["select"],
                                 row["expect"], tuple(row.get("args", ()))))
    return entries


def group_args(group: list[Entry], device: str = "cpu") -> list[str]:
    """pytest's arguments for one run judging ``group`` (same path and args), each
    implementation stopped at its first failure; the report folder is the caller's."""
    path, args = group[0].path, group[0].args
    select = " or ".join(dict.fromkeys(f"({e.select})" for e in group))
    return [str(SUITE / path), "-n", "0", "-q", "--no-builtins", "--stop-impl-after-failure",
            f"--device={device}", "-k", select, *args,
            *(f"--impl={e.area}={e.spec}" for e in group)]


def child_env() -> dict[str, str]:
    """The environment of a child run: the planted modules importable as ``planted.*``."""
    env = dict(os.environ)
    extra = [str(PLANTED.parent)] if PLANTED.is_dir() else []
    env["PYTHONPATH"] = os.pathsep.join([*extra, os.getcwd(), env.get("PYTHONPATH", "")])
    env.pop("PYTEST_ADDOPTS", None)
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def _run_group(group: list[Entry], device: str) -> None:
    import time

    with tempfile.TemporaryDirectory(prefix="conformance-selftest-") as tmp:
        report = Path(tmp) / "report"
        cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
               f"--report={report}", *group_args(group, device)]
        start = time.monotonic()
        proc = subprocess.run(cmd, cwd=tmp, env=child_env(), capture_output=True, text=True,
                              check=False, timeout=1800)
        results = []
        if (report / "report.json").is_file():
            results = json.loads((report / "report.json").read_text())["results"]
    tally(group, results, time.monotonic() - start, proc.stdout + proc.stderr)


def tally(group: list[Entry], results: list[dict[str, Any]], seconds: float,
          output: str) -> None:
    """Credit each result of one run to the entry whose --impl made it."""
    for e in group:
        e.seconds = seconds / len(group)
    for r in results:
        for e in group:  # a result belongs to the implementation whose --impl made it
            if not _belongs(r, e):
                continue
            e.outcomes[r["outcome"]] = e.outcomes.get(r["outcome"], 0) + 1
            e.names.add(r["impl"])
            if r["outcome"] in RAN:
                e.dtypes.add(r.get("dtype") or "-")
            if r["outcome"] not in FAILED:
                continue
            # a kill counts for this implementation only in a test of its own
            params = r["nodeid"].partition("[")[2]
            if r["impl"] not in params:
                e.miscredited.append(r["nodeid"])
            if not e.first_failure:
                e.first_failure = r["reason"][:300]
                func = r["nodeid"].split("::")[-1].partition("[")[0]
                e.killed_by = f"{func}[{r.get('dtype') or '-'}]"
    if not results:
        for e in group:
            e.first_failure = ("pytest wrote no report: " + (output.strip() or "no output")
                               .splitlines()[-1])[:300]


def _belongs(result: dict[str, Any], entry: Entry) -> bool:
    # whole arguments: a substring test credited ``...:normal`` with ``...:normal_1pct``'s tests
    reproduce = shlex.split(result.get("reproduce") or "")
    return f"--impl={entry.area}={entry.spec}" in reproduce and result["area"] == entry.area


def run(entries: list[Entry], *, device: str = "cpu", jobs: int = 2) -> list[Entry]:
    groups: dict[tuple[str, tuple[str, ...]], list[Entry]] = {}
    for e in entries:
        groups.setdefault((e.path, e.args), []).append(e)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(lambda g: _run_group(g, device), groups.values()))
    return entries


def summary(entries: list[Entry]) -> dict[str, Any]:
    areas: dict[str, dict[str, Any]] = {}
    for e in entries:
        a = areas.setdefault(e.area, {"faults": 0, "killed": 0, "twins": 0, "twins_pass": 0,
                                      "survived": [], "twins_failing": []})
        if e.expect == "killed":
            a["faults"] += 1
            a["killed"] += e.verdict == "killed"
            if e.verdict != "killed":
                a["survived"].append(e.spec)
        else:
            a["twins"] += 1
            a["twins_pass"] += e.verdict == "passes"
            if e.verdict != "passes":
                a["twins_failing"].append(f"{e.spec} ({e.verdict}: {e.first_failure})")
    faults = sum(a["faults"] for a in areas.values())
    killed = sum(a["killed"] for a in areas.values())
    return {"faults": faults, "killed": killed, "areas": dict(sorted(areas.items())),
            "entries": [{**{k: getattr(e, k) for k in ("module", "area", "impl", "path",
                                                          "select", "expect", "outcomes",
                                                          "first_failure", "seconds",
                                                          "killed_by", "miscredited")},
                         "dtypes": sorted(e.dtypes), "verdict": e.verdict}
                        for e in entries]}


def render(data: dict[str, Any]) -> str:
    lines = [f"{'area':<34} {'killed':>8} {'twins pass':>11}  survived"]
    for area, a in data["areas"].items():
        lines.append(f"{area:<34} {a['killed']:>4}/{a['faults']:<3} "
                     f"{a['twins_pass']:>6}/{a['twins']:<4}  "
                     + (", ".join(a["survived"]) or "-"))
        lines += [f"    twin failing: {t}" for t in a["twins_failing"]]
    lines.append(f"detection power: {data['killed']} of {data['faults']} planted faults "
                 "killed")
    return "\n".join(lines)
