#!/usr/bin/env bash
# Which torch releases the suite is qualified on, as PyPI serves them now.
#
#   ci/newest-torch.sh           the newest torch release on PyPI, and the pin CI's newest
#                                leg uses (.ci/run, NEWEST_TORCH); exit 1 when they differ
#   ci/newest-torch.sh --all     2.11.0 and the newest patch of every later minor release,
#                                one a line (what ci/release-matrix.sh runs by default)
#   ci/newest-torch.sh --check [OUT]
#                                the qualification on the newest release (ci/release-matrix.sh
#                                OUT NEWEST), then the matrix entries it passes, each with
#                                the release to narrow its versions to ("fixed in X?"); exits
#                                with the qualification's status
#
# Bumping the pin: run --check; where it exits 0, set NEWEST_TORCH in .ci/run to the new
# release, narrow each entry it lists (versions: {torch: "<X"}), add the release to the
# matrix's `measured` list, and commit the three together with the new release-matrix table.
set -uo pipefail
cd "$(dirname "$0")/.."
oldest=2.11.0
pin=$(sed -n 's/^NEWEST_TORCH=\([0-9.]*\).*/\1/p' .ci/run)

releases() {  # every final release >= the oldest, newest patch per minor, oldest first
  PIP_CONSTRAINT=/dev/null python3 -m pip index versions torch 2>/dev/null \
    | sed -n 's/^Available versions: //p' | tr ',' '\n' | python3 -c "
import sys
from packaging.version import Version
vs = sorted({Version(v.strip()) for v in sys.stdin if v.strip()})
vs = [v for v in vs if not v.is_prerelease and not v.local and v >= Version('$oldest')]
best = {}
for v in vs:
    best[(v.major, v.minor)] = v
out = [Version('$oldest')] + [v for k, v in sorted(best.items()) if v > Version('$oldest')]
print('\n'.join(str(v) for v in out))"
}

case "${1:-}" in
  --all) releases; exit ;;
  --check)
    newest=$(releases | tail -n 1)
    [ -n "$newest" ] || { echo "error: PyPI listed no torch release" >&2; exit 4; }
    out=${2:-newest-torch-check}
    bash ci/release-matrix.sh "$out" "$newest"
    python3 - "$out/$newest/report/report.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["run"]
rows = [e for e in run.get("matrix_entries", []) if e.get("fixed_in")]
print(f"{len(rows)} matrix entries pass on this release:" if rows else
      "no matrix entry passes on this release")
for e in rows:
    print(f"  {e['label']} (area {e['area']}): fixed in {e['fixed_in']}? "
          f"narrow its versions to {e['narrow_to']}")
PY
    rc=$(cat "$out/$newest/rc" 2>/dev/null || echo 4)
    echo "exit status of the qualification on $newest: $rc"
    exit "$rc"
    ;;
  "")
    newest=$(releases | tail -n 1)
    [ -n "$newest" ] || { echo "error: PyPI listed no torch release" >&2; exit 4; }
    echo "newest torch on PyPI: $newest; CI's newest leg: ${pin:-none}"
    [ "$newest" = "$pin" ] || { echo "the pin is behind: run ci/newest-torch.sh --check"; exit 1; }
    ;;
  *) echo "usage: ci/newest-torch.sh [--all | --check [OUT]]" >&2; exit 4 ;;
esac
