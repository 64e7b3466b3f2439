#!/usr/bin/env bash
# The qualification on every torch release from 2.11 to the newest, each in its own venv,
# exactly as a new user runs it: `pip install torch==X`, `pip install -e .`, then the
# qualification (`pytest -n auto --report DIR`), with --stale-entries=fail (an expected
# failure that passes within its measured releases is a stale entry: it fails the release).
# Not part of .ci/run (about six minutes a release on 2 cores). Writes OUT/<release>/ (the report, the log, the exit
# status and the wall time) and the merged table OUT/release-matrix.md
# (torch-conformance releases); commit that table as docs/results/release-matrix.md, and
# its first table into docs/guides/versions.md between the release-table markers
# (tests/test_release_table.py checks that the two agree).
#
#   usage: ci/release-matrix.sh [OUT] [RELEASE...]
#     OUT      default release-matrix-out
#     RELEASE  default: 2.11.0, the newest patch of each later minor, as ci/newest-torch.sh
#              lists them (--all)
#   RELEASE_VENVS=DIR   where the venvs are kept between runs (default
#                       ~/.cache/torch-conformance/release-venvs): a venv whose torch is
#                       already the release is reused (only the suite is reinstalled)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-release-matrix-out}
shift || true
releases=("$@")
if [ "${#releases[@]}" -eq 0 ]; then
  mapfile -t releases < <(bash ci/newest-torch.sh --all)
fi
[ "${#releases[@]}" -gt 0 ] || { echo "error: no torch release to run" >&2; exit 4; }
venvs=${RELEASE_VENVS:-$HOME/.cache/torch-conformance/release-venvs}
mkdir -p "$out" "$venvs"
# a machine-wide pip constraint file (some images cap torch) must not pick the release
export PIP_CONSTRAINT=/dev/null
for rel in "${releases[@]}"; do
  v="$venvs/torch-$rel" dir="$out/$rel"
  rm -rf "$dir" && mkdir -p "$dir"
  have=$("$v/bin/python" -c "import torch; print(torch.__version__.split('+')[0])" 2>/dev/null)
  if [ "$have" != "$rel" ]; then
    rm -rf "$v" && python3 -m venv "$v" && "$v/bin/python" -m pip install -q --upgrade pip
    "$v/bin/python" -m pip install -q "torch==$rel" >"$dir/install.log" 2>&1 \
      || { echo "$rel: torch did not install (see $dir/install.log)"; echo 4 >"$dir/rc"; continue; }
  fi
  "$v/bin/python" -m pip install -q -e . >>"$dir/install.log" 2>&1 \
    || { echo "$rel: the suite did not install (see $dir/install.log)"; echo 4 >"$dir/rc"; continue; }
  "$v/bin/python" -m pip list --format=freeze >"$dir/packages.txt" 2>/dev/null
  t0=$(date +%s)
  ( source "$v/bin/activate" && rm -rf "/tmp/torchinductor_$(id -un)" \
      && pytest -n auto --stale-entries=fail --report "$dir/report" >"$dir/pytest.log" 2>&1 )
  rc=$?
  echo "$rc" >"$dir/rc"
  echo $(( $(date +%s) - t0 )) >"$dir/seconds"
  echo "$rel: exit $rc in $(cat "$dir/seconds") s: $(tail -n 1 "$dir/pytest.log")"
done
# exit 1 unless every release exited 0 (the table is written either way)
exec "$venvs/torch-${releases[-1]}/bin/torch-conformance" releases "$out" \
  -o "$out/release-matrix.md"
