"""Writing a report's files: report.json (strict JSON), summary.md and report.html."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from conformance.report.html import render_html
from conformance.report.markdown import render_markdown


def _strict_json(value: Any) -> Any:
    """JSON has no infinities or NaN: write them as the strings "inf", "-inf", "nan"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: _strict_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict_json(v) for v in value]
    return value


def _dumps(report: dict[str, Any]) -> str:
    """Indented JSON with one result per line: readable and diffable, and written by json's
    C encoder for the bulk (indenting all of a large run's results took seconds)."""
    head = {k: v for k, v in report.items() if k != "results"}
    text = json.dumps(head, indent=1, allow_nan=False, default=str)
    if "results" not in report:
        return text
    rows = ",\n  ".join(json.dumps(r, allow_nan=False, default=str) for r in report["results"])
    body = f'"results": [\n  {rows}\n ]' if rows else '"results": []'
    return (text[:-2] + ",\n " if head else "{\n ") + body + "\n}"


def write_report(directory: Path, report: dict[str, Any],
                 plots: dict[str, str] | None = None) -> list[Path]:
    """report.json, summary.md and report.html (``plots``: its margin plots, if drawn
    already)."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "report.json"
    json_path.write_text(_dumps(_strict_json(report)) + "\n", encoding="utf-8")
    md_path = directory / "summary.md"
    md_path.write_text(render_markdown(report), encoding="utf-8")
    html_path = directory / "report.html"
    html_path.write_text(render_html(report, plots), encoding="utf-8")
    return [json_path, md_path, html_path]
