# SPDX-License-Identifier: MIT
# Thin wrapper over the CMake build. `make demo` and `make test` are the README's two commands.
BUILD ?= build
PRESET_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
JOBS ?= $(shell nproc)

.PHONY: all deps build demo test bench clean

all: build

deps:
	bash scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) $(PRESET_FLAGS) -DBULKHEAD_WERROR=ON
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/examples/bulkhead-demo --bin-dir $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300

bench: build
	$(BUILD)/bench/bulkhead-bench --bin-dir $(BUILD)

clean:
	rm -rf $(BUILD)

# The Debian package (packaging/, README "Debian package and systemd"): $(BUILD)/bulkhead_*.deb.
.PHONY: package
package: build
	cmake --build $(BUILD) --target package
