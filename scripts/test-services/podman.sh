#!/usr/bin/env bash
# A throwaway Podman service speaking the Docker Engine API, for the container runtime's
# integration tests.
#
#   podman.sh start   start `podman system service` (rootful, runc, cgroupfs; see the
#                     containers.conf below) on a unix socket under
#                     $BATON_SERVICES_DIR/podman, build the local test images when missing
#                     (scripts/build-test-images.sh; cached in Podman's storage between
#                     runs), and write $BATON_SERVICES_DIR/podman.env, which exports
#                     BATON_TEST_DOCKER_HOST=unix://…/podman.sock. Reuses a running service.
#   podman.sh stop    stop that service (by its PID) and remove its directory; containers
#                     labelled baton.test are removed first.
#   podman.sh env     print the env file's line (fails when not started).
#
# Images live in Podman's default storage, so they survive between runs on one machine.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
SERVICES_DIR="${BATON_SERVICES_DIR:-/tmp/baton-services}"
PD="$SERVICES_DIR/podman"
ENV_FILE="$SERVICES_DIR/podman.env"
SOCK="$PD/podman.sock"
PID_FILE="$PD/pid"
CONF="$PD/containers.conf"

api() { curl -sf --max-time 5 --unix-socket "$SOCK" "http://d/v1.41$1"; }

running() {
  [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null && api /_ping >/dev/null 2>&1
}

write_env() {
  printf 'export BATON_TEST_DOCKER_HOST="unix://%s"\n' "$SOCK" >"$ENV_FILE.tmp"
  mv "$ENV_FILE.tmp" "$ENV_FILE"
}

cmd_start() {
  if ! command -v podman >/dev/null; then
    echo "podman.sh: podman is not installed (scripts/install-deps.sh test installs it)" >&2
    exit 1
  fi
  if [[ "$(id -u)" != 0 ]]; then
    echo "podman.sh: needs root (rootful Podman with runc and cgroupfs)" >&2
    exit 1
  fi
  mkdir -p "$PD"
  if running; then
    CONTAINERS_CONF="$CONF" "$here/../build-test-images.sh"
    write_env
    echo "podman.sh: reusing the Podman service at $SOCK"
    return 0
  fi
  rm -f "$SOCK"
  # crun refuses this kind of host's cgroup layout and the default ulimits exceed the
  # hard limits, hence runc, cgroupfs and explicit ulimits.
  cat >"$CONF" <<CONF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
  CONTAINERS_CONF="$CONF" setsid podman system service --time=0 "unix://$SOCK" \
    >"$PD/service.log" 2>&1 </dev/null &
  echo $! >"$PID_FILE"
  local deadline=$((SECONDS + 30))
  until api /_ping >/dev/null 2>&1; do
    if ! kill -0 "$(cat "$PID_FILE")" 2>/dev/null; then
      echo "podman.sh: the service exited at start-up:" >&2
      tail -n 20 "$PD/service.log" >&2
      exit 1
    fi
    if ((SECONDS > deadline)); then
      echo "podman.sh: no answer on $SOCK within 30s" >&2
      exit 1
    fi
    sleep 0.05
  done
  CONTAINERS_CONF="$CONF" "$here/../build-test-images.sh"
  write_env
  echo "podman.sh: Podman service on $SOCK; env in $ENV_FILE"
}

cmd_stop() {
  if [[ -f "$PID_FILE" ]]; then
    local pid
    pid="$(cat "$PID_FILE")"
    if running; then
      # Whatever a failed test left behind.
      local ids
      ids="$(api '/containers/json?all=1&filters=%7B%22label%22%3A%5B%22baton.test%22%5D%7D' |
        python3 -c 'import json,sys; print(" ".join(c["Id"] for c in json.load(sys.stdin)))' \
        2>/dev/null || true)"
      for id in $ids; do
        curl -sf --max-time 30 -X DELETE --unix-socket "$SOCK" \
          "http://d/v1.41/containers/$id?force=1&v=1" >/dev/null 2>&1 || true
      done
    fi
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$PD" "$ENV_FILE"
  echo "podman.sh: stopped"
}

cmd_env() {
  if [[ ! -f "$ENV_FILE" ]] || ! running; then
    echo "podman.sh: not running (run: $0 start)" >&2
    exit 1
  fi
  cat "$ENV_FILE"
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  env) cmd_env ;;
  *)
    echo "usage: $0 start|stop|env" >&2
    exit 2
    ;;
esac
