#!/usr/bin/env bash
# Runs a command with the test services up: a throwaway PostgreSQL and RabbitMQ on
# loopback (see postgres.sh and rabbitmq.sh), their addresses exported as
# BATON_TEST_POSTGRES_DSN and BATON_TEST_RABBITMQ_URL, and Podman's Docker-compatible
# service with the local test images (podman.sh) as BATON_TEST_DOCKER_HOST; stops them
# afterwards.
# A service that cannot start (and network namespaces that cannot be made, which the
# distributed suites need: tests/e2e/netns.sh) FAILS the run, naming which, before
# COMMAND runs; with BATON_TEST_ALLOW_SKIP=1 (a local opt-out, README "The two commands") it is
# reported and COMMAND runs anyway, its tests skipping.
# Usage: with-services.sh COMMAND [ARGS...]
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
created_dir=""  # removed afterwards, with the start logs, when this script made it
if [[ -z ${BATON_SERVICES_DIR:-} ]]; then
  BATON_SERVICES_DIR="$(mktemp -d /tmp/baton-services.XXXXXX)"
  created_dir="$BATON_SERVICES_DIR"
fi
export BATON_SERVICES_DIR
services_dir="$BATON_SERVICES_DIR"

stop_all() {
  "$here/podman.sh" stop >/dev/null 2>&1 || true
  "$here/rabbitmq.sh" stop >/dev/null 2>&1 || true
  "$here/postgres.sh" stop >/dev/null 2>&1 || true
  if [[ -n $created_dir ]]; then rm -rf "$created_dir"; fi
}
trap stop_all EXIT

missing=()
for service in postgres rabbitmq podman; do
  started=$(date +%s%N)
  if "$here/$service.sh" start > "$services_dir/$service-start.log" 2>&1; then
    # shellcheck disable=SC1090
    . "$services_dir/$service.env"
    echo "with-services: $service is up ($(( ($(date +%s%N) - started) / 1000000 )) ms)"
  else
    missing+=("$service")
    echo "=================================================================="
    echo "with-services: $service could NOT be started:"
    tail -n 20 "$services_dir/$service-start.log"
    echo "=================================================================="
  fi
done
# The distributed suites put each process in a network namespace of its own: probe here
# the way tests/e2e/netns.sh makes them.
probe="baton-probe-$$"
if [[ $(id -u) == 0 ]] && command -v ip >/dev/null && command -v socat >/dev/null &&
  ip netns add "$probe" 2>/dev/null; then
  ip netns del "$probe"
  echo "with-services: network namespaces can be made"
else
  missing+=(netns)
  echo "with-services: network namespaces can NOT be made here (needs root, ip and socat)"
fi

if ((${#missing[@]})); then
  if [[ ${BATON_TEST_ALLOW_SKIP:-} == 1 ]]; then
    echo "with-services: BATON_TEST_ALLOW_SKIP=1: running without ${missing[*]}; their tests skip"
  else
    echo "with-services: FAILED: could not start ${missing[*]} (set BATON_TEST_ALLOW_SKIP=1 to run without them)"
    exit 1
  fi
fi

"$@"
