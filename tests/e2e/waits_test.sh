#!/usr/bin/env bash
# Waits and signals over the binary (docs/wait.md), in standalone mode and then in
# distributed mode (a coordinator and a worker over RabbitMQ and PostgreSQL): a
# `wait: {for: 5s}` across a `kill -9` of the engine (of the coordinator) that ends once,
# not before its time, the next task starting after it; a signal sent while its task
# waits and one sent before (kept for it), their payloads the tasks' results, through the
# API and the CLI; a signal wait failing at its timeout; a signal to a finished job
# refused; the wait holding no worker slot (a task beside it runs on the one slot); 1,000
# waits at once holding no thread (standalone).
# Usage: waits_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1
src=$2
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

needs_services

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-waits.XXXXXX")
chmod 711 "$work_dir"
data_dir=$work_dir/data
port=$(free_port)
url=http://127.0.0.1:$port
server_pid=
start_standalone() {
  "$baton" run standalone --address "127.0.0.1:$port" --data-dir "$data_dir" --queue default:1 \
    >>"$work_dir/server.log" 2>&1 &
  server_pid=$!
  await_health "$url" "$server_pid" "the standalone engine"
}
declare -A pid_of
worker_pid=
cleanup() {
  stop_pids ${server_pid:+"$server_pid"} ${pid_of[c]:+"${pid_of[c]}"} ${worker_pid:+"$worker_pid"}
  keep_logs waits
  rm -rf "$work_dir"
}
trap cleanup EXIT

row() { js "$body" "[t for t in j['execution'] if t['name'] == '$1'][-1]"; }
field() { js "$body" "[t.get('$2', '') for t in j['execution'] if t['name'] == '$1'][-1]"; }
secs() { python3 -c 'import sys, datetime as d; print(d.datetime.fromisoformat(sys.argv[1].replace("Z", "+00:00")).timestamp())' "$1"; }

# wait_across MODE RESTART: a 5-second wait beside a task on the one slot, the engine (or
# the coordinator) killed with -9 a second into it and started again.
wait_across() {
  local mode=$1 restart=$2 id marks
  marks=$(mktemp -d "$work_dir/marks.XXXXXX")
  cat >"$marks.yaml" <<YAML
name: a durable wait
tasks:
  - name: both
    parallel:
      tasks:
        - name: settle
          wait:
            for: 5s
        - name: beside
          run: date +%s.%N > $marks/beside
  - name: after
    run: date +%s.%N > $marks/after
YAML
  id=$(submit "$marks.yaml") || { fail "$mode: the wait job not accepted"; return; }
  local deadline=$((SECONDS + 30))
  until [[ -e $marks/beside ]] || ((SECONDS > deadline)); do sleep 0.1; done
  [[ -e $marks/beside ]] && pass "$mode: a task ran on the one slot beside the wait (it holds none)" ||
    fail "$mode: the task beside the wait did not run"
  sleep 1
  $restart
  wait_done "$id" 60 || { fail "$mode: the wait job did not end"; return; }
  expect "$mode: the job completes after the kill -9" "$(js "$body" 'j["state"]')" COMPLETED
  expect "$mode: one wait row, COMPLETED" \
    "$(js "$body" '[t["state"] for t in j["execution"] if t["name"] == "settle"]')" '["COMPLETED"]'
  local started ended
  started=$(secs "$(field settle startedAt)")
  ended=$(secs "$(field settle completedAt)")
  python3 -c 'import sys; s, e, a = map(float, sys.argv[1:]); sys.exit(0 if e - s >= 5 and a >= s + 5 and e - s < 30 else 1)' \
    "$started" "$ended" "$(cat "$marks/after")" &&
    pass "$mode: the wait ended 5 s after it started, not before, and after started after it" ||
    fail "$mode: the wait's times: started $started, ended $ended, after $(cat "$marks/after")"
}

# signals MODE
signals() {
  local mode=$1 id
  # Sent while the task waits.
  printf 'name: wait for a signal\ntasks:\n  - name: approval\n    var: by\n    wait: {signal: approved, timeout: 60s}\n  - name: ship\n    var: shipped\n    env: {BY: "{{ tasks.by }}"}\n    run: echo -n "approved by $BY" > $BATON_OUTPUT\noutput: "{{ tasks.shipped }}"\n' >"$work_dir/signal.yaml"
  id=$(submit "$work_dir/signal.yaml") || { fail "$mode: the signal job not accepted"; return; }
  local deadline=$((SECONDS + 30))
  until http GET "/jobs/$id" && [[ $(field approval state) == RUNNING ]] || ((SECONDS > deadline)); do sleep 0.1; done
  sleep 1
  http GET "/jobs/$id"
  expect "$mode: without its signal the task waits" "$(field approval state) $(js "$body" 'j["state"]')" "RUNNING RUNNING"
  http POST "/jobs/$id/signals/approved" -H 'Content-Type: application/json' --data '"ann"'
  expect "$mode: the signal is accepted" "$status $body" '200 {"status":"OK"}'
  wait_done "$id" 30 || { fail "$mode: the signalled job did not end"; return; }
  expect "$mode: the waiting task completed with the payload, which the next read" \
    "$(js "$body" 'j["state"]') $(field approval result) | $(js "$body" 'j.get("result")')" \
    "COMPLETED ann | approved by ann"

  # Sent before the task waits (its first task still runs): kept for it; through the CLI.
  printf 'name: signal first\ntasks:\n  - name: slow\n    run: sleep 2\n  - name: gate\n    var: gate\n    wait: {signal: go}\noutput: "{{ tasks.gate }}"\n' >"$work_dir/early.yaml"
  id=$(submit "$work_dir/early.yaml") || { fail "$mode: the early job not accepted"; return; }
  expect "$mode: baton jobs signal sends a JSON payload" \
    "$("$baton" jobs signal "$id" go --payload '{"n": 1}' --url "$url" 2>&1)" "job $id signalled go"
  wait_done "$id" 30 || { fail "$mode: the early-signal job did not end"; return; }
  expect "$mode: a signal sent before its task waited was kept for it" \
    "$(js "$body" 'j["state"]') $(js "$body" 'j.get("result")')" 'COMPLETED {"n":1}'

  # No signal in time.
  printf 'name: nobody came\ntasks:\n  - name: gate\n    wait: {signal: go, timeout: 2s}\n' >"$work_dir/late.yaml"
  id=$(submit "$work_dir/late.yaml") || { fail "$mode: the timeout job not accepted"; return; }
  wait_done "$id" 30 || { fail "$mode: the timeout job did not end"; return; }
  expect "$mode: a signal wait fails at its timeout" \
    "$(js "$body" 'j["state"]') | $(field gate error)" 'FAILED | no signal "go" came within 2s'
  http POST "/jobs/$id/signals/go" --data '"x"'
  expect "$mode: a finished job refuses a signal" "$status $(js "$body" 'j["message"]')" \
    "400 only an active job takes signals; this one is FAILED"
  http POST "/jobs/0123456789abcdef0123456789abcdef/signals/go" --data '"x"'
  expect "$mode: an unknown job is a 404" "$status" 404
}

# many_waits: 1,000 waits at once hold no thread each (the engine's thread count is the
# same while they wait), and end together. (The job is read through a pipe: as an
# argument it is over the kernel's 128 KiB.)
many_waits() {
  local id before during waiting=0 state=""
  before=$(ls "/proc/$server_pid/task" | wc -l)
  printf 'name: many waits\ntasks:\n  - name: all\n    each:\n      list: "{{ sequence(0, 1000) }}"\n      task:\n        name: "w{{ item.index }}"\n        wait: {for: 4s}\n' >"$work_dir/many.yaml"
  id=$(submit "$work_dir/many.yaml") || { fail "standalone: the 1,000 waits not accepted"; return; }
  waiting() {
    curl -s "$url/jobs/$id" | python3 -c 'import json, sys; j = json.load(sys.stdin); print(j["state"], sum(t["state"] == "RUNNING" and "wait" in t for t in j["execution"]))'
  }
  local deadline=$((SECONDS + 60))
  until [[ $(waiting) == "RUNNING 1000" ]] || ((SECONDS > deadline)); do sleep 0.2; done
  during=$(ls "/proc/$server_pid/task" | wc -l)
  expect "standalone: 1,000 waits at once, the engine's threads the same (before, during)" \
    "$(waiting) $before $during" "RUNNING 1000 $before $before"
  deadline=$((SECONDS + 60))
  until [[ $(waiting) == "COMPLETED 0" ]] || ((SECONDS > deadline)); do sleep 0.5; done
  expect "standalone: ...and all complete" "$(waiting)" "COMPLETED 0"
}

kill_standalone() {
  kill -9 "$server_pid"
  wait "$server_pid" 2>/dev/null
  start_standalone
}
start_standalone
wait_across standalone kill_standalone
signals standalone
many_waits
stop_pids "$server_pid"
wait "$server_pid" 2>/dev/null
server_pid=

# ---- distributed: a coordinator and a worker with one slot; the coordinator killed -9
distributed_env baton_waits
port=$(free_port)
url=http://127.0.0.1:$port
start_coordinator c "$port"
"$baton" run worker --queue default:1 --data-dir "$work_dir/w" >"$work_dir/worker.log" 2>&1 &
worker_pid=$!
kill_coordinator() {
  kill -9 "${pid_of[c]}"
  wait "${pid_of[c]}" 2>/dev/null
  pid_of[c]=
  start_coordinator c "$port"
}
wait_across distributed kill_coordinator
signals distributed

finish waits
