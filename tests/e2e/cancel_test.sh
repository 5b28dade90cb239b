#!/usr/bin/env bash
# Cancelled tasks never start: a task still waiting for a slot when its job is cancelled
# (by the API, by fail-fast in its group, or by the job's timeout) is dropped, so its
# process never runs. Every task here leaves a marker file when it starts; the checks
# are on those files and on the processes alive, not only on the rows' states.
# First against `baton run standalone`, then against a coordinator and two workers over
# the RabbitMQ and PostgreSQL that make test starts (workers do not read the datastore:
# they learn of the cancel from the coordinator).
# Usage: cancel_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1
src=$2
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

# The job files of the cases, with their markers under $marks (its own per mode).
# Two slots: two long tasks hold both while the quick ones wait.
quick_tasks() {
  local n
  for n in $(seq "$1"); do
    echo "        - {name: quick $n, run: 'touch $marks/quick-$n'}"
  done
}

job_parallel() {
  cat <<EOF
name: cancel while queued
tasks:
  - name: group
    parallel:
      tasks:
        - {name: slow 1, run: 'touch $marks/slow-1; sleep 5'}
        - {name: slow 2, run: 'touch $marks/slow-2; sleep 5'}
$(quick_tasks 10)
EOF
}

job_each() {
  cat <<EOF
name: cancel each
tasks:
  - name: loop
    each:
      list: "{{ sequence(1, 4) }}"
      task:
        name: "sleeper {{ item.value }}"
        env: {N: "{{ item.value }}"}
        run: 'touch $marks/each-\$N; exec sleep 30.$token'
EOF
}

# The failing task runs on a queue of its own: a slot it frees itself would take the next
# quick task before the coordinator has heard of the failure (that one starts before any
# cancel, legitimately).
job_fail_fast() {
  cat <<EOF
name: fail fast
tasks:
  - name: group
    parallel:
      tasks:
        - {name: slow 1, run: 'touch $marks/slow-1; sleep 30.$token'}
        - {name: slow 2, run: 'touch $marks/slow-2; sleep 30.$token'}
$(quick_tasks 5)
        - {name: breaks, queue: side, run: 'touch $marks/breaks; sleep 1; exit 3'}
EOF
}

job_timeout() {
  cat <<EOF
name: job timeout
timeout: 2s
tasks:
  - name: group
    parallel:
      tasks:
        - {name: slow 1, run: 'touch $marks/slow-1; sleep 30.$token'}
        - {name: slow 2, run: 'touch $marks/slow-2; sleep 30.$token'}
$(quick_tasks 5)
EOF
}

# wait_marks N: until N markers exist (the slots are taken).
wait_marks() {
  local deadline=$((SECONDS + 30))
  until (($(ls "$marks" | wc -l) >= $1)); do
    ((SECONDS > deadline)) && return 1
    sleep 0.1
  done
}

# sleepers: the number of this run's `sleep 30.<token>` processes alive.
sleepers() { pgrep -fc "sleep 30\\.$token" || true; }

# settle: what was dropped would have started by now, if it were going to.
settle() { sleep 2; }

run_cases() {
  local mode=$1 id
  marks=$work_root/marks-$mode
  token=$RANDOM$RANDOM

  mkdir -p "$marks"
  post_yaml <<<"$(job_parallel)"
  id=$(js "$body" 'j["id"]')
  wait_marks 2 || fail "$mode: parallel: the two slow tasks did not start"
  http PUT "/jobs/$id/cancel" --data ""
  expect "$mode: parallel: cancel answered" "$status" 200
  wait_state "$id" CANCELLED 15 || fail "$mode: parallel: job not CANCELLED"
  settle
  expect "$mode: parallel: no queued task ran after the cancel" \
    "$(ls "$marks" | grep -c quick)" 0
  expect "$mode: parallel: every row CANCELLED" \
    "$(js "$body" 'sorted(set(t["state"] for t in j["execution"]))')" '["CANCELLED"]'

  rm -rf "$marks" && mkdir -p "$marks"
  post_yaml <<<"$(job_each)"
  id=$(js "$body" 'j["id"]')
  wait_marks 2 || fail "$mode: each: two sleepers did not start"
  http PUT "/jobs/$id/cancel" --data ""
  wait_state "$id" CANCELLED 15 || fail "$mode: each: job not CANCELLED"
  settle
  expect "$mode: each: only the two that held the slots started" "$(ls "$marks" | wc -l)" 2
  expect "$mode: each: no sleeper alive a second after the cancel" "$(sleepers)" 0

  rm -rf "$marks" && mkdir -p "$marks"
  post_yaml <<<"$(job_fail_fast)"
  id=$(js "$body" 'j["id"]')
  wait_state "$id" FAILED 30 || fail "$mode: fail-fast: job not FAILED"
  settle
  expect "$mode: fail-fast: the failing task ran" "$(ls "$marks" | grep -c breaks)" 1
  expect "$mode: fail-fast: no queued sibling ran" "$(ls "$marks" | grep -c quick)" 0
  expect "$mode: fail-fast: the running siblings were killed" "$(sleepers)" 0

  rm -rf "$marks" && mkdir -p "$marks"
  post_yaml <<<"$(job_timeout)"
  id=$(js "$body" 'j["id"]')
  wait_state "$id" FAILED 30 || fail "$mode: timeout: job not FAILED"
  expect_match "$mode: timeout: the job's error" "$(js "$body" 'j["error"]')" "timed out"
  settle
  expect "$mode: timeout: no queued task ran" "$(ls "$marks" | grep -c quick)" 0
  expect "$mode: timeout: the running tasks were killed" "$(sleepers)" 0
}

work_root=$(mktemp -d "${TMPDIR:-/tmp}/baton-cancel.XXXXXX")

# ---- standalone
export BATON_WORKER_QUEUES=default:2,side:1
start_server
run_cases standalone
stop_server
unset BATON_WORKER_QUEUES server_pid

# ---- distributed: one coordinator, two workers of one default slot each
if [[ -z ${BATON_TEST_RABBITMQ_URL:-} || -z ${BATON_TEST_POSTGRES_DSN:-} ]]; then
  echo "SKIPPED: the distributed cases need RabbitMQ/PostgreSQL (make test starts them)"
  rm -rf "$work_root"
  exit 77
fi
pids=()
stop_all() {
  stop_pids "${pids[@]}"
  if ((failures)); then tail -n 30 "$work_root"/*.log; fi
  rm -rf "$work_root"
}
trap stop_all EXIT
distributed_env baton_cancel
port=$(free_port)
url=http://127.0.0.1:$port
"$baton" run coordinator --address "127.0.0.1:$port" --data-dir "$work_root/c" \
  >"$work_root/coordinator.log" 2>&1 &
pids+=($!)
for w in 1 2; do
  "$baton" run worker --queue default:1 --queue side:1 --data-dir "$work_root/w$w" >"$work_root/worker$w.log" 2>&1 &
  pids+=($!)
done
deadline=$((SECONDS + 60))
until curl -sf "$url/health" >/dev/null 2>&1; do
  ((SECONDS > deadline)) && { fail "distributed: the coordinator did not answer"; finish cancel; }
  sleep 0.2
done
# Both workers heard of (the cancel is sent to the workers the coordinator knows).
deadline=$((SECONDS + 30))
until [[ $(curl -s "$url/nodes" | js "$(cat)" 'len([n for n in j if n.get("queue")])') == 2 ]]; do
  ((SECONDS > deadline)) && { fail "distributed: the workers did not heartbeat"; break; }
  sleep 0.2
done
run_cases distributed
finish cancel
