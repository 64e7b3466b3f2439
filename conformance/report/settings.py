"""The settings a report was made under, compared: two reports are comparable (``diff``) or
mergeable (``merge``) only when these agree. Implementations are named by their
``module:attr`` as well as their display name, so one that calls itself ``torch.topk`` is
not taken for the shipped one."""

from __future__ import annotations

import json
from typing import Any

# what merge requires equal (key: what it is called in a one-line refusal)
MERGE_KEYS = {"suite": "suite versions", "schema": "report schemas",
              "matrix": "device matrices", "profile": "profiles", "seed": "seeds",
              "device": "devices", "implementations": "implementations",
              "strict": "--strict settings",
              "stop impl after failure": "--stop-impl-after-failure settings"}


def settings(report: dict[str, Any]) -> dict[str, str]:
    """Setting name -> its value as one line of text."""
    run, env = report.get("run") or {}, report.get("environment") or {}
    device = env.get("device") or {}
    out = {
        "suite": _suite(report),
        "schema": str(report.get("schema_version")),
        "matrix": f"sha256 {str(run.get('matrix_sha256'))[:16]}",
        "profile": str(run.get("profile")),
        "seed": str(run.get("seed")),
        "device": f"{device.get('matrix_key')} ({device.get('name')})",
        "strict": str(bool(run.get("strict"))),
        "stale entries": str(run.get("stale_entries", "fail")),
        # a run that stops each implementation at its first failure skips the rest of it
        "stop impl after failure": str(bool(run.get("stop_impl_after_failure"))),
        "emulated": str(bool(run.get("emulated"))),
        "torch": str(env.get("torch")),
        "cuda": str(env.get("cuda")),
        "hip": str(env.get("hip")),
        "driver": str(env.get("cuda_driver")),
    }
    impls = {}
    for i in run.get("implementations") or ():
        wraps = f", wraps {i['wraps']}" if i.get("wraps") else ""
        impls[f"implementation {i['area']}:{i['name']}"] = f"{i['spec']} ({i['origin']}{wraps})"
    out["implementations"] = json.dumps(sorted(impls.items()))
    out.update(impls)
    return out


def _suite(report: dict[str, Any]) -> str:
    """The suite that ran: its commit (and whether the tree had changes) where known, which
    an editable install's version string (fixed at install time) is not; else its version."""
    suite = report.get("suite") or {}
    if suite.get("commit"):
        return f"commit {suite['commit'][:12]}" + (" with uncommitted changes"
                                                    if suite.get("dirty") else "")
    return f"version {suite.get('version') or report.get('tool_version')}, commit unknown"


def changed(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(setting, old, new) for every setting that differs; per implementation, not the
    summary line."""
    a, b = settings(old), settings(new)
    return [(k, a.get(k, "absent"), b.get(k, "absent")) for k in sorted(set(a) | set(b))
            if k != "implementations" and a.get(k) != b.get(k)]


def disagreement(first: dict[str, Any], other: dict[str, Any]) -> str | None:
    """The first merge setting two reports disagree on, as "the <what> (<a> vs <b>)"."""
    a, b = settings(first), settings(other)
    for key, what in MERGE_KEYS.items():
        if a[key] != b[key]:
            if key == "implementations":
                diffs = [k for k in sorted(set(a) | set(b)) if k.startswith("implementation ")
                         and a.get(k) != b.get(k)]
                k = diffs[0] if diffs else key
                return f"different {what} ({k}: {b.get(k, 'absent')} vs {a.get(k, 'absent')})"
            return f"different {what} ({b[key]} vs {a[key]})"
    return None
