#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# lint.sh BUILD_DIR [JOBS]: runs clang-tidy (checks in .clang-tidy, every warning an error) over
# each project source listed in BUILD_DIR/compile_commands.json: the libraries, binaries, bench
# and examples (not tests/, nor anything generated in a build directory). Exit status 1
# when any file has a finding. `make lint` calls it with the asan-ubsan build (clang flags).
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 BUILD_DIR [JOBS]" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
build="$(cd "$1" && pwd)"
jobs="${2:-2}"
db="$build/compile_commands.json"
[ -f "$db" ] || { echo "$0: no $db (configure the build first)" >&2; exit 2; }

# Sources under the project's own folders only, each once.
mapfile -t files < <(python3 - "$db" "$root" <<'PY'
import json, os, sys
db, root = sys.argv[1], sys.argv[2]
folders = ("base", "ipc", "config", "admission", "loop", "cell", "http", "proxy", "lifecycle",
           "control", "supervisor", "ctl", "examples", "bench")
seen = set()
for entry in json.load(open(db)):
    path = os.path.normpath(os.path.join(entry["directory"], entry["file"]))
    rel = os.path.relpath(path, root)
    if rel.split(os.sep)[0] in folders and path not in seen:
        seen.add(path)
        print(path)
PY
)
[ ${#files[@]} -gt 0 ] || { echo "$0: no project sources in $db" >&2; exit 2; }
echo "clang-tidy: ${#files[@]} files, $jobs jobs"
# One clang-tidy per file; xargs exits 123 when any of them failed.
printf '%s\n' "${files[@]}" |
  xargs -P "$jobs" -I{} clang-tidy -p "$build" --quiet {} 2> >(grep -v ' warnings generated\.$' >&2)
