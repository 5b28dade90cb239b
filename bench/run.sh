#!/usr/bin/env bash
# `make bench`: builds the optimised binary and the micro benchmarks (preset `bench`), runs
# the micro benchmarks, then every whole-system workload against its baseline
# (bench/workloads.py), prints the table and appends it to bench/RESULTS.md with the
# machine, the date, the commit and the command.
# Environment: BENCH_REPS (default 5), BENCH_ONLY (e.g. W1,W2; W5S: W5 over HTTPS beside HTTP; U1 for the UI's first
# screen over 1,000,000 jobs, bench/ui_bench.py; D1S: D1 with TLS to RabbitMQ and PostgreSQL
# beside the same in the clear), BENCH_DISTRIBUTED=0 to
# skip the RabbitMQ + PostgreSQL workloads, BENCH_RESULTS (default bench/RESULTS.md).
set -euo pipefail
cd "$(dirname "$0")/.."

reps=${BENCH_REPS:-5}
results=${BENCH_RESULTS:-bench/RESULTS.md}

cmake --preset bench >/dev/null
cmake --build --preset bench -j2 --target baton baton_micro_bench
baton=build/bench/src/cli/baton

echo "== micro benchmarks (build/bench/bench/baton_micro_bench)"
micro=$(mktemp)
trap 'rm -f "$micro"' EXIT
# The PostgreSQL / RabbitMQ micro benchmarks and D1/D2 share one throwaway pair of
# servers, started by workloads.py; the micro benchmarks run here on what is set.
build/bench/bench/baton_micro_bench --benchmark_min_time=0.2 2>/dev/null | tee "$micro"

args=(--baton "$baton" --reps "$reps" --results "$results")
[[ ${BENCH_DISTRIBUTED:-1} == 1 ]] && args+=(--distributed --micro build/bench/bench/baton_micro_bench)
extra=$(printf 'Micro benchmarks (`build/bench/bench/baton_micro_bench --benchmark_min_time=0.2`):\n\n```\n%s\n```\n' \
  "$(grep -E '^(BM_|-|Benchmark)' "$micro")")
invoked="make bench"
for var in BENCH_REPS BENCH_ONLY BENCH_DISTRIBUTED BENCH_RESULTS; do
  [[ -n ${!var:-} ]] && invoked="$var=${!var} $invoked"
done
# BENCH_ONLY=U1 alone runs no workload of workloads.py.
others=$(tr ',' '\n' <<<"${BENCH_ONLY:-}" | { grep -vx 'U1' || true; } | paste -sd, -)
if [[ -z ${BENCH_ONLY:-} || -n $others ]]; then
  [[ -n ${BENCH_ONLY:-} ]] && args+=(--only "$others")
  python3 bench/workloads.py "${args[@]}" --extra "$extra" --invoked-as "$invoked"
fi
# U1: the web UI's first screen over 1,000,000 stored jobs (server time).
if [[ -z ${BENCH_ONLY:-} || ,${BENCH_ONLY}, == *,U1,* ]]; then
  python3 bench/ui_bench.py --baton "$baton" --results "$results"
fi
echo "appended to $results"
