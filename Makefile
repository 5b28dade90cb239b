# The two commands: `make run` and `make test`. Each installs what it needs first.
.PHONY: all deps deps-test build run test test-fast tsan bench format tidy clean

PRESET_TEST ?= debug

all: build

deps:
	scripts/install-deps.sh build

deps-test:
	scripts/install-deps.sh test

# Builds the optimised binary at build/baton.
build: deps
	cmake --preset release >/dev/null
	cmake --build --preset release

# Installs, builds and starts `baton run standalone`.
run: build
	./build/baton run standalone

# The concurrent parts, also run under ThreadSanitizer by `make test`.
TSAN_TARGETS = base_test locker_test inmemory_broker_test sqlite_datastore_test \
               shell_runtime_test scheduler_test worker_test engine_test api_test
TSAN_TESTS = ThreadTimers|FakeClock|Locker|InMemory|Sqlite|Shell|SchedulerTest|WorkerTest|EngineTest|ApiTest

# Installs, builds (debug + ASan/UBSan, fuzzers) and runs every test through CTest, with
# a throwaway PostgreSQL and RabbitMQ for the integration tests, then the engine's
# concurrent parts again under ThreadSanitizer.
test: deps-test
	cmake --preset $(PRESET_TEST) >/dev/null
	cmake --build --preset $(PRESET_TEST)
	scripts/test-services/with-services.sh ctest --preset $(PRESET_TEST)
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan --target $(TSAN_TARGETS)
	ctest --preset tsan -R '$(TSAN_TESTS)'

# The unit tests only: the quick loop while working.
test-fast: deps-test
	cmake --preset $(PRESET_TEST) >/dev/null
	cmake --build --preset $(PRESET_TEST)
	ctest --preset $(PRESET_TEST) -L unit

# The benchmarks (not part of `make test`): micro benchmarks of the hot paths and the
# whole-system workloads against their baselines (xargs -P, a shell loop, make -j); prints
# the table and appends it to bench/RESULTS.md. BENCH_REPS, BENCH_ONLY: see bench/run.sh.
bench:
	scripts/install-deps.sh bench
	bench/run.sh

tsan: deps-test
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan --target $(TSAN_TARGETS)
	ctest --preset tsan -R '$(TSAN_TESTS)'

format:
	find src tests fuzz bench -name '*.h' -o -name '*.cc' | xargs clang-format -i

tidy:
	cmake --preset $(PRESET_TEST) >/dev/null
	find src -name '*.cc' | xargs clang-tidy -p build/$(PRESET_TEST) --quiet

clean:
	rm -rf build
