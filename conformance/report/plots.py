"""Per-area margin plots for the HTML report: inline SVG drawn with matplotlib.

One row per implementation, one dot per bounded check (measured error / bound), on a log
axis with the pass limit 1 drawn. A margin of exactly 0 (an exact match) has no place on a
log axis: it is drawn at the axis floor and the legend says so. Rows with many checks keep
an evenly spaced selection of their sorted margins (always the worst one), so a report of
thousands of checks stays a few hundred kB.
"""

from __future__ import annotations

import io
import re
from typing import Any

FLOOR = 1e-6  # where margins of 0 and below are drawn
CEILING = 1e6  # where infinite and NaN margins (a failure) are drawn
MAX_DOTS = 160  # per implementation row


def as_margin(value: Any) -> float | None:
    """A check's margin as a float (report.json writes inf and NaN as strings; NaN fails, so
    it counts as inf), or None for a check without a bound."""
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        value = float(value)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    return float("inf") if value != value else float(value)


def area_margins(results: list[dict[str, Any]]) -> dict[str, dict[str, list[float]]]:
    """area -> implementation -> every bounded check's margin (expected failures left out)."""
    out: dict[str, dict[str, list[float]]] = {}
    for r in results:
        if r["outcome"] == "expected-fail":
            continue
        margins = [m for c in r.get("checks") or ()
                   if (m := as_margin(c.get("margin"))) is not None]
        if margins:
            out.setdefault(r["area"] or "-", {}).setdefault(r["impl"] or "-", []).extend(margins)
    return out


def _thin(values: list[float]) -> list[float]:
    values = sorted(values)
    if len(values) <= MAX_DOTS:
        return values
    step = (len(values) - 1) / (MAX_DOTS - 1)
    return [values[round(i * step)] for i in range(MAX_DOTS)]


def margin_svg(area: str, rows: dict[str, list[float]]) -> str:
    """One area's plot as an ``<svg>`` element (no XML prolog), ready to inline."""
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, LogLocator, NullLocator

    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    matplotlib.rcParams["svg.hashsalt"] = "torch-conformance"  # stable ids across runs
    names = sorted(rows)
    fig = Figure(figsize=(7.5, 0.9 + 0.32 * len(names)))
    ax = fig.add_subplot()
    worst = FLOOR
    for y, name in enumerate(names):
        kept = _thin(rows[name])
        xs = [min(max(v, FLOOR), CEILING) for v in kept]
        worst = max(worst, *xs)
        jitter = [((i * 7919) % 11 - 5) * 0.03 for i in range(len(xs))]
        colours = ["#c62828" if v >= 1 else "#1565c0" for v in kept]
        ax.scatter(xs, [y + j for j in jitter], s=9, c=colours, alpha=0.6, linewidths=0)
    ax.axvline(1.0, color="#c62828", linewidth=1.2)
    ax.text(1.0, len(names) - 0.4, " limit 1", color="#c62828", fontsize=8, va="bottom")
    ax.set_xscale("log")
    ax.set_xlim(FLOOR / 2, max(2.0, worst * 2))
    ax.set_ylim(-0.6, len(names) - 0.2)
    ax.set_yticks(range(len(names)), labels=names, fontsize=8)
    ax.set_xlabel(f"measured error / bound (log; 0 drawn at {FLOOR:g}, inf at {CEILING:g})",
                  fontsize=8)
    ax.set_title(area, fontsize=9, loc="left")
    # plain "1e-3" tick labels: matplotlib's default $10^{-3}$ goes through mathtext, which
    # made the plots most of the report's writing time (25 s for 31 areas)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    # one tick a decade, no minor ticks: the minor ticks of a 12-decade log axis were
    # half of the drawing time (5.8 -> 2.6 s for 31 areas)
    ax.xaxis.set_major_locator(LogLocator(base=10, numticks=14))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", which="major", linewidth=0.3, alpha=0.5)
    fig.tight_layout()
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    svg = text[text.index("<svg"):]
    # the figure's own size in pt; let CSS scale it to the page width instead
    return re.sub(r'<svg([^>]*?) width="[^"]*" height="[^"]*"', r'<svg\1', svg, count=1)


def all_area_svgs(results: list[dict[str, Any]]) -> dict[str, str]:
    return {area: margin_svg(area, rows) for area, rows in sorted(area_margins(results).items())}
