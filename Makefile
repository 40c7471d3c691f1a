# SPDX-License-Identifier: MIT
# Thin wrapper over the CMake build. `make demo` and `make test` are the README's two commands.
BUILD ?= build
PRESET_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo
JOBS ?= $(shell nproc)
# The sanitizer build: clang, ASan + UBSan, the libFuzzer targets (CMakePresets.json asan-ubsan).
ASAN_BUILD := build-asan
# `make fuzz`: seconds each fuzzer runs (the ctest entries run BULKHEAD_FUZZ_SECONDS, 20 s).
FUZZ_SECONDS ?= 600
FUZZERS := ipc/ipc_frame_fuzzer config/config_fuzzer cell/notify_message_fuzzer \
           http/http_request_fuzzer http/http_response_relay_fuzzer
LAUNCHER := $(if $(shell command -v ccache),\
  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

.PHONY: all deps demo-deps build demo test asan-build asan-test fuzz lint bench bench-restart bench-vm bench-deps clean

all: build

# Everything `make test` needs (scripts/install-deps.sh); `make demo` needs only demo-deps.
deps:
	bash scripts/install-deps.sh

demo-deps:
	bash scripts/install-build-deps.sh

build: deps
	cmake -S . -B $(BUILD) $(PRESET_FLAGS) -DBULKHEAD_WERROR=ON -DBUILD_TESTING=ON $(LAUNCHER)
	cmake --build $(BUILD) -j $(JOBS)

# Only what the demo runs (bulkhead-demo, bulkheadd and the example workers) and bulkheadctl, which
# the README's next steps use. A fresh build
# directory is configured without the tests (no GoogleTest needed); one that `make build` or
# `make test` configured keeps them.
demo: demo-deps
	cmake -S . -B $(BUILD) $(PRESET_FLAGS) -DBULKHEAD_WERROR=ON $(LAUNCHER) \
	  $(if $(wildcard $(BUILD)/CMakeCache.txt),,-DBUILD_TESTING=OFF)
	cmake --build $(BUILD) -j $(JOBS) --target bulkhead-demo bulkheadctl
	$(BUILD)/examples/bulkhead-demo --bin-dir $(BUILD)

# The normal build's full ctest, then the sanitizer build's (fuzzers included, VM tests excluded),
# then clang-tidy: the whole suite, what .ci/run runs.
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 300
	$(MAKE) asan-test
	$(MAKE) lint

asan-build: deps
	cmake --preset asan-ubsan $(LAUNCHER)
	cmake --build $(ASAN_BUILD) -j $(JOBS)

# Every ctest entry but the VM tests (label vm), each fuzzer for BULKHEAD_FUZZ_SECONDS; the test
# preset sets ASAN_OPTIONS / UBSAN_OPTIONS so that any finding fails its test.
asan-test: asan-build
	ctest --preset asan-ubsan -j $(JOBS) --timeout 300

# Each fuzzer for FUZZ_SECONDS, one after the other, keeping what it finds in its work corpus.
fuzz: asan-build
	set -e; for f in $(FUZZERS); do \
	  bash tests/fuzz/run_fuzzer.sh $(ASAN_BUILD)/tests/$$f tests/fuzz/corpus/$$(basename $$f) \
	    $(ASAN_BUILD)/tests/$$f.work $(FUZZ_SECONDS); \
	done

# clang-tidy (.clang-tidy) over the project's sources, with the sanitizer build's compile commands.
lint: deps
	cmake --preset asan-ubsan $(LAUNCHER) >/dev/null
	bash scripts/lint.sh $(ASAN_BUILD) $(JOBS)

# HAProxy, nginx and wrk (scripts/install-bench-deps.sh), then the bench with HAProxy as a peer: the
# frame cells' run, then the HTTP run, whose second half wrk drives, nginx beside HAProxy
# (docs/benchmarks.md), and bulkheadd's memory per idle cell and per idle connection.
bench-deps:
	bash scripts/install-bench-deps.sh

# Issue 26's adaptive bench on real cgroup v2 (CPU-bound under cpu_max, memory-bound under
# memory_max, neighbours), in a qemu VM (TCG; ~10 min): tests/vm/scenarios/bench_adaptive.sh. The
# bench's lines are printed at the end; the whole console log stays in $(BUILD)/bench-vm.log.
bench-vm: build
	bash tests/vm/run-vm.sh --scenario tests/vm/scenarios/bench_adaptive.sh \
	  --bin $(BUILD)/bench/bulkhead-bench-adaptive --bin $(BUILD)/supervisor/bulkheadd \
	  --bin $(BUILD)/tests/helpers/bulkhead-test-worker --timeout 1800 \
	  --log $(BUILD)/bench-vm.log > /dev/null; \
	  status=$$?; grep -E '^(bench-vm:|bulkhead-bench-adaptive|cell |fixed-|adaptive )' \
	  $(BUILD)/bench-vm.log; exit $$status

bench: build bench-deps
	$(BUILD)/bench/bulkhead-bench --bin-dir $(BUILD)
	$(BUILD)/bench/bulkhead-bench --bin-dir $(BUILD) --http
	$(BUILD)/bench/bulkhead-bench-idle --bin-dir $(BUILD)
	$(MAKE) bench-restart
	$(BUILD)/bench/bulkhead-bench-adaptive --bin-dir $(BUILD)

# Issue 24's two measures alone (docs/benchmarks.md): 50 back-to-back planned restarts per kind of
# cell under load beside the control, then 20 re-execs of bulkheadd in a row per kind of cell.
bench-restart: build
	$(BUILD)/bench/bulkhead-bench-restart --bin-dir $(BUILD)
	$(BUILD)/bench/bulkhead-bench-restart --bin-dir $(BUILD) --reexec 20

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)

# The Debian package (packaging/, README "Debian package and systemd"): $(BUILD)/bulkhead_*.deb.
.PHONY: package
package: build
	cmake --build $(BUILD) --target package
