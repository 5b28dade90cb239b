#!/usr/bin/env bash
# End to end: `baton run standalone` on a free port with a fresh data directory, driven over
# HTTP only, one case per feature, each from a job file in examples/ a person can submit.
# Usage: jobs_test.sh BATON SOURCE_DIR [CASE...]
set -uo pipefail
baton=$1 src=$2
examples=$src/examples
source "$src/tests/e2e/lib.sh"
start_server

# Every row of the job's `execution` as a Python expression's input.
executions() { js "$1" 'len(j["execution"])'; }

case_hello() {
  local id
  id=$(submit "$examples/hello.yaml") && wait_done "$id"
  expect "hello: state" "$(js "$body" 'j["state"]')" COMPLETED
  expect "hello: result" "$(js "$body" 'j["result"]')" "hello world"
}

case_random_output() {
  local id
  id=$(submit "$examples/inputs-and-env.yaml") && wait_done "$id"
  expect "random: state" "$(js "$body" 'j["state"]')" COMPLETED
  expect_match "random: result" "$(js "$body" 'j["result"]')" '^hello [0-9]+$'
}

case_parallel() {
  local id
  id=$(submit "$examples/parallel.yaml") && wait_done "$id"
  expect "parallel: state" "$(js "$body" 'j["state"]')" COMPLETED
  expect "parallel: executions" "$(executions "$body")" 9
}

case_each() {
  local id
  id=$(submit "$examples/each-results.yaml") && wait_done "$id"
  expect "each: state" "$(js "$body" 'j["state"]')" COMPLETED
  expect "each: executions" "$(executions "$body")" 12
  expect "each: tasks.eachTask0" "$(js "$body" 'j["context"]["tasks"]["eachTask0"]')" 1
  expect "each: tasks.eachTask3" "$(js "$body" 'j["context"]["tasks"]["eachTask3"]')" 4
}

case_subjob() {
  local id child_id child detached
  id=$(submit "$examples/subjob.yaml") && wait_done "$id"
  expect "subjob: state" "$(js "$body" 'j["state"]')" COMPLETED
  expect "subjob: child output in the parent's context" \
    "$(js "$body" 'j["context"]["tasks"]["fromChild"]')" "hi from the child"
  expect "subjob: job result" "$(js "$body" 'j["result"]')" "hi from the child"
  expect "subjob: the task's result" \
    "$(js "$body" '[t["result"] for t in j["execution"] if t["name"] == "run a child job"][0]')" \
    "hi from the child"
  # Three sub-jobs: one alone, then two in a parallel. As in Tork, an attached child's
  # parentId is the task that runs it; a detached child stands alone.
  local pairs pair task_id
  pairs=$(js "$body" '" ".join(t["subjob"]["id"] + ":" + t["id"] + ":" + str(t["subjob"].get("detached", False))
                             for t in j["execution"] if "subjob" in t)')
  expect "subjob: three sub-job ids" "$(wc -w <<<"$pairs" | tr -d ' ')" 3
  for pair in $pairs; do
    IFS=: read -r child_id task_id detached <<<"$pair"
    wait_done "$child_id" || fail "subjob: child $child_id did not finish"
    child=$body
    expect "subjob: child $child_id state" "$(js "$child" 'j["state"]')" COMPLETED
    if [[ $detached == False ]]; then
      expect "subjob: child $child_id parentId" "$(js "$child" 'j.get("parentId")')" "$task_id"
    fi
  done
  http GET "/jobs/$id"
  expect "subjob: both parallel children COMPLETED" \
    "$(js "$body" '[t["state"] for t in j["execution"] if t.get("name") in ("first child", "second child")]')" \
    '["COMPLETED", "COMPLETED"]'
}

case_retry() {
  local id
  id=$(submit "$examples/retry.yaml") && wait_done "$id"
  expect "retry: state" "$(js "$body" 'j["state"]')" FAILED
  expect "retry: attempts" "$(executions "$body")" 3
  expect "retry: every attempt FAILED" \
    "$(js "$body" 'sorted({t["state"] for t in j["execution"]})')" '["FAILED"]'
  expect "retry: the last attempt's number" \
    "$(js "$body" 'max(t.get("retry", {}).get("attempts", 0) for t in j["execution"])')" 2
}

case_timeout() {
  local id start elapsed
  start=$(date +%s.%N)
  id=$(submit "$examples/timeout.yaml") && wait_done "$id" 20
  elapsed=$(python3 -c "import sys; print(round($(date +%s.%N) - $start, 1))")
  expect "timeout: state" "$(js "$body" 'j["state"]')" FAILED
  expect_match "timeout: error" "$(js "$body" 'j["error"]')" 'timed out'
  if python3 -c "import sys; sys.exit(0 if $elapsed < 5 else 1)"; then
    pass "timeout: failed after ${elapsed}s"
  else
    fail "timeout: took ${elapsed}s for a 1s timeout"
  fi
}

case_conditions() {
  local id
  id=$(submit "$examples/conditions.yaml") && wait_done "$id"
  expect "conditions: state" "$(js "$body" 'j["state"]')" COMPLETED
  expect "conditions: if false" \
    "$(js "$body" '[t["state"] for t in j["execution"] if t["name"] == "skipped"][0]')" SKIPPED
  expect "conditions: if true" \
    "$(js "$body" '[t["state"] for t in j["execution"] if t["name"] == "runs"][0]')" COMPLETED
}

case_each_concurrency() {
  local id
  id=$(submit "$examples/each-concurrency.yaml") && wait_done "$id"
  expect "each concurrency 1: state" "$(js "$body" 'j["state"]')" COMPLETED
  # Children sorted by start: each starts no earlier than the previous one completed.
  expect "each concurrency 1: items never overlap" "$(js "$body" '(lambda c: [
      a["name"] + " overlaps " + b["name"] for a, b in zip(c, c[1:])
      if b["startedAt"] < a["completedAt"]])(
    sorted([t for t in j["execution"] if t.get("parentId")], key=lambda t: t["startedAt"]))')" '[]'
  expect "each concurrency 1: four items" \
    "$(js "$body" 'len([t for t in j["execution"] if t.get("parentId")])')" 4
}

# All the job's log text, oldest first.
job_log() {
  http GET "/jobs/$1/log?size=100"
  js "$body" '"".join(p["contents"] for p in reversed(j["items"]))'
}

case_secrets() {
  local id log
  id=$(submit "$examples/secrets.yaml") && wait_done "$id"
  expect "secrets: state" "$(js "$body" 'j["state"]')" COMPLETED
  [[ $body != *s3cr3t-e2e-value* ]] && pass "secrets: not in the job JSON" ||
    fail "secrets: the secret is in the job JSON: $body"
  [[ $body == *'[REDACTED]'* ]] && pass "secrets: [REDACTED] in the job JSON" ||
    fail "secrets: no [REDACTED] in the job JSON: $body"
  log=$(job_log "$id")
  [[ $log == *"the token is [REDACTED]"* ]] && pass "secrets: [REDACTED] in the log" ||
    fail "secrets: log is [$log]"
  [[ $log != *s3cr3t-e2e-value* ]] || fail "secrets: the secret is in the log"
  local task
  task=$(js "$body" 'j["execution"][0]["id"]')
  http GET "/tasks/$task"
  [[ $status == 200 && $body != *s3cr3t-e2e-value* ]] && pass "secrets: not in GET /tasks" ||
    fail "secrets: GET /tasks/$task: HTTP $status $body"
}

case_python_files() {
  local id
  id=$(submit "$examples/python-files.yaml") && wait_done "$id"
  expect "python files: state" "$(js "$body" 'j["state"]')" COMPLETED
  expect "python files: result" "$(js "$body" 'j["result"]')" "hello from python 45"
}

case_wait() {
  post_file "$examples/wait.yaml"
  expect "wait: HTTP status" "$status" 200
  expect "wait: state" "$(js "$body" 'j["state"]')" COMPLETED
  expect "wait: result" "$(js "$body" 'j["result"]')" "waited for me"
  expect "wait: the full job (execution)" "$(executions "$body")" 1
  local start=$SECONDS
  post_file "$examples/wait-too-short.yaml"
  expect "wait too short: HTTP status" "$status" 408
  [[ $(js "$body" 'j["message"]') != \<error* ]] && pass "wait too short: a message" ||
    fail "wait too short: body $body"
  ((SECONDS - start <= 4)) && pass "wait too short: answered in time" ||
    fail "wait too short: took $((SECONDS - start))s"
}

case_validation() {
  post_yaml <<<$'description: no name\ntasks:\n  - name: t\n    run: echo'
  expect "validation: missing name" "$status" 400
  expect_match "validation: missing name message" "$(js "$body" 'j["message"]')" 'name'
  post_yaml <<<$'name: j\ntasks:\n  - name: t\n    rnu: echo'
  expect "validation: unknown field" "$status" 400
  expect_match "validation: unknown field message" "$(js "$body" 'j["message"]')" '4:.*rnu'
  post_yaml <<<$'name: j\ntasks: []'
  expect "validation: no tasks" "$status" 400
  expect_match "validation: no tasks message" "$(js "$body" 'j["message"]')" 'tasks'
  post_yaml <<<$'name: j\ntasks:\n  - name: t\n    run: echo\n    parallel:\n      tasks:\n        - {name: c, run: echo}'
  expect "validation: run and parallel" "$status" 400
  expect_match "validation: run and parallel message" "$(js "$body" 'j["message"]')" 'tasks\[0\]'
  post_yaml <<<$'name: j\ntasks:\n  - name: t\n    queue: x-private\n    run: echo'
  expect "validation: reserved queue" "$status" 400
  expect_match "validation: reserved queue message" "$(js "$body" 'j["message"]')" 'queue'
  # Every problem at once, each with its line.
  post_file "$src/tests/cli/testdata/three-mistakes.yaml"
  expect "validation: three mistakes" "$status" 400
  local message
  message=$(js "$body" 'j["message"]')
  expect_match "validation: retry.limit with its line" "$message" '6:14: tasks\[0\]\.retry\.limit'
  expect_match "validation: timeout with its line" "$message" '9:14: tasks\[1\]\.timeout'
  expect_match "validation: priority with its line" "$message" '12:15: tasks\[2\]\.priority'
  expect "validation: code" "$(js "$body" 'j["code"]')" INVALID_ARGUMENT
}

# Pids of `sleep` processes running in a task directory of this server's data directory:
# the data directory is unique to this run, so nothing else on the machine matches.
task_sleepers() {
  local p cwd
  for p in /proc/[0-9]*; do
    [[ $(cat "$p/comm" 2>/dev/null) == sleep ]] || continue
    cwd=$(readlink "$p/cwd" 2>/dev/null) || continue
    [[ $cwd == "$data_dir"* ]] && echo "${p#/proc/}"
  done
}

# wait_sleepers PRESENT|GONE [SECONDS]
wait_sleepers() {
  local deadline=$((SECONDS + ${2:-15}))
  while ((SECONDS <= deadline)); do
    if [[ $1 == PRESENT && -n $(task_sleepers) ]] || [[ $1 == GONE && -z $(task_sleepers) ]]; then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

case_cancel_restart() {
  local id
  id=$(submit "$examples/cancel.yaml") && wait_state "$id" RUNNING
  wait_sleepers PRESENT && pass "cancel: sleep 60 is running" ||
    fail "cancel: no sleep process in $data_dir"
  # An explicit empty body: cpp-httplib 0.11 servers wait for the body of a PUT sent without
  # Content-Length (malformed_test.sh checks that case on its own).
  http PUT "/jobs/$id/cancel" --data ""
  expect "cancel: HTTP status" "$status" 200
  expect "cancel: body" "$(js "$body" 'j["status"]')" OK
  wait_state "$id" CANCELLED 15 && pass "cancel: job CANCELLED" || fail "cancel: job not CANCELLED"
  wait_sleepers GONE && pass "cancel: sleep 60 killed" ||
    fail "cancel: sleep still running: $(task_sleepers)"
  http PUT "/jobs/$id/cancel" --data ""
  expect "cancel again: HTTP status" "$status" 400
  [[ $(js "$body" 'j["message"]') != \<error* ]] || fail "cancel again: no message: $body"
  http PUT "/jobs/$id/restart" --data ""
  expect "restart: HTTP status" "$status" 200
  wait_state "$id" RUNNING 15 && pass "restart: RUNNING again" || fail "restart: not RUNNING"
  http PUT "/jobs/$id/restart" --data ""
  expect "restart a running job: HTTP status" "$status" 400
  http PUT "/jobs/$id/cancel" --data ""
  wait_state "$id" CANCELLED 15 || fail "cancel after restart: not CANCELLED"
  wait_sleepers GONE || fail "cancel after restart: sleep still running"
}

case_bad_output() {
  local id
  id=$(submit "$examples/bad-output.yaml") && wait_done "$id"
  expect "bad output: state" "$(js "$body" 'j["state"]')" FAILED
  expect_match "bad output: error" "$(js "$body" 'j["error"]')" 'bad_function'
}

case_client() {
  local out rc id
  out=$("$baton" submit "$examples/hello.yaml" --wait --url "$url" 2>&1)
  rc=$?
  expect "client submit --wait: exit" "$rc" 0
  expect_match "client submit --wait: output" "$out" $'^[0-9a-f]{32}\nCOMPLETED\nhello world$'
  id=$(head -n1 <<<"$out")
  out=$("$baton" jobs get "$id" --json --url "$url")
  expect "client jobs get --json" "$(js "$out" 'j["id"] + " " + j["result"]')" "$id hello world"
  out=$(BATON_URL=$url "$baton" health)
  expect_match "client health" "$out" '^UP \(baton [0-9]+\.[0-9]+\.[0-9]+\)$'
  out=$("$baton" submit "$examples/retry.yaml" --wait --url "$url" 2>&1)
  expect "client submit --wait of a failing job: exit" "$?" 1
  expect_match "client submit --wait of a failing job: output" "$out" $'\nFAILED\nerror: exit code 1'
  out=$("$baton" submit "$examples/parallel.yaml" --follow --url "$url" 2>/dev/null)
  expect "client submit --follow: exit" "$?" 0
  expect_match "client submit --follow: log then state" "$out" $'starting\n.*done\nCOMPLETED$'
  out=$("$baton" jobs list --size 2 --url "$url")
  expect_match "client jobs list" "$out" $'^ID +NAME +STATE +PROGRESS +CREATED\n.*page 1 of [0-9]+, [0-9]+ jobs$'
  "$baton" jobs get 0123456789abcdef0123456789abcdef --url "$url" >/dev/null 2>&1
  expect "client jobs get of an unknown id: exit" "$?" 1
}

# Started from an empty directory with no --data-dir, as the README's tour does: the data
# directory is the default, relative `.baton`, and tasks must still get absolute paths.
case_relative_data_dir() {
  local scratch port saved_url=$url pid binary id
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/baton-e2e-relative.XXXXXX")
  binary=$(cd "$(dirname "$baton")" && pwd)/$(basename "$baton")
  port=$(free_port)
  (cd "$scratch" && exec env -u BATON_DATA_DIR -u BATON_CONFIG -u BATON_DATASTORE_SQLITE_PATH \
    "$binary" run standalone --address "127.0.0.1:$port") >"$work_dir/relative-server.log" 2>&1 &
  pid=$!
  trap 'kill -KILL '"$pid"' 2>/dev/null; rm -rf '"'$scratch'"'; stop_server' EXIT
  url=http://127.0.0.1:$port
  local deadline=$((SECONDS + 60))
  until curl -sf "$url/health" >/dev/null 2>&1 || ! kill -0 "$pid" 2>/dev/null ||
    ((SECONDS > deadline)); do sleep 0.1; done
  if curl -sf "$url/health" >/dev/null 2>&1; then
    id=$(submit "$examples/hello.yaml") && wait_done "$id"
    expect "relative data dir: hello state" "$(js "$body" 'j["state"]')" COMPLETED
    expect "relative data dir: hello result" "$(js "$body" 'j["result"]')" "hello world"
    [[ -f $scratch/.baton/baton.db ]] && pass "relative data dir: ./.baton/baton.db is used" ||
      fail "relative data dir: no $scratch/.baton/baton.db"
  else
    fail "relative data dir: the server did not start: $(cat "$work_dir/relative-server.log")"
  fi
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  url=$saved_url
  trap stop_server EXIT
  rm -rf "$scratch"
}

# The pre and post steps' own `files` are written and used.
case_files_pre_post() {
  local id log
  id=$(submit "$examples/files-pre-post.yaml") && wait_done "$id"
  expect "files pre/post: state" "$(js "$body" 'j["state"]')" COMPLETED
  expect "files pre/post: result" "$(js "$body" 'j["result"]')" \
    $'hello from a file\nprepared by pre\'s file'
  log=$(job_log "$id")
  [[ $log == *"cleaned up by post's file"* ]] && pass "files pre/post: post's file ran" ||
    fail "files pre/post: log is [$log]"
}

# The shell runtime cannot mount volumes: the task fails, naming the field.
case_shell_refuses_mounts() {
  local id
  id=$(submit <(printf '%s\n' 'name: needs a volume' 'tasks:' '  - name: uses /data' \
    '    mounts: [{type: volume, target: /data}]' '    run: echo should-not-run; echo x > /data/x')) &&
    wait_done "$id"
  expect "shell mounts: state" "$(js "$body" 'j["state"]')" FAILED
  expect_match "shell mounts: error names the field" "$(js "$body" 'j["error"]')" \
    '^mounts: the shell runtime cannot mount volumes; run this task with runtime.type = "docker"'
  [[ $(job_log "$id") != *should-not-run* ]] && pass "shell mounts: nothing ran" ||
    fail "shell mounts: the task ran"
}

all_cases=(hello random_output parallel each subjob retry timeout conditions each_concurrency
           secrets python_files wait validation cancel_restart bad_output client)
all_cases+=(relative_data_dir files_pre_post shell_refuses_mounts)
# Extra arguments pick cases by name, e.g. `jobs_test.sh BATON SRC wait client`.
for name in "${@:3}"; do
  [[ " ${all_cases[*]} " == *" $name "* ]] || { echo "unknown case $name; cases: ${all_cases[*]}"; exit 2; }
done
cases=("${@:3}")
((${#cases[@]})) || cases=("${all_cases[@]}")
for name in "${cases[@]}"; do
  "case_$name"
  check_server "after case $name"
done
finish e2e
