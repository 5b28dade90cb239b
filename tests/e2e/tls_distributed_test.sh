#!/usr/bin/env bash
# TLS on every connection of a distributed deployment: `baton run coordinator` and
# `baton run worker` reach RabbitMQ over amqps:// (the server's certificate checked, a
# client certificate shown) and the coordinator reaches PostgreSQL with
# sslmode=verify-full and a client certificate (the test services' TLS listeners:
# scripts/test-services); the API is HTTPS with a certificate made here, and the `baton`
# client and the UI (Debian's Chromium, trusting this run's CA through an NSS database)
# use it. Checks that the server side sees every connection encrypted (pg_stat_ssl,
# RabbitMQ's connection list), and that a wrong CA, an expired certificate and a wrong
# server name are refused with an error that names the connection and says why.
# Processes share loopback: TLS checks names, and the certificates name localhost and
# 127.0.0.1 (distributed_test.sh covers separate network namespaces). A task on the worker
# runs in its sandbox: the worker's data directory, which holds its client key, is hidden.
# Usage: tls_distributed_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$(realpath "$1")
src=$(cd "$2" && pwd)
# shellcheck source=lib.sh
. "$src/tests/e2e/lib.sh"

needs_services BATON_TEST_RABBITMQ_TLS_URL BATON_TEST_POSTGRES_TLS_DSN BATON_TEST_TLS_DIR \
  BATON_TEST_RABBITMQ_MANAGEMENT_URL
command -v certutil >/dev/null || { echo "FAIL: certutil (libnss3-tools) is not installed"; exit 1; }

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-tls.XXXXXX")
pids=()
stop_all() {
  stop_pids "${pids[@]}"
  keep_logs tls-logs
  rm -rf "$work_dir"
}
trap stop_all EXIT
trap "exit 143" TERM INT HUP

certs=$src/scripts/test-services/certs.sh
services_tls=$BATON_TEST_TLS_DIR

# --- Certificates made by this run.
# The API's own CA and a certificate for localhost and 127.0.0.1 signed by it.
"$certs" make "$work_dir/api"
# A CA that signed nothing here: what a process that trusts the wrong CA has.
"$certs" ca "$work_dir/wrong"
# An expired client certificate signed by the services' CA (a copy of it: the original
# stays as it is), and an expired certificate for the API.
mkdir -p "$work_dir/services-ca"
cp "$services_tls/ca.pem" "$services_tls/ca.key" "$work_dir/services-ca/"
"$certs" sign "$work_dir/services-ca" expired-client baton -10 -1
"$certs" sign "$work_dir/api" expired-server localhost -10 -1 "DNS:localhost,IP:127.0.0.1"
# The files the coordinator serves (SIGHUP reads them again).
cp "$work_dir/api/server.pem" "$work_dir/api/live.pem"
cp "$work_dir/api/server.key" "$work_dir/api/live.key"
cacert=$work_dir/api/ca.pem

# --- A database and a RabbitMQ virtual host of this run's own, reached over TLS only.
db=baton_tls_$$_$RANDOM
psql "${BATON_TEST_POSTGRES_DSN/dbname=baton/dbname=postgres}" -qc "CREATE DATABASE $db OWNER baton" ||
  { echo "FAIL: cannot create database $db"; exit 1; }
amqps_url=$("$src/scripts/test-services/rabbitmq.sh" vhost "$db" tls) ||
  { echo "FAIL: cannot create vhost $db"; exit 1; }
[[ $amqps_url == amqps://* ]] || { echo "FAIL: no amqps URL: $amqps_url"; exit 1; }
export BATON_BROKER_TYPE=rabbitmq BATON_BROKER_RABBITMQ_URL=$amqps_url
export BATON_BROKER_RABBITMQ_TLS_CA=$services_tls/ca.pem
export BATON_BROKER_RABBITMQ_TLS_CERT=$services_tls/client.pem
export BATON_BROKER_RABBITMQ_TLS_KEY=$services_tls/client.key
export BATON_DATASTORE_TYPE=postgres
export BATON_DATASTORE_POSTGRES_DSN=${BATON_TEST_POSTGRES_TLS_DSN/dbname=baton/dbname=$db}
rabbit_port=${amqps_url##*:}
rabbit_port=${rabbit_port%%/*}

port=$(free_port)
url=https://127.0.0.1:$port
BATON_API_TLS_CERT=$work_dir/api/live.pem BATON_API_TLS_KEY=$work_dir/api/live.key \
  "$baton" run coordinator --address "127.0.0.1:$port" --data-dir "$work_dir/c" \
  >"$work_dir/coordinator.log" 2>&1 &
coordinator_pid=$!
pids+=($!)
await_health "$url" "$coordinator_pid" "the coordinator (over HTTPS)" --cacert "$cacert"
pass "the coordinator answers over HTTPS, with RabbitMQ over amqps and PostgreSQL over TLS"
# The worker's client key inside its data directory, which its tasks' sandbox hides.
mkdir -p "$work_dir/w/tls"
cp "$services_tls/client.pem" "$services_tls/client.key" "$work_dir/w/tls/"
BATON_BROKER_RABBITMQ_TLS_CERT=$work_dir/w/tls/client.pem \
  BATON_BROKER_RABBITMQ_TLS_KEY=$work_dir/w/tls/client.key \
  "$baton" run worker --queue default:2 --data-dir "$work_dir/w" >"$work_dir/worker.log" 2>&1 &
pids+=($!)

# --- Jobs through every TLS connection, driven by the baton client.
out=$("$baton" submit "$src/examples/hello.yaml" --wait --url "$url" --cacert "$cacert" 2>&1)
expect "baton submit --wait over https: exit" "$?" 0
expect_match "baton submit --wait: the job ran on the worker and printed its result" "$out" "hello world"
out=$("$baton" submit "$src/examples/parallel.yaml" --follow --url "$url" --cacert "$cacert" 2>&1)
expect "baton submit --follow over https: exit" "$?" 0
expect_match "baton submit --follow streams the log" "$out" "three"
out=$("$baton" jobs list --url "$url" --cacert "$cacert" 2>&1)
expect_match "baton jobs list over https" "$out" "hello job"

# --- A task on the distributed worker runs in its sandbox: the worker's data directory,
# with the other tasks' directories and the broker's client key in it, is hidden.
cat >"$work_dir/snoop.yaml" <<YAML
name: snoop
output: "{{ tasks.seen }}"
tasks:
  - name: snoop
    var: seen
    env: {DATA: "$work_dir/w"}
    run: |
      {
        if cat "\$DATA/tls/client.key" >/dev/null 2>&1; then echo "key: read"; else echo "key: refused"; fi
        others=\$(ls -A "\$DATA/tasks" 2>/dev/null | grep -vx "\$(basename "\$PWD")")
        if [ -n "\$others" ]; then echo "task-list: read"; else echo "task-list: refused"; fi
        echo mine > own && cat own
      } > "\$TORK_OUTPUT"
YAML
# Another job's task directory on the worker while the snoop runs (it holds a file).
printf '%s\n' 'name: other' 'tasks:' '  - {name: other, run: "echo secret > other-job-secret; sleep 8"}' \
  >"$work_dir/other.yaml"
"$baton" submit "$work_dir/other.yaml" --url "$url" --cacert "$cacert" >/dev/null 2>&1
deadline=$((SECONDS + 30))
until compgen -G "$work_dir/w/tasks/*/other-job-secret" >/dev/null || ((SECONDS > deadline)); do
  sleep 0.2
done
compgen -G "$work_dir/w/tasks/*/other-job-secret" >/dev/null &&
  pass "sandboxed worker: another job's task directory holds its file" ||
  fail "sandboxed worker: the other job's file never appeared"
out=$("$baton" submit "$work_dir/snoop.yaml" --wait --url "$url" --cacert "$cacert" 2>&1)
expect "sandboxed worker: the snoop job completes" "$?" 0
expect_match "sandboxed worker: the broker's client key is refused to a task" "$out" "key: refused"
expect_match "sandboxed worker: other tasks' directories are hidden" "$out" "task-list: refused"
expect_match "sandboxed worker: the task writes its own directory" "$out" "mine"
grep -q "Tasks cannot see the data directory" "$work_dir/worker.log" &&
  pass "sandboxed worker: the worker says its tasks run sandboxed" ||
  fail "sandboxed worker: the worker's log does not say its tasks run sandboxed"

# --- What the servers saw: every connection of this run encrypted.
counts=$(psql "$BATON_TEST_POSTGRES_DSN" -XAtc "SELECT count(*) FILTER (WHERE s.ssl), count(*) \
  FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.datname = '$db'")
read -r encrypted total <<<"${counts//|/ }"
((total > 0)) && [[ $encrypted == "$total" ]] &&
  pass "PostgreSQL: all $total connections to $db are TLS" ||
  fail "PostgreSQL: $encrypted of $total connections to $db are TLS"
# RabbitMQ's management API lists connections as its statistics last sampled them.
rabbit_connections() {
  local conns
  conns=$(curl -sf "$BATON_TEST_RABBITMQ_MANAGEMENT_URL/api/connections?columns=vhost,ssl,peer_cert_subject") || conns='[]'
  python3 -c '
import json, sys
cs = [c for c in json.loads(sys.argv[1]) if c.get("vhost") == sys.argv[2]]
tls = [c for c in cs if c.get("ssl") and "CN=baton" in (c.get("peer_cert_subject") or "")]
print(len(tls), len(cs))' "$conns" "$db"
}
deadline=$((SECONDS + 20))
until rabbit=$(rabbit_connections) && read -r _ total <<<"$rabbit" && ((total >= 2)) ||
  ((SECONDS > deadline)); do sleep 0.5; done
read -r encrypted total <<<"$rabbit"
((total >= 2)) && [[ $encrypted == "$total" ]] &&
  pass "RabbitMQ: all $total connections to vhost $db are TLS with the client certificate" ||
  fail "RabbitMQ: $encrypted of $total connections to vhost $db are TLS with the client certificate"

# --- The UI in Chromium, over HTTPS, trusting this run's CA (and only when it does).
nss_home=$work_dir/browser-home
mkdir -p "$nss_home/.pki/nssdb" "$work_dir/bare-home"
certutil -d "sql:$nss_home/.pki/nssdb" -N --empty-password &&
  certutil -d "sql:$nss_home/.pki/nssdb" -A -t "C,," -n "baton test ca" -i "$cacert" ||
  fail "cannot make the browser's NSS database"
out=$(cd "$src/web" && node e2e/tls-page.mjs "$url" "$nss_home" "hello job" 2>&1)
expect "UI in Chromium over HTTPS: exit" "$?" 0
expect_match "UI in Chromium over HTTPS: the jobs page shows the job" "$out" "^shown: hello job .*all https"
out=$(cd "$src/web" && node e2e/tls-page.mjs "$url" "$work_dir/bare-home" "hello job" 2>&1)
expect_match "UI in Chromium without the CA: refused" "$out" "^refused: .*ERR_CERT_AUTHORITY_INVALID"

# --- Refusals, each naming the connection and why.
# start_refused NAME ROLE [VAR=VALUE...]: runs `baton run ROLE` with the settings changed;
# it must exit (not retry forever) within 30 s; its output is in $out.
start_refused() {
  local name=$1 role=$2
  shift 2
  out=$(env "$@" timeout 30 "$baton" run "$role" --address "127.0.0.1:$(free_port)" \
    --data-dir "$work_dir/$name" 2>&1)
  local rc=$?
  echo "  $name said: $(tail -n 1 <<<"$out" | cut -c1-400)"
  ((rc != 0 && rc != 124)) && pass "$name: baton run $role exits ($rc)" ||
    fail "$name: baton run $role exit status $rc (want an error, not 0 or a hang)"
}
start_refused wrong-rabbit-ca worker BATON_BROKER_RABBITMQ_TLS_CA="$work_dir/wrong/ca.pem"
expect_match "RabbitMQ, wrong CA: names the connection" "$out" "RabbitMQ at localhost:$rabbit_port over TLS"
expect_match "RabbitMQ, wrong CA: says why" "$out" "certificate was refused: self-signed certificate in certificate chain"
start_refused expired-rabbit-client worker \
  BATON_BROKER_RABBITMQ_TLS_CERT="$work_dir/services-ca/expired-client.pem" \
  BATON_BROKER_RABBITMQ_TLS_KEY="$work_dir/services-ca/expired-client.key"
expect_match "RabbitMQ, expired client certificate: names the connection" "$out" "RabbitMQ at localhost:$rabbit_port over TLS"
expect_match "RabbitMQ, expired client certificate: says why" "$out" "the client certificate \(broker.rabbitmq.tls.cert\): the certificate in $work_dir/services-ca/expired-client.pem expired on 20"
# The same server reached at an address its certificate does not name (127.0.0.2,
# forwarded to it).
other_port=$(free_port)
socat "TCP-LISTEN:$other_port,bind=127.0.0.2,reuseaddr,fork" "TCP:127.0.0.1:$rabbit_port" 2>/dev/null &
pids+=($!)
sleep 0.3
start_refused wrong-rabbit-name worker \
  BATON_BROKER_RABBITMQ_URL="${amqps_url/localhost:$rabbit_port/127.0.0.2:$other_port}"
expect_match "RabbitMQ, an address the certificate lacks: names the connection" "$out" "RabbitMQ at 127.0.0.2:$other_port over TLS"
expect_match "RabbitMQ, an address the certificate lacks: says why" "$out" "IP address mismatch"
start_refused wrong-pg-ca coordinator \
  BATON_DATASTORE_POSTGRES_DSN="$BATON_DATASTORE_POSTGRES_DSN sslrootcert=$work_dir/wrong/ca.pem"
expect_match "PostgreSQL, wrong CA: names the connection" "$out" "postgres: connecting: connection to server at \"localhost\""
expect_match "PostgreSQL, wrong CA: says why" "$out" "certificate verify failed"
start_refused expired-pg-client coordinator \
  BATON_DATASTORE_POSTGRES_DSN="$BATON_DATASTORE_POSTGRES_DSN sslcert=$work_dir/services-ca/expired-client.pem sslkey=$work_dir/services-ca/expired-client.key"
expect_match "PostgreSQL, expired client certificate: names the connection" "$out" "postgres: connecting to \"localhost\", port "
expect_match "PostgreSQL, expired client certificate: says why" "$out" "the client certificate \(sslcert\): the certificate in $work_dir/services-ca/expired-client.pem expired on 20"
for word in guest:guest "$services_tls/client.key"; do
  [[ $out == *"$word"* ]] && fail "an error text shows $word"
done

# The API: the client with the wrong CA, then an expired certificate (swapped in by SIGHUP).
out=$("$baton" health --url "$url" --cacert "$work_dir/wrong/ca.pem" 2>&1)
expect "API, wrong CA: baton health fails" "$?" 1
echo "  baton health said: $out"
expect_match "API, wrong CA: names the server" "$out" "127.0.0.1:$port"
expect_match "API, wrong CA: says why" "$out" "certificate"
cp "$work_dir/api/expired-server.pem" "$work_dir/api/live.pem"
cp "$work_dir/api/expired-server.key" "$work_dir/api/live.key"
kill -HUP "$coordinator_pid"
sleep 1
out=$("$baton" health --url "$url" --cacert "$cacert" 2>&1)
expect "API, expired certificate: baton health fails" "$?" 1
echo "  baton health said: $out"
expect_match "API, expired certificate: says why" "$out" "expired"
cp "$work_dir/api/server.pem" "$work_dir/api/live.pem"
cp "$work_dir/api/server.key" "$work_dir/api/live.key"
kill -HUP "$coordinator_pid"
sleep 1
out=$("$baton" health --url "$url" --cacert "$cacert" 2>&1)
expect "API, valid certificate again: baton health" "$?" 0

psql "${BATON_TEST_POSTGRES_DSN/dbname=baton/dbname=postgres}" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1
finish tls_distributed
