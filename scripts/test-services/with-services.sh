#!/usr/bin/env bash
# Runs a command with the test services up: a throwaway PostgreSQL and RabbitMQ on
# loopback (see postgres.sh and rabbitmq.sh), their addresses exported as
# BATON_TEST_POSTGRES_DSN and BATON_TEST_RABBITMQ_URL, and Podman's Docker-compatible
# service with the local test images (podman.sh) as BATON_TEST_DOCKER_HOST; stops them
# afterwards.
# A service that cannot start is reported loudly; its integration tests then skip.
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

for service in postgres rabbitmq podman; do
  started=$(date +%s%N)
  if "$here/$service.sh" start > "$services_dir/$service-start.log" 2>&1; then
    # shellcheck disable=SC1090
    . "$services_dir/$service.env"
    echo "with-services: $service is up ($(( ($(date +%s%N) - started) / 1000000 )) ms)"
  else
    echo "=================================================================="
    echo "with-services: $service could NOT be started; its integration tests will be skipped."
    tail -n 20 "$services_dir/$service-start.log"
    echo "=================================================================="
  fi
done

"$@"
