#!/usr/bin/env bash
# Starts or stops a throwaway RabbitMQ node for the integration tests.
#
# Usage: scripts/test-services/rabbitmq.sh start|stop
#
# start: runs /usr/lib/rabbitmq/bin/rabbitmq-server directly (no systemd, as root) on free
#   loopback ports with all of its state under $BATON_SERVICES_DIR/rabbitmq (default
#   /tmp/baton-services/rabbitmq), waits until it is ready, and writes
#   `export BATON_TEST_RABBITMQ_URL=amqp://guest:guest@127.0.0.1:PORT/` and
#   BATON_TEST_RABBITMQ_MANAGEMENT_URL (the management plugin's HTTP API) to
#   $BATON_SERVICES_DIR/rabbitmq.env. If that node is already running, does nothing.
#   It also listens for AMQP over TLS (amqps) on another port, with the certificates of
#   certs.sh in $BATON_SERVICES_DIR/tls: a server certificate for localhost, and client
#   certificates required (verify_peer, fail_if_no_peer_cert) and checked against that
#   CA. The env file then exports BATON_TEST_RABBITMQ_TLS_URL
#   (amqps://guest:guest@localhost:PORT/) and BATON_TEST_TLS_DIR.
# stop: stops the node (SIGTERM, waits) and the epmd it started, and removes its state.
# Both are idempotent.
# stop-app / start-app: stops / starts the RabbitMQ application inside the running node
#   (`rabbitmqctl stop_app` / `start_app`): clients lose their connections and cannot
#   connect until start-app; durable queues and persistent messages are kept. For fault
#   tests of reconnection.
# vhost NAME [tls]: creates the virtual host NAME (guest may use it) and prints its AMQP
#   URL (with `tls`, its amqps URL), so a suite of processes has queues of its own.
set -euo pipefail

services_dir="${BATON_SERVICES_DIR:-/tmp/baton-services}"
dir="$services_dir/rabbitmq"
env_file="$services_dir/rabbitmq.env"
bin=/usr/lib/rabbitmq/bin

log() { echo "rabbitmq.sh: $*" >&2; }

# Prints a TCP port nobody listens on now.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

node_alive() {
  [[ -f "$dir/pid" ]] && kill -0 "$(cat "$dir/pid")" 2>/dev/null
}

# PIDs of epmd processes started with our ERL_EPMD_PORT.
our_epmds() {
  local port="$1" pid
  for pid in $(pgrep -x epmd || true); do
    if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "ERL_EPMD_PORT=$port"; then
      echo "$pid"
    fi
  done
}

start() {
  if node_alive && [[ -f "$env_file" ]]; then
    log "already running ($(cat "$env_file"))"
    return 0
  fi
  stop_node >/dev/null 2>&1 || true
  rm -rf "$dir"
  mkdir -p "$dir"
  local port dist_port epmd_port mgmt_port tls_port tls="$services_dir/tls"
  port=$(free_port)
  dist_port=$(free_port)
  epmd_port=$(free_port)
  mgmt_port=$(free_port)
  tls_port=$(free_port)
  echo "$port $dist_port $epmd_port $mgmt_port $tls_port" > "$dir/ports"
  "$(dirname "$0")/certs.sh" make "$tls"
  # The management plugin serves queue statistics (unacked across processes), sampled
  # every 500 ms instead of 5 s so tests see changes quickly.
  echo '[rabbitmq_management].' > "$dir/enabled_plugins"
  printf '%s\n' "listeners.tcp.default = 127.0.0.1:$port" "loopback_users = none" \
    "management.tcp.ip = 127.0.0.1" "management.tcp.port = $mgmt_port" \
    "collect_statistics_interval = 500" \
    "listeners.ssl.default = 127.0.0.1:$tls_port" "ssl_options.cacertfile = $tls/ca.pem" \
    "ssl_options.certfile = $tls/server.pem" "ssl_options.keyfile = $tls/server.key" \
    "ssl_options.verify = verify_peer" "ssl_options.fail_if_no_peer_cert = true" \
    > "$dir/rabbitmq.conf"
  local started=$SECONDS
  (
    export HOME="$dir" RABBITMQ_NODENAME="baton$port@localhost" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
      RABBITMQ_NODE_PORT="$port" RABBITMQ_DIST_PORT="$dist_port" ERL_EPMD_ADDRESS=127.0.0.1 \
      ERL_EPMD_PORT="$epmd_port" RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf" \
      RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" RABBITMQ_MNESIA_BASE="$dir/mnesia" \
      RABBITMQ_LOG_BASE="$dir/log" RABBITMQ_PID_FILE="$dir/pid" \
      RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}"
    setsid "$bin/rabbitmq-server" > "$dir/out" 2>&1 < /dev/null &
    "$bin/rabbitmqctl" wait --timeout 120 "$dir/pid" > "$dir/wait.out" 2>&1
  ) || {
    log "RabbitMQ did not start; see $dir/out and $dir/log"
    tail -n 20 "$dir/out" >&2 || true
    exit 1
  }
  {
    echo "export BATON_TEST_RABBITMQ_URL=amqp://guest:guest@127.0.0.1:$port/"
    echo "export BATON_TEST_RABBITMQ_MANAGEMENT_URL=http://guest:guest@127.0.0.1:$mgmt_port"
    echo "export BATON_TEST_RABBITMQ_TLS_URL=amqps://guest:guest@localhost:$tls_port/"
    echo "export BATON_TEST_TLS_DIR=$tls"
  } > "$env_file"
  log "started on 127.0.0.1:$port in $((SECONDS - started)) s ($env_file)"
}

stop_node() {
  if node_alive; then
    local pid
    pid=$(cat "$dir/pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 300); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  if [[ -f "$dir/ports" ]]; then
    local epmd_port pid
    epmd_port=$(awk '{print $3}' "$dir/ports")
    for pid in $(our_epmds "$epmd_port"); do kill -TERM "$pid" 2>/dev/null || true; done
  fi
}

# Runs rabbitmqctl against our node.
ctl() {
  local port dist_port epmd_port
  read -r port dist_port epmd_port _ < "$dir/ports"
  HOME="$dir" RABBITMQ_NODENAME="baton$port@localhost" ERL_EPMD_PORT="$epmd_port" \
    ERL_EPMD_ADDRESS=127.0.0.1 "$bin/rabbitmqctl" -n "baton$port@localhost" "$@"
}

stop() {
  stop_node
  rm -rf "$dir" "$env_file"
  log "stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  stop-app) ctl stop_app ;;
  start-app) ctl start_app && ctl await_startup ;;
  vhost)
    ctl add_vhost "$2" >/dev/null
    ctl set_permissions -p "$2" guest '.*' '.*' '.*' >/dev/null
    read -r port _ _ _ tls_port < "$dir/ports"
    if [[ ${3:-} == tls ]]; then
      echo "amqps://guest:guest@localhost:$tls_port/$2"
    else
      echo "amqp://guest:guest@127.0.0.1:$port/$2"
    fi
    ;;
  *) echo "usage: $0 start|stop|stop-app|start-app|vhost NAME [tls]" >&2; exit 2 ;;
esac
