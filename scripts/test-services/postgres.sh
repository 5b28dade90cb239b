#!/usr/bin/env bash
# A throwaway PostgreSQL for tests.
#
#   postgres.sh start   initdb a cluster under $BATON_SERVICES_DIR/postgres (default
#                       /tmp/baton-services), start it on a free loopback port, create the
#                       database `baton` and write $BATON_SERVICES_DIR/postgres.env, which
#                       exports BATON_TEST_POSTGRES_DSN. Reuses a cluster already running.
#                       The server also takes TLS (ssl=on, certs.sh's certificates in
#                       $BATON_SERVICES_DIR/tls): the role `baton` may connect only over TLS
#                       with the client certificate (pg_hba `cert`), and
#                       BATON_TEST_POSTGRES_TLS_DSN connects so with sslmode=verify-full.
#                       BATON_TEST_POSTGRES_DSN (role postgres) says sslmode=disable: the
#                       other suites run as before, without a handshake per connection.
#   postgres.sh stop    stop that cluster (by its data directory) and remove it.
#   postgres.sh env     print the env file's line (fails when not started).
#
# The server runs with fsync, synchronous_commit and full_page_writes off (the data is
# thrown away; tests want speed), unless BATON_TEST_POSTGRES_DURABLE=1 (the benchmarks:
# they measure what a user runs, with PostgreSQL's durable defaults).
#
# Works as root without systemd (the server runs as the `postgres` user) and as an
# ordinary user (the server runs as that user).
set -euo pipefail

SERVICES_DIR="${BATON_SERVICES_DIR:-/tmp/baton-services}"
PG_DIR="$SERVICES_DIR/postgres"
DATA="$PG_DIR/data"
ENV_FILE="$SERVICES_DIR/postgres.env"
PORT_FILE="$PG_DIR/port"

find_bin() {
  local dir
  if [[ -n "${BATON_PG_BINDIR:-}" ]]; then echo "$BATON_PG_BINDIR"; return; fi
  for dir in /usr/lib/postgresql/*/bin; do
    if [[ -x "$dir/pg_ctl" ]]; then echo "$dir"; fi
  done | sort -V | tail -n 1
}
BIN="$(find_bin)"
if [[ -z "$BIN" || ! -x "$BIN/pg_ctl" ]]; then
  echo "postgres.sh: no PostgreSQL server binaries (pg_ctl) under /usr/lib/postgresql" >&2
  exit 1
fi
PSQL="$BIN/psql"

# Runs a command as the server's owner: `postgres` when we are root, else ourselves.
as_owner() {
  if [[ "$(id -u)" == 0 ]]; then
    # runuser/su need a quoted command line.
    local cmd="" arg
    for arg in "$@"; do cmd+=" $(printf '%q' "$arg")"; done
    su postgres -s /bin/sh -c "cd / && $cmd"
  else
    "$@"
  fi
}

db_user() { echo postgres; }

running() {
  [[ -f "$DATA/postmaster.pid" ]] && as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

port_in_use() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

free_port() {
  local port i
  for i in $(seq 1 50); do
    port=$((20000 + RANDOM % 40000))
    if ! port_in_use "$port"; then echo "$port"; return 0; fi
  done
  echo "postgres.sh: no free port found" >&2
  return 1
}

TLS_DIR="$SERVICES_DIR/tls"

write_env() {
  local port="$1"
  local dsn="host=127.0.0.1 port=$port user=$(db_user) dbname=baton sslmode=disable"
  local tls_dsn="host=localhost port=$port user=baton dbname=baton sslmode=verify-full"
  tls_dsn+=" sslrootcert=$TLS_DIR/ca.pem sslcert=$TLS_DIR/client.pem sslkey=$TLS_DIR/client.key"
  {
    printf 'export BATON_TEST_POSTGRES_DSN="%s"\n' "$dsn"
    printf 'export BATON_TEST_POSTGRES_TLS_DSN="%s"\n' "$tls_dsn"
  } >"$ENV_FILE.tmp"
  mv "$ENV_FILE.tmp" "$ENV_FILE"
}

# The server's certificate and key where the server's user may read them (0600), and
# pg_hba lines: `baton` over TLS with its client certificate only.
setup_tls() {
  "$(dirname "$0")/certs.sh" make "$TLS_DIR"
  mkdir -p "$PG_DIR/tls"
  cp "$TLS_DIR/server.pem" "$TLS_DIR/server.key" "$TLS_DIR/ca.pem" "$PG_DIR/tls/"
  chmod 600 "$PG_DIR/tls/server.key"
  [[ "$(id -u)" == 0 ]] && chown -R postgres:postgres "$PG_DIR/tls"
  local hba="$DATA/pg_hba.conf"
  {
    echo "hostssl all baton 127.0.0.1/32 cert"
    echo "host all baton 127.0.0.1/32 reject"
    cat "$hba"
  } >"$hba.new"
  cat "$hba.new" >"$hba" && rm -f "$hba.new"
}

ensure_database() {
  local port="$1"
  local exists
  exists="$("$PSQL" -h 127.0.0.1 -p "$port" -U "$(db_user)" -d postgres -XtAq \
    -c "SELECT 1 FROM pg_database WHERE datname = 'baton'")"
  if [[ "$exists" != 1 ]]; then
    "$PSQL" -h 127.0.0.1 -p "$port" -U "$(db_user)" -d postgres -Xq \
      -c "CREATE DATABASE baton" >/dev/null
  fi
  "$PSQL" -h 127.0.0.1 -p "$port" -U "$(db_user)" -d postgres -Xq -c \
    "DO \$\$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'baton') THEN CREATE ROLE baton SUPERUSER LOGIN; END IF; END \$\$" \
    >/dev/null
}

cmd_start() {
  mkdir -p "$SERVICES_DIR"
  if running && [[ -f "$PORT_FILE" ]]; then
    local port
    port="$(cat "$PORT_FILE")"
    ensure_database "$port"
    write_env "$port"
    echo "postgres.sh: reusing PostgreSQL on 127.0.0.1:$port ($DATA)"
    return 0
  fi
  if [[ -d "$DATA" ]]; then
    # A stale cluster (crashed, or half-made): start over.
    as_owner "$BIN/pg_ctl" -D "$DATA" -m immediate stop >/dev/null 2>&1 || true
    rm -rf "$PG_DIR"
  fi
  mkdir -p "$PG_DIR"
  if [[ "$(id -u)" == 0 ]]; then
    chmod 755 "$SERVICES_DIR"
    chown postgres:postgres "$PG_DIR"
  fi
  as_owner "$BIN/initdb" -D "$DATA" -U "$(db_user)" --auth=trust -E UTF8 --no-sync \
    >"$PG_DIR/initdb.log" 2>&1 || {
    cat "$PG_DIR/initdb.log" >&2
    exit 1
  }
  setup_tls
  local tls="-c ssl=on -c ssl_cert_file=$PG_DIR/tls/server.pem"
  tls+=" -c ssl_key_file=$PG_DIR/tls/server.key -c ssl_ca_file=$PG_DIR/tls/ca.pem"
  local port attempt
  for attempt in 1 2 3 4 5; do
    port="$(free_port)"
    # fsync off: the data is thrown away, and tests want speed, not durability.
    local durability="-c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    [[ ${BATON_TEST_POSTGRES_DURABLE:-0} == 1 ]] && durability=""
    if as_owner "$BIN/pg_ctl" -D "$DATA" -l "$PG_DIR/log" -w -t 30 \
      -o "-p $port -k $PG_DIR -c listen_addresses=127.0.0.1 $durability -c max_connections=200 $tls" \
      start >/dev/null; then
      echo "$port" >"$PORT_FILE"
      ensure_database "$port"
      write_env "$port"
      echo "postgres.sh: PostgreSQL on 127.0.0.1:$port ($DATA); env in $ENV_FILE"
      return 0
    fi
    echo "postgres.sh: start on port $port failed (attempt $attempt); log:" >&2
    tail -n 5 "$PG_DIR/log" >&2 || true
  done
  exit 1
}

cmd_stop() {
  if [[ -d "$DATA" ]]; then
    as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$PG_DIR" "$ENV_FILE"
  echo "postgres.sh: stopped"
}

cmd_env() {
  if [[ ! -f "$ENV_FILE" ]] || ! running; then
    echo "postgres.sh: not running (run: $0 start)" >&2
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
