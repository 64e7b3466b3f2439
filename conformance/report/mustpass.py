"""The must-pass list of a run (``--strict``): which required tests did not pass.

The matrix gives each device a must-pass list (``devices.<key>.must_pass``: areas, shipped
implementations, exceptions with reasons); collection marks every test on it, before ``-k``
or ``-m`` deselection, so a deselected one is known and counts against. Under ``--strict``
a run whose list is not all passed is FAIL, whatever else it is.
"""

from __future__ import annotations

from typing import Any

# unsupported: found at run time not to apply (a case the implementation's declarations or
# the device's dtypes rule out), as the matrix's unsupported entries are left off the list
SATISFIED = ("passed", "unsupported")
SHOWN = 200  # required tests listed one by one in the report (all are counted)


def summarize(required: dict[str, Any], outcomes: dict[str, tuple[str, str]],
              listed: list[str], collected_areas: set[str | None],
              strict: bool) -> dict[str, Any]:
    """``required``: the must-pass test ids collected (a dict or list); ``outcomes``: test
    id -> (outcome, reason) of the run; ``listed``: the areas the device's list names;
    ``collected_areas``: the areas of every test the run collected."""
    missing: list[dict[str, Any]] = []
    passed = 0
    for nodeid in sorted(required):
        outcome, reason = outcomes.get(nodeid, ("not-run", "deselected (-k, -m or a shard)"))
        if outcome in SATISFIED:
            passed += 1
        else:
            missing.append({"nodeid": nodeid, "outcome": outcome, "reason": reason})
    uncollected = sorted(a for a in listed if a not in collected_areas)
    return {"strict": strict, "required": len(required), "passed": passed,
            "not_passed": len(missing), "areas": listed, "areas_not_collected": uncollected,
            "tests_not_passed": missing[:SHOWN], "tests": sorted(required)}


def failing(summary: dict[str, Any] | None) -> str | None:
    """Why a strict run fails its must-pass list (None if it does not, or is not strict)."""
    if not summary or not summary.get("strict"):
        return None
    parts = []
    if summary["not_passed"]:
        parts.append(f"{summary['not_passed']} of the {summary['required']} must-pass tests "
                     "did not pass")
    areas = summary["areas_not_collected"]
    if areas:
        shown = ", ".join(areas[:4]) + (f" and {len(areas) - 4} more" if len(areas) > 4 else "")
        parts.append(f"no test of {len(areas)} must-pass area(s) was collected ({shown}): "
                     "a test path or -k left them out")
    if not summary["required"] and not parts:
        parts.append("this device's must-pass list is empty here (the matrix gives none)")
    return "; ".join(parts) or None


def judge(report: dict[str, Any], required: dict[str, Any] | list[str]) -> None:
    """Add the must-pass summary to a run's report (``run.must_pass_areas``: None when the
    device has no list) and, under --strict and not for a shard, fail a list not all
    passed."""
    run = report.get("run") or {}
    listed = run.get("must_pass_areas")
    if listed is None:
        return
    outcomes = {r["nodeid"]: (r["outcome"], r["reason"]) for r in report["results"]}
    areas = {r.get("area") for r in report["results"]}
    report["must_pass"] = summarize(required, outcomes, listed, areas, bool(run.get("strict")))
    why = failing(report["must_pass"])
    if why and not run.get("shard"):
        report["verdict"] = "FAIL"
        report["warnings"].append(f"--strict: {why}")


def describe(summary: dict[str, Any] | None) -> str | None:
    """One line for the report's header: "3721 of 3721 passed (--strict)", and why not."""
    if not summary:
        return None
    why = failing({**summary, "strict": True})
    return (f"{summary['passed']} of {summary['required']} passed "
            f"({'--strict' if summary.get('strict') else 'not --strict: informative'})"
            + (f"; {why}" if why and summary.get("not_passed") else ""))
