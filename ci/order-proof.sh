#!/usr/bin/env bash
# Order independence of the qualification's verdicts (docs/reference/outcomes.md): the ci
# profile run forward, reversed, shuffled (a recorded seed) at -n 2, and forward at -n 1 and
# -n 3, on the torch installed in the active environment; then every test's outcome
# compared across the five (ci/order_proof.py). Not part of .ci/run (about 25 minutes on 2
# cores); tests/test_order_independence.py runs a sample of it there.
#
#   usage: ci/order-proof.sh OUT [SEED]     SEED: the shuffle's (default 20261207)
#   writes OUT/<run>/ (report, log, seconds) and OUT/order-proof.md; exit 1 when an outcome
#   differs between runs (or a run did not finish)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: ci/order-proof.sh OUT [SEED]}
seed=${2:-20261207}
mkdir -p "$out"
runs=("forward-n2:-n 2 --test-order=forward" "reverse-n2:-n 2 --test-order=reverse"
      "shuffle-n2:-n 2 --test-order=shuffle:$seed" "forward-n1:-n 1 --test-order=forward"
      "forward-n3:-n 3 --test-order=forward")
specs=()
for run in "${runs[@]}"; do
  label=${run%%:*} args=${run#*:}
  dir="$out/$label"
  rm -rf "$dir" && mkdir -p "$dir"
  t0=$(date +%s)
  # shellcheck disable=SC2086
  pytest $args --strict --stale-entries=fail --report "$dir/report" >"$dir/pytest.log" 2>&1
  echo "$?" >"$dir/rc"
  echo $(( $(date +%s) - t0 )) >"$dir/report/seconds"
  echo "$label: exit $(cat "$dir/rc") in $(cat "$dir/report/seconds") s: $(tail -n 1 "$dir/pytest.log")"
  specs+=("$label=$dir/report")
done
python -c "import torch; print(f'torch {torch.__version__}')" >"$out/order-proof.md"
python ci/order_proof.py "${specs[@]}" >>"$out/order-proof.md"
rc=$?
cat "$out/order-proof.md"
exit "$rc"
