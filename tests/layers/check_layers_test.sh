#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# check_layers_test.sh ROOT: scripts/check_layers.py finds an include that goes against the
# layers in a small made-up tree (so the check can fail), then finds none in the project.
set -euo pipefail
root="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/low" "$tmp/high"
cat > "$tmp/low/CMakeLists.txt" <<'CMAKE'
add_library(bulkhead_low low.cc)
CMAKE
cat > "$tmp/high/CMakeLists.txt" <<'CMAKE'
add_library(bulkhead_high high.cc)
target_link_libraries(bulkhead_high PUBLIC bulkhead_low)
CMAKE
printf '#include "high/high.h"\n' > "$tmp/low/low.cc"
printf '#include "low/low.h"\n' > "$tmp/high/high.cc"
if out="$(python3 "$root/scripts/check_layers.py" "$tmp")"; then
  echo "FAIL: low/ including high/ was not found" >&2
  exit 1
fi
grep -q '^low/low.cc:1: includes high/' <<<"$out" || { echo "FAIL: unexpected output: $out" >&2; exit 1; }
python3 "$root/scripts/check_layers.py" "$root"
echo "layers: every include follows the CMake links"
