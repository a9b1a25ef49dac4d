# Thin wrapper: the real build is CMake. `make run` and `make test` are the
# two commands a new user needs; both install missing Debian packages first.
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
MAKEFLAGS  += --no-print-directory

.PHONY: deb deb-test all deps build test test-asan test-tsan build-clang fuzz reliability run install clean

all: build

# Installs missing Debian packages (root or sudo). Only deps, run and the
# test targets call it: `make build` (like plain cmake) only builds.
deps:
	@bash scripts/deps

# The side-by-side benchmark's peers (LevelDB, RocksDB) are linked into the
# tool only when asked; the Makefile asks, a plain cmake build does not.
PEERS ?= -DBKV_WITH_PEERS=ON
# A test that hangs fails after this many seconds instead of running out
# CI's clock with the whole suite.
CTEST_TIMEOUT ?= 1500

build:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(PEERS) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: deps
	@$(MAKE) build
	@cd $(BUILD) && ctest --output-on-failure --timeout $(CTEST_TIMEOUT) -j $(JOBS)

# The whole tree with clang and -Werror (CI builds it; gcc runs the tests).
CLANG_BUILD ?= build-clang
build-clang: deps
	@CC=clang cmake -S . -B $(CLANG_BUILD) -DCMAKE_BUILD_TYPE=Release $(PEERS) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(CLANG_BUILD) -j $(JOBS)

test-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DBKV_SANITIZE=ON $(PEERS) $(CMAKE_ARGS) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)
	@cd $(ASAN_BUILD) && ctest --output-on-failure --timeout $(CTEST_TIMEOUT) -j $(JOBS)

# ThreadSanitizer over the tests that run threads.
TSAN_BUILD ?= build-tsan
test-tsan: deps
	@cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS="-fsanitize=thread -O1" \
		-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread -DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread $(CMAKE_ARGS) >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS)
	@cd $(TSAN_BUILD) && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure --timeout $(CTEST_TIMEOUT) -R 'concurrency_test|memtable_test|db_test|iter_test|hardening_test|boundaries_test|ingest_test|value_search_test|read_only_test|range_delete_test|power_loss_test'

# libFuzzer (clang) over each target for FUZZ_SECONDS, growing fuzz/corpus.
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
fuzz: deps
	@bash scripts/deps fuzz
	@CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DBKV_SANITIZE=ON -DBKV_FUZZ=ON \
		-DBKV_BUILD_TESTS=OFF -DBKV_BUILD_TOOLS=OFF >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@for t in filter table log value_index api; do \
		$(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -artifact_prefix=$(FUZZ_BUILD)/ fuzz/corpus/$$t 2>&1 | tail -n 2; \
	done

# Crash, power-loss, fault, corruption and fuzz testing with a summary:
# SCALE=ci (CI, ~10 min) or SCALE=long (over an hour; FUZZ_SECONDS=N per fuzz target).
SCALE ?= ci
reliability:
	@SCALE=$(SCALE) bash tests/reliability/run.sh

# The default report: the filter library's table, then bloomkv beside
# LevelDB and RocksDB (those built in) on 1 M keys, on a temporary database.
run: deps
	@$(MAKE) build
	@$(BUILD)/bloomkv-bench filters --keys 1000000
	@echo
	@$(BUILD)/bloomkv-bench db --compare --num 1000000 --rounds 3 \
		--benchmarks fillrandom,readrandom,readmissing,readseq,seekrandom,multireadrandom,overwrite
	@echo
	@echo "search by value (bloomkv: bit-sliced value index; LevelDB, RocksDB: the composite-key index their users build, its writes in the fill)"
	@$(BUILD)/bloomkv-bench db --compare --num 500000 --value_index bitsliced --secondary_index composite \
		--searches 1000 --benchmarks fillrandom,findvalue
	@if [ -f $(BUILD)/bloomkv_redis.so ] && command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null; then \
		echo; echo "the Redis module beside Redis's own types (one node)"; \
		bash bench/redis_bench.sh $(BUILD)/bloomkv_redis.so 1000000; fi
	@if ls $(BUILD)/python/bloomkv.*.so >/dev/null 2>&1 && /usr/bin/python3 -c "import plyvel" 2>/dev/null; then \
		echo; echo "the Python extension beside plyvel (LevelDB's)"; \
		PYTHONPATH=$(BUILD)/python /usr/bin/python3 bench/python_bench.py --num 1000000; fi

# Debian packages built with Debian's tools (scripts/deb) into DEB_DIR,
# outside the tree; deb-test installs them, tests the installed files and
# purges them (needs root: CI does it on a machine of its own).
DEB_DIR ?= ../bloomkv-debs
deb:
	@bash scripts/deb $(DEB_DIR)

deb-test: deb
	@bash tests/package/deb_test.sh $(DEB_DIR)

# The installed tool is built without the peers: it must not depend on
# whichever LevelDB or RocksDB the build machine had.
install:
	@$(MAKE) build PEERS=-DBKV_WITH_PEERS=OFF
	@cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD) $(CLANG_BUILD)
