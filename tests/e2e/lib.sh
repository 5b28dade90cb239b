# Helpers for the end-to-end scripts: start `baton run standalone` on a free port with a
# fresh data directory, talk to it over HTTP, check JSON with python3, and always stop
# the server on exit. Source it after setting `baton` (the binary).

failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "ok: $*"; }

# The suite's summary line and exit status.
finish() {
  if ((failures)); then
    echo "$failures failure(s)"
    exit 1
  fi
  echo "all $1 checks passed"
  exit 0
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_server: sets url, data_dir, server_pid; stops the server and removes the data
# directory on exit, whatever happens.
start_server() {
  work_dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-e2e.XXXXXX")
  # Searchable by others (mktemp makes it 0700): with authentication on, tasks run as
  # another user and reach their directories in the (private) data directory through it.
  chmod 711 "$work_dir"
  data_dir=$work_dir/data
  local port
  port=$(free_port)
  url=http://127.0.0.1:$port
  "$baton" run standalone --address "127.0.0.1:$port" --data-dir "$data_dir" \
    >"$work_dir/server.log" 2>&1 &
  server_pid=$!
  trap stop_server EXIT
  trap "exit 143" TERM INT HUP
  local deadline=$((SECONDS + 60))
  until curl -sf "$url/health" >/dev/null 2>&1; do
    if ! kill -0 "$server_pid" 2>/dev/null; then
      echo "FAIL: the server exited at start-up:"; cat "$work_dir/server.log"; exit 1
    fi
    if ((SECONDS > deadline)); then
      echo "FAIL: no answer from $url/health within 60s:"; cat "$work_dir/server.log"; exit 1
    fi
    sleep 0.1
  done
}

# await_health URL PID NAME [CURL_ARGS...]: until URL/health answers 200 (curl given
# CURL_ARGS, e.g. --cacert FILE); FAILs and ends the suite when PID exits first or after
# 60 s.
await_health() {
  local base=$1 pid=$2 name=$3 deadline=$((SECONDS + 60))
  shift 3
  until curl -sf "$@" "$base/health" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { fail "$name exited at start-up"; exit 1; }
    ((SECONDS > deadline)) && { fail "$name did not answer $base/health within 60 s"; exit 1; }
    sleep 0.1
  done
}

# wait_lines FILE N [SECONDS]: until FILE has at least N lines (false after SECONDS, 60).
wait_lines() {
  local deadline=$((SECONDS + ${3:-60}))
  until [[ -f $1 && $(wc -l <"$1") -ge $2 ]]; do
    ((SECONDS > deadline)) && return 1
    sleep 0.05
  done
}

# keep_logs NAME: after failures, copies $work_dir/*.log to ./NAME (CI keeps it) and
# prints their last lines.
keep_logs() {
  ((failures)) || return 0
  mkdir -p "$PWD/$1" && cp "$work_dir"/*.log "$PWD/$1/" 2>/dev/null
  local log
  for log in "$work_dir"/*.log; do echo "--- $log (kept in $PWD/$1)"; tail -n 25 "$log"; done
}

# stop_pids PID...: SIGTERM to each, then up to 40 s each to exit before SIGKILL.
stop_pids() {
  local pid deadline
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "$@"; do
    deadline=$((SECONDS + 40))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
}

stop_server() {
  if [[ -n ${server_pid:-} ]] && kill -0 "$server_pid" 2>/dev/null; then
    stop_pids "$server_pid"
    wait "$server_pid" 2>/dev/null
  fi
  if ((failures)) && [[ -f ${work_dir:-}/server.log ]]; then
    # Kept beside where the suite ran (the build's tests/ directory under CTest).
    local kept
    kept=$PWD/$(basename "$0" .sh)-server.log
    cp "$work_dir/server.log" "$kept"
    echo "--- the server log is in $kept; its last lines:"
    tail -n 20 "$work_dir/server.log"
  fi
  [[ -n ${work_dir:-} ]] && rm -rf "$work_dir"
}

# check_server WHEN: fails and stops the suite if the server has exited.
check_server() {
  if ! kill -0 "$server_pid" 2>/dev/null; then
    fail "the server died ($1)"
    exit 1
  fi
}

# http METHOD PATH [curl args...]: sets `status` and `body`.
http() {
  local method=$1 path=$2
  shift 2
  local out
  out=$(curl -s -X "$method" -w '\n%{http_code}' "$@" "$url$path")
  status=${out##*$'\n'}
  body=${out%$'\n'*}
  # A dead server would fail every later check the same way: stop at the first.
  [[ $status != 000 ]] || check_server "during $method $path"
}

# post_file FILE [CONTENT_TYPE]: POST /jobs with the file as the body.
post_file() {
  local type=${2:-text/yaml}
  [[ $1 == *.json ]] && type=${2:-application/json}
  http POST /jobs -H "Content-Type: $type" --data-binary "@$1"
}

# post_yaml: POST /jobs with YAML from standard input.
post_yaml() {
  http POST /jobs -H "Content-Type: text/yaml" --data-binary @-
}

# js JSON EXPR: prints EXPR evaluated in Python with `j` bound to the parsed JSON
# (strings as they are, other values as JSON). An error prints "<error: ...>".
js() {
  python3 -c '
import json, sys
try:
    j = json.loads(sys.argv[1])
    v = eval(sys.argv[2])
    print(v if isinstance(v, str) else json.dumps(v))
except Exception as e:
    print("<error: %s: %s>" % (type(e).__name__, e))
' "$1" "$2"
}

# submit FILE: posts the job and prints its id (empty when refused).
submit() {
  post_file "$1"
  [[ $status == 200 ]] || { echo "submit $1: HTTP $status: $body" >&2; return 1; }
  js "$body" 'j["id"]'
}

# wait_state ID STATES_REGEX [SECONDS]: polls GET /jobs/ID until its state matches;
# leaves the job in `body`; false on timeout.
wait_state() {
  local id=$1 want=$2 deadline=$((SECONDS + ${3:-60})) state
  while true; do
    http GET "/jobs/$id"
    state=$(js "$body" 'j["state"]')
    [[ $state =~ ^($want)$ ]] && return 0
    ((SECONDS > deadline)) && { echo "job $id: state $state, waited for $want" >&2; return 1; }
    sleep 0.1
  done
}

# wait_done ID [SECONDS]: until COMPLETED, FAILED or CANCELLED.
wait_done() { wait_state "$1" 'COMPLETED|FAILED|CANCELLED' "${2:-60}"; }

# expect NAME ACTUAL WANT: equality check with a readable failure.
expect() {
  if [[ "$2" == "$3" ]]; then pass "$1"; else fail "$1: got [$2], want [$3]"; fi
}

# expect_match NAME ACTUAL REGEX
expect_match() {
  if [[ "$2" =~ $3 ]]; then pass "$1"; else fail "$1: got [$2], want a match of /$3/"; fi
}

# needs_services [VAR...]: skips the suite (exit 77, which a CI run counts as a failure)
# unless RabbitMQ and PostgreSQL are configured, and each VAR named is set too.
needs_services() {
  local var
  for var in BATON_TEST_RABBITMQ_URL BATON_TEST_POSTGRES_DSN "$@"; do
    if [[ -z ${!var:-} ]]; then
      echo "SKIPPED: RabbitMQ/PostgreSQL not configured (make test starts them)"
      exit 77  # CTest: skipped (SKIP_RETURN_CODE), never passed
    fi
  done
}

# start_coordinator NAME PORT: `baton run coordinator` on PORT with its data under
# $work_dir/NAME and its log in $work_dir/NAME.log, its pid in pid_of[NAME] (the caller's
# associative array); returns once it answers /health, or ends the suite.
start_coordinator() {
  [[ -z ${pid_of[$1]:-} ]] || { fail "coordinator $1 is already running"; exit 1; }
  "$baton" run coordinator --address "127.0.0.1:$2" --data-dir "$work_dir/$1" >>"$work_dir/$1.log" 2>&1 &
  pid_of[$1]=$!
  local deadline=$((SECONDS + 60))
  until curl -sf "http://127.0.0.1:$2/health" >/dev/null 2>&1; do
    ((SECONDS > deadline)) && { fail "coordinator $1 did not answer"; exit 1; }
    sleep 0.1
  done
}

# distributed_env PREFIX: a database and a RabbitMQ virtual host of this run's own (so no
# other suite's jobs or processes interfere), exported as the BATON_* settings of
# `baton run coordinator|worker`. Needs BATON_TEST_POSTGRES_DSN, BATON_TEST_RABBITMQ_URL
# and `src` (the source directory); exits the suite when they cannot be made.
distributed_env() {
  local db=$1_$$_$RANDOM vhost_url
  psql "${BATON_TEST_POSTGRES_DSN/dbname=baton/dbname=postgres}" -qc "CREATE DATABASE $db" ||
    { echo "FAIL: cannot create database $db"; exit 1; }
  vhost_url=$("$src/scripts/test-services/rabbitmq.sh" vhost "$db") ||
    { echo "FAIL: cannot create vhost $db"; exit 1; }
  export BATON_BROKER_TYPE=rabbitmq BATON_BROKER_RABBITMQ_URL=$vhost_url
  export BATON_BROKER_RABBITMQ_MANAGEMENT_URL=${BATON_TEST_RABBITMQ_MANAGEMENT_URL:-}
  export BATON_DATASTORE_TYPE=postgres
  export BATON_DATASTORE_POSTGRES_DSN=${BATON_TEST_POSTGRES_DSN/dbname=baton/dbname=$db}
}

# node_of URL QUEUE: the id of the UP node that GET /nodes lists as consuming QUEUE (the
# distributed suites start each worker with a queue named after it, so a node id from a
# task row maps to the process that runs it); empty when none does.
node_of() {
  curl -s "$1/nodes" | python3 -c '
import json, sys
want = sys.argv[1]
ids = [n["id"] for n in json.load(sys.stdin) if n.get("status") == "UP" and
       want in [q.split(":")[0] for q in n.get("queue", "").split(",")]]
print(ids[0] if len(ids) == 1 else "")' "$2" 2>/dev/null
}

# running_node ID: the nodeId of job ID's RUNNING task row (GET /jobs/ID), empty when no
# row runs; leaves the job in `body`.
running_node() {
  http GET "/jobs/$1"
  js "$body" '([t.get("nodeId", "") for t in j["execution"] if t["state"] == "RUNNING"] + [""])[0]'
}
