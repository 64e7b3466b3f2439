"""``--shard I/N``: one runner's share of a qualification split over N runners.

The split is pytest-split's (a maintained plugin that splits the collected tests into N
groups deterministically and balances them by recorded durations); this module only maps
``--shard I/N`` and ``--shard-durations REPORT`` (a previous report's per-test durations)
onto its options, with the ``least_duration`` algorithm. Without durations every test
counts the same, so the shards are equal in count. Every runner must collect the same
tests (same suite version, matrix, device kind and options), which ``torch-conformance
merge`` checks afterwards.
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest

SHARD = re.compile(r"^(\d+)/(\d+)$")


def addoption(group: Any) -> None:
    group.addoption("--shard", dest="conformance_shard", default=None, metavar="I/N",
                    help="run the I-th of N deterministic shards of the collected tests "
                         "(1 <= I <= N); merge the N reports with torch-conformance merge")
    group.addoption("--shard-durations", dest="conformance_shard_durations", default=None,
                    metavar="REPORT",
                    help="balance the shards by the test durations of a previous report "
                         "(its directory or report.json)")


def parse(spec: str) -> tuple[int, int]:
    m = SHARD.match(spec.strip())
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise pytest.UsageError(f"--shard must be I/N with 1 <= I <= N (e.g. --shard 2/4), "
                                f"not {spec!r}")
    return int(m.group(1)), int(m.group(2))


def _durations(source: str) -> dict[str, float]:
    from conformance.report.diff import ReportError, load_report

    try:
        report = load_report(source)
    except ReportError as exc:
        raise pytest.UsageError(f"--shard-durations: {exc}") from None
    return {r["nodeid"]: float(r.get("duration_s") or 0.0) for r in report["results"]}


def configure(config: pytest.Config) -> dict[str, Any] | None:
    """Set pytest-split's options from ``--shard``; the shard's description for the report."""
    spec = config.option.conformance_shard
    durations = config.option.conformance_shard_durations
    if spec is None:
        if durations is not None:
            raise pytest.UsageError("--shard-durations needs --shard I/N")
        return None
    index, count = parse(spec)
    if not hasattr(config.option, "splits"):
        raise pytest.UsageError("--shard needs the pytest-split plugin (pip install "
                                "pytest-split; a dependency of torch-conformance)")
    if config.option.splits is not None or config.option.group is not None:
        raise pytest.UsageError("--shard and pytest-split's --splits/--group: use one")
    table = _durations(durations) if durations else {}
    handle, path = tempfile.mkstemp(prefix="conformance-durations-", suffix=".json")
    with open(handle, "w", encoding="utf-8") as f:
        json.dump(table, f)
    config.add_cleanup(lambda: Path(path).unlink(missing_ok=True))
    config.option.splits, config.option.group = count, index
    config.option.splitting_algorithm = "least_duration"
    config.option.durations_path = path
    return {"index": index, "count": count, "durations_from": durations,
            "durations_known": len(table)}
