"""``report.html``: the report as one self-contained page (inline CSS, SVG and script; no
network).

Rendered with Jinja2 from ``templates/report.html.j2``; the plots come from
``conformance.report.plots``, the failure groups from ``conformance.report.triage``. Every
result is embedded as compact JSON (:func:`table_data`) for the page's script
(``templates/report.js.j2``, inlined as is): the search box, the outcome and area filters
and the All tests table (at most 500 rows at a time). Without JavaScript the page still
shows the verdict, the counts and the grouped failures. Everything shown is read from the
report dict that ``report.json`` holds, so ``torch-conformance merge`` renders a merged
report the same way."""

from __future__ import annotations

import json
import math
import re
from importlib import resources
from typing import Any

from conformance.harness.outcomes import BAD_OUTCOMES, OUTCOMES
from conformance.report import mustpass, suite
from conformance.report.plots import as_margin
from conformance.report.tables import area_times, gpu_identity
from conformance.report.triage import by_area, group_failures, short_reason

BAD = BAD_OUTCOMES
TIGHTEST = 20
GROUP_ROWS = 200  # tests listed inside one failure group; the All tests table has the rest
_ENTRY = re.compile(r"^matrix (expected_failures\[\d+\]): ")
# the characters that could end or confuse an inline <script> element, as JSON escapes
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def verdict(report: dict[str, Any]) -> str:
    """The report's verdict (PASS, FAIL or INCOMPLETE); for a report from before verdicts
    were recorded: FAIL when a check failed, errored, passed unexpectedly or a run was
    vacuous, else PASS."""
    if report.get("verdict"):
        return str(report["verdict"])
    bad = sum(report["summary"].get(o, 0) for o in BAD)
    return "FAIL" if bad or report.get("vacuous") else "PASS"


def _environment(report: dict[str, Any]) -> list[tuple[str, str]]:
    env, run = report["environment"], report["run"]
    dev = env.get("device", {})
    rows = [
        ("device", f"{dev.get('torch_device')} ({dev.get('name')}; matrix key "
                   f"{dev.get('matrix_key')})"),
        ("GPU", gpu_identity(dev)),
        ("torch", env.get("torch")), ("CUDA", env.get("cuda")), ("HIP", env.get("hip")),
        ("driver", env.get("cuda_driver")),
        ("BLAS", ", ".join(f"{k}={v}" for k, v in (env.get("blas") or {}).items())),
        ("Python", f"{env.get('python')} on {env.get('platform')}"),
        ("device-side assertions", ", ".join(
            f"{k}={v}" for k, v in (env.get("device_side_assertions") or {}).items())),
        ("matmul settings", ", ".join(
            f"{k}={v}" for k, v in (env.get("matmul_settings") or {}).items())),
        ("packages", ", ".join(f"{k} {v}" for k, v in (env.get("packages") or {}).items())),
        ("device tags", ", ".join(dev.get("tags") or ())),
        ("run", f"profile {run.get('profile')}, seed {run.get('seed')}, matrix "
                f"{run.get('matrix')}"),
        ("suite", suite.describe(report.get("suite"))),
        ("must-pass list", mustpass.describe(report.get("must_pass")) or "none for this device"),
        ("command", run.get("command")),
        ("created", report.get("created")),
    ]
    for r in report["results"]:  # the toolchain area's recorded facts
        if r["area"] == "toolchain":
            for key, value in sorted(r["notes"].items()):
                if value not in (None, [], {}, ""):
                    rows.append((key.removeprefix("toolchain_"), str(value)))
    return [(k, "-" if v in (None, "") else str(v)) for k, v in rows]


def _outcome_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [{"area": area, "impl": impl, **row, "worst_margin": as_margin(row.get("worst_margin"))}
            for area, impls in report["areas"].items() for impl, row in impls.items()]
    rows.sort(key=lambda r: (-sum(r.get(o, 0) for o in BAD), r["area"], r["impl"]))
    return rows


def _tightest(report: dict[str, Any]) -> list[dict[str, Any]]:
    checks = [{**c, "nodeid": r["nodeid"], "area": r["area"], "margin": m}
              for r in report["results"] if r["outcome"] != "expected-fail"
              for c in r.get("checks") or () if (m := as_margin(c.get("margin"))) is not None]
    checks.sort(key=lambda c: -c["margin"])
    return checks[:TIGHTEST]


def _grouped(results: list[dict[str, Any]], outcome: str) -> list[dict[str, Any]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        if r["outcome"] == outcome:
            groups.setdefault(r["reason"], []).append(r)
    out = [{"reason": reason, "count": len(rs), "areas": sorted({r["area"] for r in rs}),
            "example": rs[0]["nodeid"]} for reason, rs in groups.items()]
    return sorted(out, key=lambda g: (-g["count"], g["reason"]))


def _expected_failures(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Expected failures per matrix entry, with the entry's reason and upstream link."""
    entries = {m["entry"]: m for m in report["run"].get("matrix_entries") or ()}
    groups: dict[str, dict[str, Any]] = {}
    for r in report["results"]:
        if r["outcome"] != "expected-fail":
            continue
        match = _ENTRY.match(r["reason"])
        key = match.group(1) if match else r["reason"]
        m = entries.get(key, {})
        g = groups.setdefault(key, {"entry": key if match else "-",
                                    "reason": m.get("reason", r["reason"]),
                                    "link": m.get("link"), "tests": []})
        g["tests"].append(r["nodeid"])
    return sorted(groups.values(), key=lambda g: -len(g["tests"]))


def _margin_text(value: Any) -> str | float | None:
    """A worst margin for the All tests table: 3 significant digits, ``"inf"``, or None."""
    m = as_margin(value)
    if m is None:
        return None
    return str(m) if math.isinf(m) else float(f"{m:.3g}")


def _tail(tail: str, impl: str, dtype: str) -> str:
    """A node id's parameter tail with its implementation and dtype (first occurrence each) as
    ``~i`` and ``~d``, marked by a leading ``~`` (a tail starts with ``[``); as is where a
    ``~`` would make that ambiguous. report.js.j2 reverses it."""
    if "~" in tail + impl + dtype or len(dtype) < 3 or impl not in tail:
        return tail
    short = tail.replace(impl, "~i", 1).replace(dtype, "~d", 1)
    return "~" + short if short.replace("~i", impl, 1).replace("~d", dtype, 1) == tail else tail


def table_data(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Every result, compactly, for the page's All tests table and filters (rendered by
    report.js.j2): the repeated strings (outcome, area, implementation, dtype, test function,
    reason) as indices into their lists, and the node id as its function's index plus the
    parameter tail (``[...]``). One row: ``[outcome, area, impl, dtype, function, tail,
    reason, worst margin]`` (the tail shortened by :func:`_tail`)."""
    tables: dict[str, dict[str, int]] = {k: {} for k in
                                         ("outcomes", "areas", "impls", "dtypes", "funcs",
                                          "reasons")}
    for o in OUTCOMES:
        tables["outcomes"][o] = len(tables["outcomes"])

    def index(kind: str, value: Any) -> int:
        table = tables[kind]
        return table.setdefault(str(value), len(table))

    rows = []
    for r in results:
        func = r["nodeid"].split("[", 1)[0]
        impl, dtype = str(r.get("impl") or "-"), str(r.get("dtype") or "-")
        rows.append([index("outcomes", r["outcome"]), index("areas", r.get("area") or "-"),
                     index("impls", impl), index("dtypes", dtype), index("funcs", func),
                     _tail(r["nodeid"][len(func):], impl, dtype),
                     index("reasons", r.get("reason") or ""), _margin_text(r.get("worst_margin"))])
    return {**{k: list(v) for k, v in tables.items()}, "bad": list(BAD), "rows": rows}


def _failure_areas(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failures grouped (area -> check -> implementation), each group with its results'
    row indices in :func:`table_data` (for the filters) and the first GROUP_ROWS listed."""
    where = {id(r): i for i, r in enumerate(results)}
    return [{"area": area, "count": sum(g.count for g in groups),
             "groups": [{"g": g, "rows": [where[id(r)] for r in g.results],
                         "listed": [(where[id(r)], r) for r in g.results[:GROUP_ROWS]]}
                        for g in groups]}
            for area, groups in by_area(group_failures(results)).items()]


def _asset(name: str) -> str:
    """A template file's text as is, not rendered (``report.js.j2``: its ``.j2`` suffix is
    what puts it in the package data)."""
    return resources.files("conformance.report").joinpath("templates", name).read_text("utf-8")


def render_template(name: str, **context: Any) -> str:
    """One of ``conformance/report/templates`` rendered with autoescaping (they share style.css)."""
    import jinja2

    folder = resources.files("conformance.report").joinpath("templates")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(folder)), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    return env.get_template(name).render(**context)


def render_html(report: dict[str, Any], plots: dict[str, str] | None = None) -> str:
    """report.html (``plots``: the margin plots, if already drawn from these results)."""
    import markupsafe

    from conformance.report.plots import all_area_svgs

    results = report["results"]
    if plots is None:
        plots = all_area_svgs(results)
    data = json.dumps(table_data(results), separators=(",", ":"), allow_nan=False)
    rows, areas = _outcome_rows(report), _failure_areas(results)
    return render_template("report.html.j2",
        report=report, verdict=verdict(report), outcomes=OUTCOMES,
        environment=_environment(report), rows=rows,
        failures=sum(r["outcome"] in BAD for r in results),
        failure_areas=areas, n_groups=sum(len(a["groups"]) for a in areas),
        group_rows=GROUP_ROWS, short=short_reason,
        bad_areas={r["area"] for r in rows if any(r.get(o) for o in BAD)},
        data=markupsafe.Markup(data.translate(_SCRIPT_SAFE)),
        script=markupsafe.Markup(_asset("report.js.j2")),
        tightest=_tightest(report), plots=plots,
        expected=_expected_failures(report),
        unsupported=_grouped(report["results"], "unsupported"),
        skipped=_grouped(report["results"], "skipped"), times=area_times(report),
        vacuous=report.get("vacuous") or [], warnings=report.get("warnings") or [])
