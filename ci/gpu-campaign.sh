#!/usr/bin/env bash
# The GPU campaign: the GPU checks and benchmarks of every area, most valuable first, within
# a global deadline on one lent GPU (stages: conformance/cli/campaign_stages.py; the plan of
# calls: docs/guides/gpu-campaign.md). On the GPU host, after carrying what ci/gpu-carry.sh
# prepared:
#   usage: ci/gpu-campaign.sh OUTDIR [--deadline S]   the campaign (python3 with torch + CUDA)
#          ci/gpu-campaign.sh --dry-run OUTDIR        its rehearsal on a CPU (CI runs it)
# It unpacks the CuTe DSL parts (from .gpu/ or /tmp, one of each name) when all are there,
# installs the carried wheels (.whl/) into /tmp/site, puts both and this checkout on
# PYTHONPATH, and runs python3 -m conformance.cli.campaign, which rewrites OUTDIR (at most
# eight files) after every stage. The deadline counts from this script's start.
set -uo pipefail
export CONFORMANCE_CAMPAIGN_T0=$(date +%s.%N)
cd "$(dirname "$0")/.."
mapfile -t parts < <(ls .gpu/cute.tar.xz.part-* /tmp/cute.tar.xz.part-* 2>/dev/null \
  | awk -F/ '!seen[$NF]++ {print $NF "\t" $0}' | sort | cut -f2)
if [ "${#parts[@]}" -gt 0 ] && [ ! -d /tmp/cute-site ]; then
  # a call that carries one part only cannot unpack: the stream is cut (its stages wait;
  # an xz stream ends in the bytes "YZ", so a cut one is seen without decompressing it);
  # unpack aside and move into place, so a cut or failed unpack leaves no half site
  rm -rf /tmp/cute-unpack && mkdir -p /tmp/cute-unpack
  if [ "$(tail -c 2 "${parts[-1]}")" = "YZ" ] \
      && cat "${parts[@]}" | xz -d 2>/dev/null | tar -x -C /tmp/cute-unpack 2>/dev/null \
      && [ -d /tmp/cute-unpack/cute-site ]; then
    mv /tmp/cute-unpack/cute-site /tmp/cute-site
  else
    echo "note: the CuTe DSL parts present (${#parts[@]}: ${parts[*]##*/}) do not unpack" \
         "whole; the stages that need it wait for a call that carries them all"
  fi
  rm -rf /tmp/cute-unpack
fi
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl || echo "warning: the carried wheels did not install"
fi
# each site as Python would take it (its .pth files put the CuTe DSL's cutlass on the path;
# -S: no installed cutlass may answer the .pth's import)
for d in /tmp/site /tmp/cute-site; do
  [ -d "$d" ] || continue
  paths=$(python3 -S -c "import site, sys; old = set(sys.path); site.addsitedir('$d');
print(':'.join(p for p in sys.path if p not in old and p.startswith('$d')))")
  export PYTHONPATH="${paths:-$d}${PYTHONPATH:+:$PYTHONPATH}"
done
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# the suite's plugin by name where the checkout is not pip-installed (a lent host)
if ! python3 -c "import importlib.metadata as m, sys; sys.exit(not any(
    e.name == 'torch_conformance' for e in m.entry_points(group='pytest11')))"; then
  export PYTEST_ADDOPTS="${PYTEST_ADDOPTS:-} -p conformance.plugin"
fi
python3 -c "import conformance.plugin" 2>/dev/null \
  || { echo "error: the suite does not import here (missing packages?)" >&2; exit 4; }
exec python3 -m conformance.cli.campaign "$@"
