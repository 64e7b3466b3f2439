"""Which collected test ids each device-matrix entry selects (by its patterns).

The snapshot in tests/data/matrix_selection.json was taken before the move of issue 36; a
test compares the selection today with it, so that a move or a renamed test that silently
changes what an entry selects is caught. Regenerate (after an intended change) with
``python tests/matrix_selection.py --write``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

SNAPSHOT = Path(__file__).parent / "data" / "matrix_selection.json"
PROFILES = ("ci", "thorough")


def normal(nodeid: str) -> str:
    """A test id independent of where the areas live (``conformance/areas/x``: as before)."""
    return nodeid.replace("conformance/areas/", "conformance/", 1)


def digest(nodeid: str) -> str:
    return hashlib.sha1(normal(nodeid).encode()).hexdigest()[:8]


def entry_key(rule) -> str:
    return f"{rule.kind}|{rule.area}|{json.dumps(list(rule.patterns))}"


class _Selection:
    def __init__(self) -> None:
        self.ids: list[str] = []
        self.matrix = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config, items) -> None:
        from conformance.harness.runstate import STATE

        self.matrix = config.stash[STATE].matrix
        self.ids = [(i.nodeid, i.get_closest_marker("area")) for i in items]


def collect(profile: str) -> dict:
    sel = _Selection()
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        "--device=cpu", f"--profile={profile}", "--pyargs", "conformance"],
                       plugins=[sel])
    assert code == 0, code
    entries = {}
    for rule in sel.matrix.rules:
        if not rule.patterns:
            continue
        got = sorted(normal(n) for n, m in sel.ids
                     if m is not None and m.args[0] == rule.area and rule.matches_id(n))
        entries.setdefault(entry_key(rule), set()).update(got)
    return {"universe": {digest(n) for n, _ in sel.ids}, "entries": entries}


def selection() -> dict:
    """The selection under each profile (one child each: the profile is read at import)."""
    out: dict = {"universe": set(), "entries": {}}
    for profile in PROFILES:
        proc = subprocess.run([sys.executable, __file__, "--child", profile],
                              capture_output=True, text=True, check=False)
        if proc.returncode:
            raise RuntimeError(f"collection failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
        part = json.loads(proc.stdout.splitlines()[-1])
        out["universe"] |= set(part["universe"])
        for k, v in part["entries"].items():
            out["entries"].setdefault(k, set()).update(v)
    return out


def differences(snapshot: dict, now: dict) -> list[str]:
    """Entries whose selection changed, among the tests both collections know: a test
    added or removed since the snapshot changes nothing; a renamed one (its id unknown to
    the snapshot) leaves the selections it was in, and is reported."""
    old_universe = set(snapshot["universe"])
    now_universe = set(now["universe"])
    out = []
    for key in sorted(set(snapshot["entries"]) | set(now["entries"])):
        before = {n for n in snapshot["entries"].get(key, ()) if digest(n) in now_universe}
        after = {n for n in now["entries"].get(key, ()) if digest(n) in old_universe}
        gone = set(snapshot["entries"].get(key, ())) - before
        if before != after or (gone and not after):
            out.append(f"{key}: lost {sorted(before - after)[:5]}, gained "
                       f"{sorted(after - before)[:5]}, no longer collected {sorted(gone)[:5]}")
    return out


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):
            part = collect(sys.argv[2])
        print(json.dumps({"universe": sorted(part["universe"]),
                          "entries": {k: sorted(v) for k, v in part["entries"].items()}}))
        return
    sel = selection()
    data = {"universe": sorted(sel["universe"]),
            "entries": {k: sorted(v) for k, v in sorted(sel["entries"].items())}}
    if "--write" in sys.argv:
        SNAPSHOT.parent.mkdir(exist_ok=True)
        SNAPSHOT.write_text(json.dumps(data, indent=0) + "\n")
    else:
        problems = differences(json.loads(SNAPSHOT.read_text()), data)
        print("\n".join(problems) or "every entry selects what it selected in the snapshot")
        raise SystemExit(1 if problems else 0)


if __name__ == "__main__":
    main()
