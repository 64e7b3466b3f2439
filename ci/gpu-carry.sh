#!/usr/bin/env bash
# Prepares what the GPU campaign (ci/gpu-campaign.sh) needs on a lent GPU host that has torch
# but not the CuTe DSL stack or jsonschema, within the device tool's 64 MiB per call:
#   .gpu/cute.tar.xz.part-00, -01   nvidia-cutlass-dsl + flash-attn-4 for CPython 3.12 (from
#                                   ../shared/gpu/pack-cute.sh, re-split into 40 MiB parts)
#   .whl/*.whl                      jsonschema and its dependencies for CPython 3.12
#   usage: ci/gpu-carry.sh            prepare .gpu/ and .whl/ (both git-ignored) here
#          ci/gpu-carry.sh --check D  rehearse into D: pack, check the sizes against the
#                                     limits, unpack the parts as the campaign does, and
#                                     prove cutlass.cute and flash_attn.cute import
#                                     (ci/carry_import_check.py)
# The packed bundle is cached by pack-cute.sh's digest (its inputs are pinned there) and the
# part size, under
# ~/.cache/torch-conformance/cute-bundle/ (CONFORMANCE_CACHE moves it; CONFORMANCE_NO_CACHE=1
# packs afresh): a clean clone on a machine that packed it before does not pack again.
# The plan of calls (docs/guides/gpu-campaign.md): call 1 carries .gpu/cute.tar.xz.part-00
# and .whl, copies the part to /tmp and runs the stages that need no CuTe DSL; call 2,
# within 30 s while the machine is warm, carries .gpu/cute.tar.xz.part-01 and .whl and runs
# the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
pack=../shared/gpu/pack-cute.sh
limit=$((64 * 1024 * 1024))
check=""
if [ "${1:-}" = "--check" ]; then
  check=${2:?usage: ci/gpu-carry.sh --check DIR}
  gpu=$check/.gpu whl=$check/.whl
else
  gpu=.gpu whl=.whl
  for d in /.gpu/ /.whl/; do
    grep -qxF "$d" .git/info/exclude 2>/dev/null || echo "$d" >> .git/info/exclude
  done
fi
[ -f "$pack" ] || { echo "error: $pack not found (the shared folder beside this checkout)" >&2; exit 4; }
rm -rf "$gpu" "$whl"
mkdir -p "$gpu" "$whl"
log=$(mktemp)
quiet() { "$@" >"$log" 2>&1 || { grep -v "is ignored" "$log" >&2; echo "error: $*" >&2; exit 1; }; }
# pack-cute.sh pins every input (exact versions): a bundle packed by the same script is
# reused from the cache, keyed by the script's digest (packing is minutes of xz -9); a bundle
# is stored only whole (written aside, then moved into place)
part=40M  # the part size below: part of the key with the script
key=$( { cat "$pack"; echo "part $part"; } | sha256sum | cut -c1-16)
cache=${CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/torch-conformance}/cute-bundle/$key
if [ ! -d "$cache" ] || [ "${CONFORMANCE_NO_CACHE:-}" = 1 ]; then
  fresh=$(mktemp -d)
  quiet bash "$pack" "$fresh"
  # re-split the xz stream into 40 MiB parts (pack-cute.sh writes 60 MiB ones): call 1 then
  # has room for a checkout that grows (a 60 MiB part left about 2 MiB of the 64)
  cat "$fresh"/cute.tar.xz.part-* > "$fresh/cute.tar.xz"
  rm "$fresh"/cute.tar.xz.part-*
  split -b "$part" -d "$fresh/cute.tar.xz" "$fresh/cute.tar.xz.part-"
  rm "$fresh/cute.tar.xz"
  mkdir -p "$(dirname "$cache")"
  rm -rf "$cache.tmp" && mv "$fresh" "$cache.tmp" && rm -rf "$cache" && mv "$cache.tmp" "$cache"
  echo "packed the CuTe DSL bundle into $cache"
else
  echo "the CuTe DSL bundle from $cache (pack-cute.sh unchanged)"
fi
cp "$cache"/cute.tar.xz.part-* "$gpu"/
quiet python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 -d "$whl" \
  jsonschema jsonschema-specifications referencing rpds-py
rm -f "$log"
tree=$(git ls-files -z | xargs -0 du -cb | tail -1 | cut -f1)
mapfile -t parts < <(ls "$gpu"/cute.tar.xz.part-* | sort)
[ "${#parts[@]}" -eq 2 ] || { echo "error: expected 2 parts, got ${#parts[@]}" >&2; exit 1; }
one=$(( tree + $(stat -c %s "${parts[0]}") ))
wheels=$(du -cb "$whl"/*.whl | tail -1 | cut -f1)
one=$(( one + wheels ))
two=$(( tree + $(stat -c %s "${parts[1]}") + wheels ))
echo "call 1: tree $tree B + ${parts[0]##*/} + wheels: $one B of $limit"
echo "call 2: tree + ${parts[1]##*/} + wheels: $two B of $limit"
[ "$one" -le "$limit" ] && [ "$two" -le "$limit" ] || { echo "error: over 64 MiB" >&2; exit 1; }
if [ -n "$check" ]; then  # unpack as the campaign does; prove the import (ci/carry_import_check.py)
  mkdir -p "$check/unpacked"
  cat "${parts[@]}" | xz -d | tar -x -C "$check/unpacked"
  site=$check/unpacked/cute-site
  # the same distributions at the same versions, for this machine's Python (the bundle is
  # for the GPU host's 3.12); --compare shows that it stands for the bundle
  mapfile -t reqs < <(for d in "$site"/*.dist-info; do b=${d##*/}; b=${b%.dist-info}
                      echo "${b%-*}==${b##*-}"; done)
  quiet python3 -m pip install -q --no-deps --only-binary=:all: --no-compile \
    --target "$check/twin" "${reqs[@]}"
  rm -rf "$check/twin/bin"
  python3 ci/carry_import_check.py --compare "$site" "$check/twin"
  # the GPU host has einops (flash_attn.cute imports it); this machine may not
  python3 -c "import einops" 2>/dev/null \
    || quiet python3 -m pip install -q --no-deps --target "$check/host" einops
  torch_site=$(python3 -c "import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))")
  python3 -S -E -s ci/carry_import_check.py "$check/twin" "$torch_site" "$check/host"
  ls "$whl"
  echo "carry check passed"
fi
