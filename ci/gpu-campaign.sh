#!/usr/bin/env bash
# The GPU campaign: every GPU check and benchmark of every area in one run of at most
# 8 minutes on one H200 (stages and budgets: conformance/cli/campaign.py;
# docs/guides/gpu-campaign.md). On the GPU host, after carrying what ci/gpu-carry.sh prepared:
#   usage: ci/gpu-campaign.sh OUTDIR              the campaign (python3 with torch + CUDA)
#          ci/gpu-campaign.sh --dry-run OUTDIR    its rehearsal on a CPU (CI runs it)
# It unpacks the CuTe DSL parts (from .gpu/ or /tmp, one of each name), installs the carried
# wheels (.whl/) into /tmp/site, puts both and this checkout on PYTHONPATH, and runs
# python3 -m conformance.cli.campaign, which writes at most eight files into OUTDIR.
set -uo pipefail
cd "$(dirname "$0")/.."
mapfile -t parts < <(ls .gpu/cute.tar.xz.part-* /tmp/cute.tar.xz.part-* 2>/dev/null \
  | awk -F/ '!seen[$NF]++ {print $NF "\t" $0}' | sort | cut -f2)
if [ "${#parts[@]}" -gt 0 ] && [ ! -d /tmp/cute-site ]; then
  cat "${parts[@]}" | xz -d | tar -x -C /tmp || echo "warning: the CuTe DSL parts did not unpack"
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
