#!/usr/bin/env bash
# The one prepared GPU check of our FA4-style kernels (issue 5), < 8 minutes on one H200:
#  1. correctness: the attention suite (case catalogue, regressions, random cases) for our
#     CuTe DSL kernels and the peers, against the float64 oracle, with a report;
#  2. throughput: forward (and backward where declared) TFLOP/s of our kernel vs
#     flash-attn-4's flash_attn_func and flex BACKEND="FLASH", bf16, S = 4096, D = 128
#     (issue target: forward >= 0.9x flash_attn_func on sm90).
# The CuTe DSL stack comes from ../shared/gpu/pack-cute.sh (two xz parts carried in .gpu/
# or /tmp); the host needs torch with CUDA, pytest, hypothesis, xdist, pyyaml, jsonschema.
#   usage: benchmarks/fa4_gpu.sh [OUTDIR]      (default docs/results/fa4-gpu-<date>)
# Not yet run on a GPU by this project.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/results/fa4-gpu-$(date +%F)}
mkdir -p "$out"
# the parts may sit in .gpu/ or /tmp (carried in two calls): one of each name, in order
mapfile -t parts < <(ls .gpu/cute.tar.xz.part-* /tmp/cute.tar.xz.part-* 2>/dev/null \
  | awk -F/ '!seen[$NF]++ {print $NF "\t" $0}' | sort | cut -f2)
if [ "${#parts[@]}" -gt 0 ] && [ ! -d /tmp/cute-site ]; then
  cat "${parts[@]}" | xz -d | tar -x -C /tmp
fi
[ -d /tmp/cute-site ] && export PYTHONPATH=/tmp/cute-site:.${PYTHONPATH:+:$PYTHONPATH}
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"
python -c "import cutlass, torch; print('cutlass-dsl', cutlass.__version__ if hasattr(cutlass, '__version__') else '?', 'torch', torch.__version__)" | tee -a "$out/gpu.txt"

# 1. correctness (budget ~4.5 min)
timeout 270 python -m pytest conformance/attention --device=cuda -p no:cacheprovider -q \
  -k "fa4 or flash_attn_func or flex.flash" --report "$out/conformance" 2>&1 \
  | tail -40 | tee "$out/conformance.txt"

# 2. throughput (budget ~2.5 min)
timeout 160 python benchmarks/attention_gpu.py --impls fa4.sm90,fa4.sm100,fa4.flash_attn_func,flex.flash \
  --seqlens 4096 --head-dims 128 --dtype bfloat16 --time-budget 140 \
  --out "$out/throughput.json" 2>&1 | tail -30 | tee "$out/throughput.txt"
echo "results in $out"
