#!/usr/bin/env bash
# Every example runs: each file in examples/ is submitted to a real `baton run
# standalone` and the outcome its comments document (state, result, log, what its
# processes did) is checked, not only that it validates. The container examples (a task
# naming an image under localhost/) run on a second server with the docker runtime
# against Podman (BATON_TEST_DOCKER_HOST, from scripts/test-services/with-services.sh).
# A file with no check here FAILS: a new example needs one. Without Podman the container
# examples do not run and the suite exits 77 (CTest: skipped, which `make test` refuses).
# Usage: examples_test.sh BATON SOURCE_DIR [EXAMPLE...]
set -uo pipefail
baton=$1
src=$2
shift 2
examples=$src/examples
# shellcheck source=lib.sh
. "$src/tests/e2e/lib.sh"

# case_webhooks' receiver is on loopback, which webhooks may call only when allowed.
export BATON_WEBHOOKS_ALLOWED_NETWORKS=127.0.0.1/32
start_server
shell_url=$url
shell_server_pid=$server_pid
skipped=()
nl=$'\n'

# All the job's log text, oldest first.
job_log() {
  http GET "/jobs/$1/log?size=100"
  js "$body" '"".join(p["contents"] for p in reversed(j["items"]))'
}
# rows: the last job's task rows as "name=STATE" words, in order.
rows() { js "$body" '" ".join(t["name"].replace(" ", "_") + "=" + t["state"] for t in j["execution"])'; }
# descendants PID: the command lines of PID's processes, children and theirs. (Read it
# whole — `grep` without -q — or, with pipefail, a grep that stops early makes the
# pipeline fail on python's broken pipe.)
descendants() {
  ps -eo pid=,ppid=,args= | python3 -c '
import sys
root, procs = sys.argv[1], [l.split(None, 2) for l in sys.stdin if l.strip()]
kids, seen, todo = {}, [], [root]
for p in procs:
    kids.setdefault(p[1], []).append(p)
while todo:
    for p in kids.get(todo.pop(), []):
        seen.append(p[2] if len(p) > 2 else "")
        todo.append(p[0])
print("\n".join(seen))
' "$1"
}
# no_process PATTERN SECONDS: true once no process of the server runs a command line
# matching PATTERN, within SECONDS.
no_process() {
  local deadline=$((SECONDS + $2))
  while descendants "$server_pid" | grep -E "$1" >/dev/null; do
    ((SECONDS > deadline)) && return 1
    sleep 0.1
  done
}
# run_example FILE [SECONDS]: submits it, waits for its end; the job is in `body`, its id in `id`.
run_example() {
  id=$(submit "$examples/$1") && wait_done "$id" "${2:-60}" || { fail "$1: did not end"; return 1; }
  local state
  state=$(js "$body" 'j["state"]')
  [[ $state == COMPLETED ]] || echo "  $1 ended $state: $(js "$body" '[j.get("error")] + [t["name"] + ": " + t.get("error", "") for t in j["execution"] if t.get("error")]')"
}
state() { js "$body" 'j["state"]'; }

case_bad_output() {
  run_example bad-output.yaml || return
  expect "bad-output: state" "$(state)" FAILED
  expect_match "bad-output: the error is the expression's" "$(js "$body" 'j.get("error", "")')" "bad_function"
  expect "bad-output: the task itself succeeds" "$(rows)" "fine=COMPLETED"
}

case_cancel() {
  id=$(submit "$examples/cancel.yaml") || { fail "cancel: not accepted"; return; }
  wait_state "$id" RUNNING 30 || { fail "cancel: never RUNNING"; return; }
  local deadline=$((SECONDS + 30))
  until descendants "$server_pid" | grep -E '(^|/| )sleep 60$' >/dev/null || ((SECONDS > deadline)); do sleep 0.1; done
  descendants "$server_pid" | grep -E '(^|/| )sleep 60$' >/dev/null && pass "cancel: sleep 60 runs" ||
    fail "cancel: no sleep 60 process under the server"
  local out
  out=$(BATON_URL=$url "$baton" jobs cancel "$id" 2>&1)
  expect "cancel: baton jobs cancel exits 0" "$?" 0
  wait_done "$id" 30
  expect "cancel: state" "$(state)" CANCELLED
  no_process '(^|/| )sleep 60$' 10 && pass "cancel: sleep is killed" ||
    fail "cancel: sleep 60 still runs 10 s after the cancel"
}

case_conditions() {
  run_example conditions.yaml || return
  expect "conditions: state" "$(state)" COMPLETED
  expect "conditions: if false skips, true runs" "$(rows)" "decide=COMPLETED skipped=SKIPPED runs=COMPLETED"
  local log
  log=$(job_log "$id")
  expect_match "conditions: the true branch ran" "$log" "(^|$nl)runs($nl|\$)"
  [[ $log != *"never runs"* ]] && pass "conditions: the skipped task printed nothing" ||
    fail "conditions: the skipped task ran [$log]"
}

case_containers() {
  if [[ -z ${docker_url:-} ]]; then
    echo "SKIPPED: containers.yaml: no container engine (BATON_TEST_DOCKER_HOST; with-services.sh starts Podman)"
    skipped+=(containers.yaml)
    return
  fi
  local saved=$url
  url=$docker_url
  run_example containers.yaml 180 || { url=$saved; return; }
  expect "containers: state" "$(state)" COMPLETED
  local log
  log=$(job_log "$id")
  expect_match "containers: image, env, volume and tmpfs mounts" "$log" "(^|$nl)hello($nl|\$)"
  expect_match "containers: entrypoint + cmd" "$log" "from cmd"
  expect_match "containers: the sidecar served the task" "$log" "sidecar-ready"
  url=$saved
}

case_dag() {
  run_example dag.yaml || return
  expect "dag: state and result" "$(state) $(js "$body" 'j.get("result")')" \
    "COMPLETED tested and linted"
  expect "dag: rows" "$(rows)" \
    "fetch=COMPLETED test=COMPLETED lint=COMPLETED package=COMPLETED notify=SKIPPED cleanup=COMPLETED"
  local row='lambda n: [t for t in j["execution"] if t["name"] == n][0]'
  expect "dag: test and lint overlap, after fetch" \
    "$(js "$body" "(lambda r: r('test')['startedAt'] < r('lint')['completedAt'] and r('lint')['startedAt'] < r('test')['completedAt'] and r('fetch')['completedAt'] <= min(r('test')['startedAt'], r('lint')['startedAt']))($row)")" true
  expect "dag: package after both" \
    "$(js "$body" "(lambda r: r('package')['startedAt'] >= max(r('test')['completedAt'], r('lint')['completedAt']))($row)")" true
  expect "dag: notify says why it did not run" "$(js "$body" "($row)('notify').get('error')")" \
    'not run: its trigger rule one_failed cannot be met ("test" COMPLETED, "lint" COMPLETED)'
}

case_branch() {
  run_example branch.yaml || return
  expect "branch: state and result" "$(state) $(js "$body" 'j.get("result")')" \
    "COMPLETED 42 items, in memory"
  expect "branch: rows" "$(rows)" "measure=COMPLETED small=COMPLETED large=SKIPPED report=COMPLETED"
  expect "branch: large says why" \
    "$(js "$body" '[t.get("error") for t in j["execution"] if t["name"] == "large"][0]')" \
    'not run: its trigger rule all_success cannot be met ("measure" COMPLETED but its when is false)'
}

case_loop() {
  run_example loop.yaml || return
  expect "loop: state and result" "$(state) $(js "$body" 'j.get("result")')" \
    'COMPLETED ready, then [{"tick":"tick 0 after none"},{"tick":"tick 1 after tick 0 after none"}]'
  expect "loop: poll checked three times (until), tick ran twice (max)" "$(rows)" \
    "poll=COMPLETED check_0=COMPLETED check_1=COMPLETED check_2=COMPLETED tick=COMPLETED tick_0=COMPLETED tick_1=COMPLETED"
  expect "loop: poll's result is its iterations" \
    "$(js "$body" '[t.get("result") for t in j["execution"] if t["name"] == "poll"][0]')" \
    '[{"status":"waiting"},{"status":"waiting"},{"status":"ready"}]'
}

case_switch() {
  run_example switch.yaml || return
  expect "switch: state and result" "$(state) $(js "$body" 'j.get("result")')" "COMPLETED csv: loaded 3 rows"
  expect "switch: the csv case ran, the other branches are SKIPPED" "$(rows)" \
    "detect=COMPLETED by_kind=COMPLETED parse_csv=COMPLETED load=COMPLETED parse_json=SKIPPED unknown_kind=SKIPPED"
  expect "switch: a branch not taken says why" \
    "$(js "$body" '[t.get("error") for t in j["execution"] if t["name"] == "parse json"][0]')" \
    'not run: the switch took another branch (its value is "csv")'

}

case_fallback() {
  run_example fallback.yaml || return
  expect "fallback: state and result" "$(state) $(js "$body" 'j.get("result")')" \
    "COMPLETED prices: 42 (yesterday's)"
  # The task's two attempts FAILED, then its fallback (a row in its place) COMPLETED; then
  # report, then the job's finally.
  expect "fallback: the rows" "$(rows)" \
    "fetch_prices=FAILED fetch_prices=FAILED fetch_prices=COMPLETED use_yesterday's_prices=COMPLETED report=COMPLETED finally=COMPLETED clean_up=COMPLETED"
  expect "fallback: the fallback's row handles the failure" \
    "$(js "$body" '[t.get("handles") for t in j["execution"] if t["name"] == "fetch prices"]')" \
    '[null, null, "onFailure"]'
  local log
  log=$(job_log "$id")
  expect_match "fallback: its task saw the failure" "$log" \
    "fetch prices failed \(.*the price service is down.*\); using yesterday's"
  expect_match "fallback: finally saw the outcome" "$log" "cleaning up after a COMPLETED run"
}

case_pause() {
  id=$(submit "$examples/pause.yaml") || { fail "pause: not accepted"; return; }
  wait_state "$id" PAUSED 30 || { fail "pause: never PAUSED at its pause point"; return; }
  expect "pause: build done, deploy held before it starts" "$(rows)" "build=COMPLETED deploy=PENDING"
  sleep 1
  http GET "/jobs/$id"
  expect "pause: still held a second later" "$(state) $(rows)" "PAUSED build=COMPLETED deploy=PENDING"
  http PUT "/jobs/$id/resume"
  expect "pause: the resume is accepted" "$status $body" '200 {"status":"OK"}'
  wait_done "$id" 30 || { fail "pause: did not end after the resume"; return; }
  expect "pause: completed, deploy ran once" "$(state) $(rows)" "COMPLETED build=COMPLETED deploy=COMPLETED"
  expect_match "pause: deploy saw build's result" "$(job_log "$id")" "deploying 1.4.2"
}

case_rerun() {
  run_example rerun.yaml || return
  expect "rerun: the load fails at first" "$(state) $(rows)" "FAILED prepare=COMPLETED load=FAILED"
  http PUT "/jobs/$id/rerun" -H "Content-Type: application/json" --data-binary '{"inputs":{"source":"/bin/sh"}}'
  expect "rerun: accepted" "$status $body" '200 {"status":"OK"}'
  wait_done "$id" 30 || { fail "rerun: did not end after the rerun"; return; }
  expect "rerun: load and report ran again, prepare kept" "$(state) $(rows)" \
    "COMPLETED prepare=COMPLETED load=FAILED load=COMPLETED report=COMPLETED"
  local log
  log=$(job_log "$id")
  expect_match "rerun: the new input was used" "$log" "loaded /bin/sh"
  expect_match "rerun: report saw prepare's kept result" "$log" "report for 2026-12-07"
}

case_cleanup() {
  run_example cleanup.yaml || return
  expect "cleanup: state" "$(state)" FAILED
  expect_match "cleanup: the job's error is migrate's" "$(js "$body" 'j.get("error")')" \
    "migration 42 failed"
  expect "cleanup: no ending once ended" "$(js "$body" 'j.get("ending")')" null
  expect "cleanup: the rows" "$(rows)" \
    "take_the_lock=COMPLETED migrate=FAILED onFailure=COMPLETED page_the_on-call=COMPLETED finally=COMPLETED release_the_lock=COMPLETED"
  local log
  log=$(job_log "$id")
  expect_match "cleanup: onFailure saw the state and the error" "$log" \
    "paging: the job is FAILED \(.*migration 42 failed"
  expect_match "cleanup: then finally ran" "$log" "released"
  expect "cleanup: announce never ran" "$(grep -c 'never reached' <<<"$log")" 0
}

case_each_concurrency() {
  run_example each-concurrency.yaml || return
  expect "each-concurrency: state" "$(state)" COMPLETED
  # sequence(0, 4) is 0, 1, 2, 3 (the end is excluded, as in Tork).
  expect "each-concurrency: four steps" \
    "$(js "$body" 'sorted(t["name"] for t in j["execution"] if t["name"].startswith("step"))')" \
    '["step 0", "step 1", "step 2", "step 3"]'
  # One at a time: each step starts at or after the end of the one before.
  expect "each-concurrency: each starts after the last ends" "$(js "$body" '(lambda s: all(s[k][0] >= s[k - 1][1] for k in range(1, len(s))))(sorted((t["startedAt"], t["completedAt"]) for t in j["execution"] if t["name"].startswith("step")))')" true
  local log
  log=$(job_log "$id")
  expect "each-concurrency: the log, in order" "$(grep '^step' <<<"$log" | tr '\n' ' ')" \
    "step 0 step 1 step 2 step 3 "
}

case_each_results() {
  run_example each-results.yaml || return
  expect "each-results: state" "$(state)" COMPLETED
  # sequence(1,5) is 1..4.
  expect "each-results: eachTask<index> holds each result" \
    "$(js "$body" '[j["context"]["tasks"].get("eachTask%d" % k) for k in range(5)]')" \
    '["1", "2", "3", "4", null]'
  expect "each-results: both loops ran four each" \
    "$(js "$body" 'len([t for t in j["execution"] if t["name"].startswith(("item ", "myitem ")) and t["state"] == "COMPLETED"])')" 8
}

case_each() {
  run_example each.yaml || return
  expect "each: state" "$(state)" COMPLETED
  # sequence(1, 5) is 1..4.
  expect "each: the named loop keeps its results" \
    "$(js "$body" '[j["context"]["tasks"].get("eachTask%d" % k) for k in range(5)]')" \
    '["1", "2", "3", "4", null]'
  expect "each: four items and four elements ran" \
    "$(js "$body" '[len([t for t in j["execution"] if t["name"].startswith(p) and t["state"] == "COMPLETED"]) for p in ("item ", "element ")]')" \
    "[4, 4]"
}

case_expressions() {
  run_example expressions.yaml || return
  expect "expressions: state" "$(state)" COMPLETED
  expect "expressions: result" "$(js "$body" 'j.get("result")')" 3
  expect "expressions: the data task's JSON" "$(js "$body" 'j["context"]["tasks"]["data"]')" \
    '{"count": 3, "first": "a"}'
  expect "expressions: one task per key" \
    "$(js "$body" 'sorted(t["name"] for t in j["execution"] if t["name"].startswith("key "))')" \
    '["key count", "key first"]'
}

case_files_pre_post() {
  run_example files-pre-post.yaml || return
  expect "files-pre-post: state" "$(state)" COMPLETED
  local log
  log=$(job_log "$id")
  expect "files-pre-post: the task's file ran, and found what pre's file left" \
    "$(js "$body" 'j.get("result")')" "hello from a file"$'\n'"prepared by pre's file"
  expect_match "files-pre-post: post's own file ran after the task" "$log" "cleaned up by post's file"
}

case_hello() {
  run_example hello.yaml || return
  expect "hello: state" "$(state)" COMPLETED
  expect "hello: result" "$(js "$body" 'j.get("result")')" "hello world"
}

case_inputs_and_env() {
  run_example inputs-and-env.yaml || return
  expect "inputs-and-env: state" "$(state)" COMPLETED
  local result
  result=$(js "$body" 'j.get("result")')
  expect_match "inputs-and-env: result" "$result" '^hello [0-9]+$'
  expect_match "inputs-and-env: the next task saw it upper-cased" "$(job_log "$id")" \
    "(^|$nl)${result^^}, ($nl|\$)"
}

case_limits_defaults() {
  run_example limits-defaults.yaml || return
  expect "limits-defaults: state" "$(state)" COMPLETED
  expect "limits-defaults: the defaults apply" "$(js "$body" '(lambda t: [t.get("priority"), t.get("timeout"), t.get("queue"), t.get("limits"), t.get("retry", {}).get("limit")])([t for t in j["execution"] if t["name"] == "inherits everything"][0])')" \
    '[5, "5m0s", "default", {"cpus": "0.5", "memory": "64m"}, 1]'
  expect "limits-defaults: the task's own values win" "$(js "$body" '(lambda t: [t.get("priority"), t.get("timeout"), t.get("limits", {}).get("memory")])([t for t in j["execution"] if t["name"] == "overrides"][0])')" \
    '[9, "30s", "128m"]'
  expect "limits-defaults: the log" "$(job_log "$id")" "defaults apply${nl}overridden"
}

case_parallel() {
  run_example parallel.yaml || return
  expect "parallel: state" "$(state)" COMPLETED
  expect "parallel: nine task rows, all COMPLETED" \
    "$(js "$body" '[len(j["execution"]), all(t["state"] == "COMPLETED" for t in j["execution"])]')" \
    "[9, true]"
  local six='[t for t in j["execution"] if t["name"].startswith(("sleep", "quick"))]'
  expect "parallel: the six start together (before the first of them ends)" \
    "$(js "$body" "max(t['startedAt'] for t in $six) < min(t['completedAt'] for t in $six if t['name'] == 'sleep 1')")" true
  expect "parallel: the next waits for all" \
    "$(js "$body" "[t for t in j['execution'] if t['name'] == 'after'][0]['startedAt'] >= max(t['completedAt'] for t in $six)")" true
}

case_parallel_needs() {
  run_example parallel-needs.yaml || return
  expect "parallel-needs: state and error" "$(state) $(js "$body" 'j.get("error")')" \
    "FAILED exit code 3
lint found 2 problems"
  expect "parallel-needs: rows" "$(rows)" \
    "checks=FAILED fetch=COMPLETED lint=FAILED build=COMPLETED report=COMPLETED"
  local row='lambda n: [t for t in j["execution"] if t["name"] == n][0]'
  expect "parallel-needs: fetch and lint start together, build after fetch, report after both" \
    "$(js "$body" "(lambda r: r('fetch')['startedAt'] < r('lint')['failedAt'] and r('lint')['startedAt'] < r('fetch')['completedAt'] and r('build')['startedAt'] >= r('fetch')['completedAt'] and r('report')['startedAt'] >= max(r('build')['completedAt'], r('lint')['failedAt']))($row)")" true
}

case_python_files() {
  run_example python-files.yaml || return
  expect "python-files: state" "$(state)" COMPLETED
  expect "python-files: result" "$(js "$body" 'j.get("result")')" "hello from python 45"
}

case_retry() {
  run_example retry.yaml || return
  expect "retry: state" "$(state)" FAILED
  expect "retry: three attempts, all FAILED" "$(rows)" "flaky=FAILED flaky=FAILED flaky=FAILED"
}

case_secrets() {
  run_example secrets.yaml || return
  expect "secrets: state" "$(state)" COMPLETED
  local log
  log=$(job_log "$id")
  expect_match "secrets: the log shows [REDACTED]" "$log" 'the token is \[REDACTED\]'
  [[ $log != *s3cr3t-e2e-value* && $body != *s3cr3t-e2e-value* ]] &&
    pass "secrets: the value is in neither the job nor its log" ||
    fail "secrets: the secret's value appears [$log]"
}

case_subjob() {
  run_example subjob.yaml || return
  expect "subjob: state" "$(state)" COMPLETED
  expect "subjob: the child's output is the result" "$(js "$body" 'j.get("result")')" "hi from the child"
  expect "subjob: every row COMPLETED" "$(js "$body" 'sorted({t["state"] for t in j["execution"]})')" '["COMPLETED"]'
}

case_timeout() {
  run_example timeout.yaml 30 || return
  expect "timeout: state" "$(state)" FAILED
  expect_match "timeout: the task FAILS timed out" "$(js "$body" 'j["execution"][0].get("error", "")')" "timed out"
  # From the row's start to its end, so that a loaded machine's slow polling is not counted.
  local ran
  ran=$(js "$body" '(lambda t, f: (f(t.get("completedAt") or t["failedAt"]) - f(t["startedAt"])).total_seconds())(j["execution"][0], lambda s: __import__("datetime").datetime.fromisoformat(s.replace("Z", "+00:00")))')
  python3 -c "import sys; sys.exit(0 if $ran < 8 else 1)" && pass "timeout: killed after its 1 s, not the 10 s" ||
    fail "timeout: the task ran $ran s"
  no_process '(^|/| )sleep 10$' 5 && pass "timeout: sleep is killed" || fail "timeout: sleep 10 still runs"
}

case_wait_for() {
  run_example wait-for.yaml || return
  expect "wait-for: state" "$(state)" COMPLETED
  local row='lambda n: [t for t in j["execution"] if t["name"] == n][0]'
  expect "wait-for: check started two seconds after the wait did, on no worker" \
    "$(js "$body" "(lambda r: [r('let it settle').get('nodeId'), __import__('datetime').datetime.fromisoformat(r('check')['startedAt'].replace('Z', '+00:00')).timestamp() - __import__('datetime').datetime.fromisoformat(r('let it settle')['startedAt'].replace('Z', '+00:00')).timestamp() >= 2])($row)")" \
    "[null, true]"
}

case_signal() {
  id=$(submit "$examples/signal.yaml") || { fail "signal.yaml: not accepted"; return; }
  local deadline=$((SECONDS + 30))
  until http GET "/jobs/$id" && [[ $(js "$body" '[t["state"] for t in j["execution"] if t["name"] == "approval"]') == '["RUNNING"]' ]] ||
    ((SECONDS > deadline)); do sleep 0.1; done
  expect "signal: the CLI sends it" \
    "$("$baton" jobs signal "$id" approved --payload '"ann"' --url "$url" 2>&1)" "job $id signalled approved"
  wait_done "$id" 30 || { fail "signal.yaml: did not end"; return; }
  expect "signal: state and result" "$(state) $(js "$body" 'j.get("result")')" \
    "COMPLETED shipped, approved by ann"
}

case_wait_too_short() {
  local started=$SECONDS
  post_file "$examples/wait-too-short.yaml"
  expect "wait-too-short: POST gives up with 408" "$status" 408
  ((SECONDS - started < 4)) && pass "wait-too-short: after about 1 s" ||
    fail "wait-too-short: answered after $((SECONDS - started)) s"
  http GET "/jobs?q=wait&size=100"
  id=$(js "$body" '[x["id"] for x in j["items"] if x["name"] == "wait too short"][0]')
  wait_done "$id" 30
  expect "wait-too-short: the job runs on and COMPLETES" "$(state)" COMPLETED
}

case_wait() {
  post_file "$examples/wait.yaml"
  expect "wait: POST answers 200" "$status" 200
  expect "wait: with the whole job, ended" "$(js "$body" '[j["state"], j.get("result"), "execution" in j]')" \
    '["COMPLETED", "waited for me", true]'
}

case_webhooks_autodelete() {
  # The job is deleted a day after it ends; its webhook (nothing listens at
  # localhost:9999 here) is stored as submitted.
  post_file "$examples/webhooks-autodelete.json"
  expect "webhooks-autodelete: POST waits and answers 200" "$status" 200
  expect "webhooks-autodelete: state and result" "$(js "$body" '[j["state"], j.get("result")]')" '["COMPLETED", "42"]'
  expect "webhooks-autodelete: deleted a day after it ends (deleteAt)" "$(js "$body" '(lambda f: round((f(j["deleteAt"]) - f(j["completedAt"])).total_seconds() / 3600))(lambda s: __import__("datetime").datetime.fromisoformat(s.replace("Z", "+00:00")))')" 24
  expect "webhooks-autodelete: the webhook is stored as submitted" \
    "$(js "$body" '[j["webhooks"][0]["url"], j["webhooks"][0]["headers"]["Authorization"]]')" \
    '["http://localhost:9999/hooks/baton", "Bearer {{ secrets.apiToken }}"]'
}

case_scheduled() {
  # A scheduled job, not a job: POST /scheduled-jobs, then its first tick (within a minute)
  # fires a job that carries its schedule and completes with the documented result.
  http POST /scheduled-jobs -H "Content-Type: text/yaml" --data-binary "@$examples/scheduled.yaml"
  expect "scheduled: accepted" "$status" 200
  local sid
  sid=$(js "$body" 'j["id"]')
  expect "scheduled: ACTIVE with Tork's cron" "$(js "$body" '[j["state"], j["cron"]]')" '["ACTIVE", "* * * * *"]'
  local deadline=$((SECONDS + 75)) fired=""
  while [[ -z $fired ]] && ((SECONDS < deadline)); do
    http GET "/jobs?q=scheduled"
    fired=$(js "$body" '([x["id"] for x in j["items"] if x.get("schedule", {}).get("id") == "'"$sid"'"] + [""])[0]')
    [[ -n $fired ]] || sleep 0.5
  done
  [[ -n $fired ]] || { fail "scheduled: no job fired within 75s"; return; }
  wait_done "$fired" || fail "scheduled: the fired job did not finish"
  expect "scheduled: state" "$(state)" COMPLETED
  expect "scheduled: result" "$(js "$body" 'j["result"]')" "report daily done"
  expect "scheduled: the job carries {id, cron}" \
    "$(js "$body" 'j["schedule"] == {"id": "'"$sid"'", "cron": "* * * * *"}')" true
  http DELETE "/scheduled-jobs/$sid"
  expect "scheduled: deleted" "$status" 200
}

case_permissions() {
  # Authentication is off on this server: the job runs and keeps its permissions, shown
  # as written, with no creator. tests/e2e/auth_test.sh runs it with authentication on.
  post_file "$examples/permissions.yaml"
  expect "permissions: accepted" "$status" 200
  local id
  id=$(js "$body" 'j["id"]')
  wait_done "$id" || fail "permissions: the job did not finish"
  expect "permissions: completed, its permissions kept as written, no creator" \
    "$(js "$body" '[j["state"], j["permissions"], "createdBy" in j]')" \
    '["COMPLETED", [{"role": "ops"}, {"user": "carl"}], false]'
  expect "permissions: its log" "$(job_log "$id")" "report ready"
}

case_webhooks() {
  # Against a receiver on loopback: the example as written, its localhost:9999 swapped for
  # the receiver's address.
  local hooks port deadline
  hooks=$(mktemp -d "${TMPDIR:-/tmp}/baton-e2e-hooks.XXXXXX")
  python3 "$src/tests/e2e/webhook_receiver.py" "$hooks" &
  local receiver=$!
  for _ in $(seq 100); do [[ -f $hooks/port ]] && break; sleep 0.05; done
  port=$(<"$hooks/port")
  post_yaml < <(sed "s|localhost:9999|127.0.0.1:$port|" "$examples/webhooks.yaml")
  expect "webhooks: accepted" "$status" 200
  local id
  id=$(js "$body" 'j["id"]')
  wait_done "$id" || fail "webhooks: the job did not finish"
  deadline=$((SECONDS + 30))
  while http GET "/jobs/$id/webhooks"; [[ $(js "$body" 'len([d for d in j if d["state"] == "PENDING"])') != 0 ]]; do
    ((SECONDS > deadline)) && { fail "webhooks: deliveries still pending"; break; }
    sleep 0.1
  done
  expect "webhooks: every delivery DELIVERED" "$(js "$body" 'sorted({d["state"] for d in j})')" '["DELIVERED"]'
  local got
  got=$(python3 -c '
import json, sys
sys.path.insert(0, sys.argv[2])
from webhook_verify import verify
default_key = [l for l in open(sys.argv[3]).read().split("\n") if l and not l.startswith("#")][0]
out = []
for line in open(sys.argv[1]):
    c = json.loads(line)
    h = {k.lower(): v for k, v in c["headers"].items()}
    b = json.loads(c["body"])
    signed_by = [name for name, key in (("job key", b"an-hmac-key"), ("default key", default_key.encode()))
                 if verify(key, h, c["body"].encode(), set()) == ""]
    out.append([c["path"], b.get("name"), b["state"], h.get("authorization"), signed_by])
# Sent by several threads: in no fixed order.
print(json.dumps(sorted(out, key=json.dumps)))' "$hooks/calls.jsonl" "$src/tests/e2e" "$data_dir/webhooks.key")
  expect "webhooks: the job's states, signed with its key, with the token; each completed task, signed with the data directory's key; no failure" "$got" \
    '[["/hooks/job", "webhooks", "COMPLETED", "Bearer not-a-real-token", ["job key"]], ["/hooks/job", "webhooks", "RUNNING", "Bearer not-a-real-token", ["job key"]], ["/hooks/job", "webhooks", "SCHEDULED", "Bearer not-a-real-token", ["job key"]], ["/hooks/task", "build", "COMPLETED", null, ["default key"]], ["/hooks/task", "test", "COMPLETED", null, ["default key"]]]'
  kill "$receiver" 2>/dev/null
  wait "$receiver" 2>/dev/null
  rm -rf "$hooks"
}

# The container examples go to a second server with the docker runtime.
if [[ -n ${BATON_TEST_DOCKER_HOST:-} ]]; then
  shell_work_dir=$work_dir
  (
    export BATON_RUNTIME_TYPE=docker BATON_RUNTIME_DOCKER_HOST=$BATON_TEST_DOCKER_HOST
    port=$(free_port)
    echo "$port" >"$shell_work_dir/docker-port"
    exec "$baton" run standalone --address "127.0.0.1:$port" --data-dir "$shell_work_dir/docker-data" \
      >"$shell_work_dir/docker-server.log" 2>&1
  ) &
  docker_server_pid=$!
  trap 'kill -TERM $docker_server_pid 2>/dev/null; wait $docker_server_pid 2>/dev/null; stop_server' EXIT
  deadline=$((SECONDS + 60))
  until [[ -s $work_dir/docker-port ]] && curl -sf "http://127.0.0.1:$(<"$work_dir/docker-port")/health" >/dev/null 2>&1; do
    kill -0 "$docker_server_pid" 2>/dev/null || { fail "the docker-runtime server exited:"; cat "$work_dir/docker-server.log"; break; }
    ((SECONDS > deadline)) && { fail "the docker-runtime server did not answer"; break; }
    sleep 0.1
  done
  kill -0 "$docker_server_pid" 2>/dev/null && docker_url=http://127.0.0.1:$(<"$work_dir/docker-port")
fi

# Every file in examples/ has its case: case_<name with - as _>.
files=("$@")
((${#files[@]})) || for f in "$examples"/*; do files+=("$(basename "$f")"); done
for file in "${files[@]}"; do
  name=${file%.*}
  name=case_${name//-/_}
  if ! declare -F "$name" >/dev/null; then
    fail "examples/$file has no check in examples_test.sh (add $name)"
    continue
  fi
  url=$shell_url
  "$name"
done

if ((failures == 0 && ${#skipped[@]})); then
  echo "not run: ${skipped[*]}: reporting the suite skipped (77)"
  exit 77
fi
finish examples
