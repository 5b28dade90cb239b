#!/usr/bin/env bash
# End to end: one job cannot hold up or hang the others. Evaluated fields are checked as
# literals are (a job whose later step evaluates to something unstorable, or to the
# engine's own queue, fails with the field named instead of staying RUNNING); a job with
# a large context and a wide each leaves other jobs, /health, cancel and SIGTERM answered
# within seconds.
# Usage: big_job_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"
# Two slots: the big each (concurrency 1) takes one, the small job the other, however many
# cores the machine has.
export BATON_WORKER_QUEUES=default:2
start_server

# ms since the epoch, for timing answers.
now_ms() { date +%s%3N; }

# field JSON_FIELD: prints the field of the JSON document on standard input (the big
# job's documents are too long for js's arguments).
field() { python3 -c 'import json, sys; print(json.load(sys.stdin).get(sys.argv[1], ""))' "$1"; }

# A later step's template evaluates to bytes that are not UTF-8 (FF FE FD), or to an
# engine queue: the job fails at once, naming the field.
case_evaluated_fields() {
  local label field task id
  while IFS='|' read -r label field task; do
    id=$(submit <(printf '%s\n' 'name: evaluated' 'tasks:' '  - {name: one, run: "true"}' \
      "  - $task")) && wait_done "$id" 20
    expect "$label: state" "$(js "$body" 'j["state"]')" FAILED
    expect_match "$label: the error names $field" "$(js "$body" 'j["error"]')" "^$field"
  done <<'EOF'
env|env\.X: |{name: two, env: {X: "{{ fromBase64('//79') }}"}, run: "true"}
name|name: |{name: "{{ fromBase64('//79') }}", run: "true"}
each item|each\.list: |{name: two, each: {list: "{{ [fromBase64('//79')] }}", task: {name: c, env: {V: "{{ item.value }}"}, run: "true"}}}
subjob input|subjob\.inputs\.X: |{name: two, subjob: {name: s, inputs: {X: "{{ fromBase64('//79') }}"}, tasks: [{name: s1, run: "true"}]}}
queue x-completed|queue: |{name: two, queue: "{{ 'x-completed' }}", run: "true"}
EOF
}

# A 1.6 MB job (100,000 inputs) whose each has 2,000 children that read an input: while
# it is expanded, a small job (with `wait`), /health and a cancel are answered within a
# few seconds, and SIGTERM stops the server within a few more.
case_big_each() {
  local job=$work_dir/big.json started took small_id big_id
  python3 - "$job" <<'EOF'
import json, sys
inputs = {"k%d" % i: "value of input number %d" % i for i in range(100000)}
job = {"name": "big", "inputs": inputs, "tasks": [{"name": "fan", "each": {
    "list": "{{ sequence(0, 2000) }}", "concurrency": 1,
    "task": {"name": "c{{ item.index }}", "env": {"A": "{{ inputs.k7 }}"}, "run": "sleep 60"}}}]}
json.dump(job, open(sys.argv[1], "w"))
EOF
  http POST /jobs -H "Content-Type: application/json" --data-binary "@$job"
  [[ $status == 200 ]] || { fail "big each: refused: HTTP $status"; return; }
  big_id=$(field id <<<"$body")
  started=$(now_ms)
  http POST /jobs -H "Content-Type: text/yaml" --max-time 60 --data-binary \
    $'name: small\nwait: {timeout: 50s}\ntasks:\n  - {name: s, run: "true"}\n'
  took=$(($(now_ms) - started))
  expect "big each: a small job with wait completes" "$status $(js "$body" 'j["state"]')" \
    "200 COMPLETED"
  ((took < 5000)) && pass "big each: the small job took ${took} ms" ||
    fail "big each: the small job took ${took} ms (want < 5000)"
  started=$(now_ms)
  http GET /health --max-time 30
  took=$(($(now_ms) - started))
  expect "big each: /health" "$status" 200
  ((took < 2000)) && pass "big each: /health took ${took} ms" ||
    fail "big each: /health took ${took} ms (want < 2000)"
  started=$(now_ms)
  http PUT "/jobs/$big_id/cancel" --max-time 60
  took=$(($(now_ms) - started))
  expect "big each: cancel" "$status" 200
  ((took < 1000)) && pass "big each: cancel took ${took} ms" ||
    fail "big each: cancel took ${took} ms (want < 1000)"
  # GET /jobs/{id} of this job answers 8 MB (every input, 2,000 rows): slow, but not the
  # point here.
  local state deadline=$((SECONDS + 60))
  until state=$(curl -s --max-time 30 "$url/jobs/$big_id" | field state) &&
    [[ $state == CANCELLED ]] || ((SECONDS > deadline)); do sleep 0.2; done
  expect "big each: cancelled" "$state" CANCELLED
  started=$(now_ms)
  kill -TERM "$server_pid"
  deadline=$((SECONDS + 30))
  while kill -0 "$server_pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  took=$(($(now_ms) - started))
  if kill -0 "$server_pid" 2>/dev/null; then
    fail "big each: the server still runs 30 s after SIGTERM"
  else
    ((took < 10000)) && pass "big each: SIGTERM stopped the server in ${took} ms" ||
      fail "big each: SIGTERM took ${took} ms (want < 10000)"
  fi
}

# Extra arguments pick cases by name (big_each last: it stops the server).
cases=("${@:3}")
((${#cases[@]})) || cases=(evaluated_fields big_each)
for name in "${cases[@]}"; do
  "case_$name"
  [[ $name == big_each ]] || check_server "after case $name"
done
finish big_job
