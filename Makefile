# The two commands: `make run` and `make test`. Each installs what it needs first.
.PHONY: all deps deps-test build run test test-fast tsan tsan-run thread-safety \
        thread-safety-run bench format format-check tidy clean

PRESET_TEST ?= debug

# ccache: paths relative to the checkout, so a clone elsewhere (CI's) hits what another
# built; a fresh clone's new file times do not defeat the direct mode.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= true
export CCACHE_SLOPPINESS ?= include_file_ctime,include_file_mtime,time_macros

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
               shell_runtime_test scheduler_test scheduler_shell_test worker_test engine_test api_test \
               schedules_test events_test event_relay_test server_test http_client_test
TSAN_TESTS = ThreadTimers|FakeClock|Locker|InMemory|Sqlite|Shell|SchedulerTest|TwoCoordinatorsTest|WorkerTest|EngineTest|ApiTest|SchedulesTest|EventHubTest|EventStreamTest|EventRelayTest|TwoCoordinatorsEventsTest|ServerTest|HttpClientTest
# Each must have run and passed under TSan (a regex that matches nothing is no test).
TSAN_REQUIRED = --require 'TwoCoordinatorsTest\.EachStepIsDecidedOnce/durable' \
                --require 'TwoCoordinatorsTest\.EachStepIsDecidedOnce/in_memory' \
                --require 'ServerTest\.TwoThousandIdleConnectionsAndFiveHundredParkedWaitsHoldNoThread'
# A skipped test fails `make test` (scripts/test-services/check-junit.sh reads CTest's
# JUnit); BATON_TEST_ALLOW_SKIP=1 lets a developer without the services run the rest.
JUNIT = $(CURDIR)/build/$(PRESET_TEST)/ctest-junit.xml
TSAN_JUNIT = $(CURDIR)/build/tsan/ctest-junit.xml

# Checks that every source file is clang-format clean, then installs, builds (debug +
# ASan/UBSan, fuzzers) and runs every test through CTest, with
# a throwaway PostgreSQL, RabbitMQ and Podman for the integration tests (with-services.sh
# fails when one cannot start, as does a skipped test), then the engine's concurrent
# parts again under ThreadSanitizer. Before TSan, every library and the binary are compiled
# again under clang's thread-safety analysis (no tests run from that build).
test: deps-test
	scripts/check-format.sh
	cmake --preset $(PRESET_TEST) >/dev/null
	cmake --build --preset $(PRESET_TEST)
	scripts/test-services/with-services.sh ctest --preset $(PRESET_TEST) --output-junit $(JUNIT)
	scripts/test-services/check-junit.sh $(JUNIT) --require '^e2e_readme_tour$$' --require '^e2e_examples$$'
	$(MAKE) --no-print-directory thread-safety-run
	$(MAKE) --no-print-directory tsan-run

# The TSan step of `make test` and `make tsan`.
tsan-run:
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan --target $(TSAN_TARGETS)
	ctest --preset tsan -R '$(TSAN_TESTS)' --no-tests=error --output-junit $(TSAN_JUNIT)
	scripts/test-services/check-junit.sh $(TSAN_JUNIT) $(TSAN_REQUIRED)

# Builds every library and the binary with -Wthread-safety -Werror=thread-safety: a member
# marked BATON_GUARDED_BY read or written without its lock fails the build (base/mutex.h).
thread-safety: deps-test
	$(MAKE) --no-print-directory thread-safety-run

thread-safety-run:
	cmake --preset thread-safety >/dev/null
	cmake --build --preset thread-safety

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
	$(MAKE) --no-print-directory tsan-run

format:
	find src tests fuzz bench -name '*.h' -o -name '*.cc' | xargs clang-format -i

# Lists the files under src/ tests/ fuzz/ bench/ that `make format` would change; fails
# when there is one. The first step of `make test`.
format-check:
	scripts/check-format.sh

tidy:
	cmake --preset $(PRESET_TEST) >/dev/null
	find src -name '*.cc' | xargs clang-tidy -p build/$(PRESET_TEST) --quiet

clean:
	rm -rf build
