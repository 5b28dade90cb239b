#!/usr/bin/env bash
# Installs, from Debian packages, everything Baton needs to build and test.
# Idempotent: only missing packages are installed; waits for the apt lock.
# Usage: scripts/install-deps.sh [build|test|bench]   (default: test)
set -euo pipefail

profile="${1:-test}"

build_pkgs=(
  build-essential clang cmake ninja-build pkg-config ccache
  libyaml-cpp-dev nlohmann-json3-dev libtomlplusplus-dev libsqlite3-dev
  libspdlog-dev libfmt-dev libcli11-dev libcpp-httplib-dev libssl-dev
  libpq-dev librabbitmq-dev libcurl4-openssl-dev prometheus-cpp-dev libcrypt-dev
  libhowardhinnant-date-dev tzdata libboost1.81-dev
)
test_pkgs=(
  postgresql rabbitmq-server
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev libfuzzer-14-dev clang-format python3 curl
  podman runc busybox-static debootstrap
  iproute2 socat python3-prometheus-client openssl
  chromium libnss3-tools
)

# `make bench`: the micro benchmarks, the load generator, the baselines (make, xargs),
# PostgreSQL + RabbitMQ for the distributed workloads, and the profilers.
bench_pkgs=(
  libbenchmark-dev wrk make findutils python3 curl postgresql rabbitmq-server
  linux-perf valgrind
)

pkgs=("${build_pkgs[@]}")
if [[ "$profile" == "test" ]]; then
  pkgs+=("${test_pkgs[@]}")
elif [[ "$profile" == "bench" ]]; then
  pkgs+=("${bench_pkgs[@]}")
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

# The web UI is built with Node.js and npm (web/, scripts/build-web.sh). A machine that
# has them already (from Debian or NodeSource) keeps its own: Debian's npm package
# conflicts with NodeSource's nodejs, which carries npm.
if ! command -v node >/dev/null 2>&1; then
  missing+=(nodejs)
fi
if ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi

if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  sudo="sudo"
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt_opts=(-o DPkg::Lock::Timeout=900 -o Acquire::Retries=3)
if ! $sudo apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"; then
  # The package lists may be stale or absent on a fresh machine.
  $sudo apt-get "${apt_opts[@]}" update
  $sudo apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"
fi
