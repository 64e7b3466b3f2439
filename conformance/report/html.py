"""``report.html``: the report as one self-contained page (inline CSS and SVG, no network).

Rendered with Jinja2 from ``templates/report.html.j2``; the plots come from
``conformance.report.plots``. Everything shown is read from the report dict that
``report.json`` holds, so ``torch-conformance merge`` renders a merged report the same way.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

from conformance.harness.outcomes import BAD_OUTCOMES, OUTCOMES
from conformance.report import mustpass, suite
from conformance.report.plots import as_margin
from conformance.report.tables import area_times

BAD = BAD_OUTCOMES
TIGHTEST = 20
_ENTRY = re.compile(r"^matrix (expected_failures\[\d+\]): ")


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
    rows = [{"area": area, "impl": impl, **row}
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
    from conformance.report.plots import all_area_svgs

    failures = [r for r in report["results"] if r["outcome"] in BAD]
    if plots is None:
        plots = all_area_svgs(report["results"])
    return render_template("report.html.j2",
        report=report, verdict=verdict(report), outcomes=OUTCOMES,
        environment=_environment(report), rows=_outcome_rows(report),
        failures=failures, tightest=_tightest(report), plots=plots,
        expected=_expected_failures(report),
        unsupported=_grouped(report["results"], "unsupported"),
        skipped=_grouped(report["results"], "skipped"), times=area_times(report),
        vacuous=report.get("vacuous") or [], warnings=report.get("warnings") or [])
