#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# check_layers.py [ROOT]: every #include "FOLDER/..." in a layer folder names a folder that the
# layer's CMake library links (directly or through what it links), so the include graph cannot go
# against the layers docs/architecture.md draws, nor form a cycle between folders. A layer is a
# top-level folder whose CMakeLists.txt defines the library bulkhead_<folder> (ctl: bulkhead_ctl).
# Prints each offending include as FILE:LINE: and exits 1; exits 0 when there is none.
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent.parent)
links = {}  # folder -> folders its library links
for cmake in sorted(root.glob("*/CMakeLists.txt")):
    folder = cmake.parent.name
    text = cmake.read_text()
    if not re.search(r"add_library\(bulkhead_" + re.escape(folder) + r"\b", text):
        continue
    deps = set()
    for m in re.finditer(r"target_link_libraries\(bulkhead_" + re.escape(folder) + r"\b([^)]*)\)", text):
        deps |= set(re.findall(r"\bbulkhead_(\w+)", m.group(1)))
    links[folder] = deps


def reachable(folder, seen=None):
    seen = set() if seen is None else seen
    for dep in links.get(folder, ()):
        if dep not in seen:
            seen.add(dep)
            reachable(dep, seen)
    return seen


bad = []
for folder in sorted(links):
    allowed = reachable(folder) | {folder}
    if folder in reachable(folder):
        bad.append(f"{folder}/CMakeLists.txt: bulkhead_{folder} links itself through a cycle")
    for path in sorted((root / folder).rglob("*")):
        if path.suffix not in (".h", ".cc"):
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            m = re.match(r'\s*#include "(\w+)/', line)
            if m and m.group(1) in links and m.group(1) not in allowed:
                bad.append(f"{path.relative_to(root)}:{number}: includes {m.group(1)}/, which "
                           f"bulkhead_{folder} does not link (it may use: "
                           f"{', '.join(sorted(allowed - {folder})) or 'nothing'})")
for line in bad:
    print(line)
sys.exit(1 if bad else 0)
