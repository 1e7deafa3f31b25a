# The two README commands. Everything else is CMake + Ninja underneath.
#   make demo   set-up, build, run the main job on a built-in default
#   make test   set-up, build, every test, then again under ASan + UBSan, the
#               fuzzer, and a clang Release build with every test
BUILD       ?= build
ASAN_BUILD  ?= build-asan
CLANG_BUILD ?= build-clang
JOBS        ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: all setup build demo test test-fast test-asan test-fuzz fuzz-long test-clang format-check docs bench golden clean

all: build

setup:
	./scripts/setup.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: setup $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DPLENA_SANITIZE=ON

demo: build
	./scripts/demo.sh $(BUILD)

test-fast: build
	cmake --build $(BUILD) --target format-check
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: setup $(ASAN_BUILD)/build.ninja
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ctest --output-on-failure -j $(JOBS) -LE no_sanitize

# libFuzzer over the trace JSON reader and validator, bounded in time
# (docs/design.md "Fuzzing"): every parser's libFuzzer target in fuzz/, seed
# corpora in fuzz/corpus/<name>/. FUZZ_SECONDS is the total, split evenly over
# the targets; fuzz-long runs them for FUZZ_LONG_SECONDS in all.
FUZZ_SECONDS ?= 90
FUZZ_LONG_SECONDS ?= 3600
test-fuzz: setup
	./scripts/fuzz.sh $(FUZZ_SECONDS)

fuzz-long: setup
	./scripts/fuzz.sh $(FUZZ_LONG_SECONDS)

# The compiler and build type the other builds do not cover: clang, Release
# (-O3, NDEBUG), every CTest.
$(CLANG_BUILD)/build.ninja:
	cmake -S . -B $(CLANG_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang

test-clang: setup $(CLANG_BUILD)/build.ninja
	cmake --build $(CLANG_BUILD) -j $(JOBS)
	cd $(CLANG_BUILD) && ctest --output-on-failure -j $(JOBS)

test: test-fast test-asan test-fuzz test-clang

docs: build
	cmake --build $(BUILD) --target docs trace-docs

bench: build
	./bench/run_all.sh $(BUILD)

# Rewrites tests/golden/expected from the current build: only for a deliberate
# behaviour change (the CTest golden_outputs compares against it).
golden: build
	rm -rf tests/golden/expected
	sh tests/golden/record.sh $(BUILD)/plena tests/golden/expected

format-check: build
	cmake --build $(BUILD) --target format-check

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(CLANG_BUILD)
