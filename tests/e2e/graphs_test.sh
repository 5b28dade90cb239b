#!/usr/bin/env bash
# Graphs (`needs`, `mode: dag`, trigger rules) over the binary: a diamond whose middle
# tasks overlap (markers with times), the same diamond inside a parallel beside a task
# that fails (which cancels nothing there), each trigger rule's run or skip after a failure, a
# restart that runs again only what failed or was skipped, a switch, a loop ended by its
# condition and one by its max, retry.on (an exit code and a timeout), a fallback that recovers, a job's onFailure and finally
# after a failure and finally after a cancel (the job RUNNING with its `ending` while it
# runs), and a cycle refused with its line and column; in standalone mode, then the same
# jobs in distributed mode (a coordinator and a worker over RabbitMQ and PostgreSQL).
# Usage: graphs_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1
src=$2
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

needs_services

# diamond_job MARKS: a writes, b and c each hold 1 s, d needs both; times in MARKS.
diamond_job() {
  cat <<YAML
name: diamond
mode: dag
output: "{{ tasks.d }}"
tasks:
  - name: a
    run: date +%s.%N > $1/a.end
  - name: b
    needs: [a]
    var: b
    run: |
      date +%s.%N > $1/b.start; sleep 1; date +%s.%N > $1/b.end
      echo -n B > \$BATON_OUTPUT
  - name: c
    needs: [a]
    var: c
    run: |
      date +%s.%N > $1/c.start; sleep 1; date +%s.%N > $1/c.end
      echo -n C > \$BATON_OUTPUT
  - name: d
    needs: [b, c]
    var: d
    env:
      B: "{{ tasks.b }}"
      C: "{{ tasks.c }}"
    run: date +%s.%N > $1/d.start; echo -n "\$B\$C" > \$BATON_OUTPUT
YAML
}

# parallel_diamond_job MARKS: the diamond inside a parallel, beside "odd", which fails
# at once: in a parallel with needs a failure cancels nothing, so the diamond ends.
parallel_diamond_job() {
  cat <<YAML
name: parallel diamond
tasks:
  - name: group
    parallel:
      tasks:
        - name: a
          run: date +%s.%N > $1/a.end
        - name: odd
          run: echo odd one out; exit 2
        - name: b
          needs: [a]
          run: date +%s.%N > $1/b.start; sleep 1; date +%s.%N > $1/b.end
        - name: c
          needs: [a]
          run: date +%s.%N > $1/c.start; sleep 1; date +%s.%N > $1/c.end
        - name: d
          needs: [b, c]
          run: date +%s.%N > $1/d.start
  - name: after
    run: touch $1/after
YAML
}

# rules_job MARKS: "build" fails; what each rule does after it, marked by a file each.
rules_job() {
  cat <<YAML
name: rules
mode: dag
tasks:
  - name: build
    run: echo broken; exit 3
  - name: lint
    run: touch $1/lint
  - name: deploy
    needs: [build]
    run: touch $1/deploy
  - name: after-deploy
    needs: [deploy]
    run: touch $1/after-deploy
  - name: cleanup
    needs: [build, lint]
    triggerRule: all_done
    run: touch $1/cleanup
  - name: alert
    needs: [build]
    triggerRule: one_failed
    run: touch $1/alert
  - name: rollback
    needs: [build, lint]
    triggerRule: all_failed
    run: touch $1/rollback
  - name: any-ok
    needs: [build, lint]
    triggerRule: one_success
    run: touch $1/any-ok
  - name: none-failed
    needs: [deploy, lint]
    triggerRule: none_failed
    run: touch $1/none-failed
  - name: min-one
    needs: [deploy]
    triggerRule: none_failed_min_one_success
    run: touch $1/min-one
  - name: all-ok
    needs: [lint]
    triggerRule: all_success
    run: touch $1/all-ok
YAML
}

# restart_job MARKS: "flaky" fails until MARKS/fixed exists; "steady" counts its runs.
restart_job() {
  cat <<YAML
name: restartable
mode: dag
tasks:
  - name: steady
    run: echo x >> $1/steady
  - name: flaky
    run: echo x >> $1/flaky; test -f $1/fixed
  - name: after
    needs: [flaky, steady]
    run: echo x >> $1/after
YAML
}

# state_of JOB_JSON TASK: the newest row's state of the task named TASK.
state_of() { js "$1" "[t['state'] for t in j['execution'] if t['name'] == '$2'][-1]"; }
error_of() { js "$1" "[t.get('error', '') for t in j['execution'] if t['name'] == '$2'][-1]"; }

run_suite() {
  local mode=$1 marks id
  marks=$work_dir/marks-$mode
  mkdir -p "$marks/diamond" "$marks/rules" "$marks/restart" "$marks/pdiamond"

  # ---- a diamond: b and c overlap, d after both
  diamond_job "$marks/diamond" >"$work_dir/diamond.yaml"
  id=$(submit "$work_dir/diamond.yaml")
  wait_done "$id" 60
  expect "$mode: the diamond completes" "$(js "$body" 'j["state"]')" COMPLETED
  expect "$mode: d read b's and c's results" "$(js "$body" 'j.get("result")')" BC
  python3 - "$marks/diamond" <<'PY' && pass "$mode: b and c overlapped, after a and before d" || fail "$mode: diamond timing"
import sys
m = sys.argv[1]
t = {n: float(open(f"{m}/{n}").read()) for n in ["a.end", "b.start", "b.end", "c.start", "c.end", "d.start"]}
assert t["a.end"] <= min(t["b.start"], t["c.start"]), t
assert t["b.start"] < t["c.end"] and t["c.start"] < t["b.end"], t
assert t["d.start"] >= max(t["b.end"], t["c.end"]), t
PY

  # ---- the same diamond inside a parallel, beside a task that fails
  parallel_diamond_job "$marks/pdiamond" >"$work_dir/pdiamond.yaml"
  id=$(submit "$work_dir/pdiamond.yaml")
  wait_done "$id" 60
  expect "$mode: a parallel with needs fails with its failed task's error, after the rest ended" \
    "$(js "$body" '[j["state"], j.get("error")] + [[t["name"], t["state"]] for t in j["execution"] if t["name"] in ("group", "odd", "d")]')" \
    '["FAILED", "exit code 2\nodd one out", ["group", "FAILED"], ["odd", "FAILED"], ["d", "COMPLETED"]]'
  [[ ! -e $marks/pdiamond/after ]] && pass "$mode: the task after the failed parallel did not run" ||
    fail "$mode: the task after the failed parallel ran"
  python3 - "$marks/pdiamond" <<'PY' && pass "$mode: in the parallel, b and c overlapped, after a and before d" || fail "$mode: parallel diamond timing"
import sys
m = sys.argv[1]
t = {n: float(open(f"{m}/{n}").read()) for n in ["a.end", "b.start", "b.end", "c.start", "c.end", "d.start"]}
assert t["a.end"] <= min(t["b.start"], t["c.start"]), t
assert t["b.start"] < t["c.end"] and t["c.start"] < t["b.end"], t
assert t["d.start"] >= max(t["b.end"], t["c.end"]), t
PY

  # ---- a branch: an edge taken only when its condition holds
  id=$(submit "$src/examples/branch.yaml")
  wait_done "$id" 60
  expect "$mode: the branch took the small path" \
    "$(js "$body" 'j["state"]') $(js "$body" 'j.get("result")') $(state_of "$body" large)" \
    "COMPLETED 42 items, in memory SKIPPED"

  # ---- a switch, a loop ended by its until and one stopped by its max
  id=$(submit "$src/examples/switch.yaml")
  wait_done "$id" 60
  expect "$mode: the switch ran the case its value picked" \
    "$(js "$body" 'j["state"]') $(js "$body" 'j.get("result")') $(js "$body" '",".join(t["name"] for t in j["execution"])')" \
    "COMPLETED csv: loaded 3 rows detect,by kind,parse csv,load,parse json,unknown kind"
  id=$(submit "$src/examples/loop.yaml")
  wait_done "$id" 60
  expect "$mode: poll ran until ready, tick until its max" \
    "$(js "$body" 'j["state"]') $(js "$body" '",".join(t["name"] for t in j["execution"])')" \
    "COMPLETED poll,check 0,check 1,check 2,tick,tick 0,tick 1"

  # ---- a fallback that recovers; a failed job's onFailure, then its finally
  id=$(submit "$src/examples/fallback.yaml")
  wait_done "$id" 60
  expect "$mode: the fallback stood in for the failed task" \
    "$(js "$body" 'j["state"]') $(js "$body" 'j.get("result")') $(state_of "$body" "clean up")" \
    "COMPLETED prices: 42 (yesterday's) COMPLETED"
  id=$(submit "$src/examples/cleanup.yaml")
  wait_done "$id" 60
  expect "$mode: a failed job ran its onFailure, then its finally" \
    "$(js "$body" 'j["state"]') $(state_of "$body" "page the on-call") $(state_of "$body" "release the lock")" \
    "FAILED COMPLETED COMPLETED"

  # ---- finally after a cancel: the job stays RUNNING, ending CANCELLED, until it is done
  mkdir -p "$marks/finally"
  cat >"$work_dir/finally.yaml" <<YAML
name: finally after a cancel
tasks:
  - name: long
    run: touch $marks/finally/started; sleep 60
finally:
  - name: tidy
    env:
      STATE: "{{ job.state }}"
    run: sleep 3; echo "\$STATE" > $marks/finally/tidied
YAML
  id=$(submit "$work_dir/finally.yaml")
  local waited=0
  while [[ ! -f $marks/finally/started ]] && ((waited < 300)); do sleep 0.1; waited=$((waited + 1)); done
  http PUT "/jobs/$id/cancel"
  expect "$mode: the cancel is accepted" "$status" 200
  http GET "/jobs/$id"
  expect "$mode: while finally runs the job is RUNNING, ending CANCELLED" \
    "$(js "$body" 'j["state"]') $(js "$body" 'j.get("ending")')" "RUNNING CANCELLED"
  wait_done "$id" 60
  expect "$mode: then it ends CANCELLED, its task cancelled and its finally run" \
    "$(js "$body" 'j["state"]') $(state_of "$body" long) $(state_of "$body" tidy) $(cat "$marks/finally/tidied" 2>/dev/null)" \
    "CANCELLED CANCELLED COMPLETED CANCELLED"

  # ---- retry.on: an exit code it names is retried, one it does not is final; a timeout
  mkdir -p "$marks/retry-on"
  cat >"$work_dir/retry-on.yaml" <<YAML
name: retry on
tasks:
  - name: flaky
    retry: {limit: 3, on: {exitCodes: [75]}}
    run: |
      n=\$(cat $marks/retry-on/n 2>/dev/null || echo 0); echo \$((n + 1)) > $marks/retry-on/n
      if [ "\$n" -lt 1 ]; then exit 75; else exit 4; fi
YAML
  id=$(submit "$work_dir/retry-on.yaml")
  wait_done "$id" 60
  expect "$mode: exit 75 was retried, exit 4 was final with attempts left" \
    "$(js "$body" 'j["state"]') $(js "$body" '[[t.get("reason"), t.get("exitCode")] for t in j["execution"]]')" \
    'FAILED [["exit", 75], ["exit", 4]]'
  printf 'name: retry on timeout\ntasks:\n  - name: slow\n    timeout: 1s\n    retry: {limit: 1, on: {errors: [timeout]}, jitter: 100ms}\n    run: sleep 10\n' \
    >"$work_dir/retry-timeout.yaml"
  id=$(submit "$work_dir/retry-timeout.yaml")
  wait_done "$id" 60
  expect "$mode: a timeout named in on was retried, each attempt's reason kept" \
    "$(js "$body" 'j["state"]') $(js "$body" '[t.get("reason") for t in j["execution"]]')" \
    'FAILED ["timeout", "timeout"]'

  # ---- an optional task's failure: the job goes on, COMPLETED, with a warning
  printf 'name: optional\ntasks:\n  - name: flaky\n    optional: true\n    run: echo gone wrong; exit 4\n  - name: next\n    run: touch %s/next\n' \
    "$marks" >"$work_dir/optional.yaml"
  id=$(submit "$work_dir/optional.yaml")
  wait_done "$id" 60
  expect "$mode: an optional failure lets the job complete" \
    "$(js "$body" 'j["state"]') $(state_of "$body" flaky) $(test -f "$marks/next" && echo next-ran)" \
    "COMPLETED FAILED next-ran"
  expect_match "$mode: and is the job's warning" "$(js "$body" 'j.get("warnings")')" \
    '^\["optional task \\"flaky\\" failed: .*gone wrong'

  # ---- each trigger rule after a failure
  rules_job "$marks/rules" >"$work_dir/rules.yaml"
  id=$(submit "$work_dir/rules.yaml")
  wait_done "$id" 60
  expect "$mode: a graph with a failed task fails" "$(js "$body" 'j["state"]')" FAILED
  expect_match "$mode: with the failure's error" "$(js "$body" 'j.get("error", "")')" "broken"
  local ran
  ran=$(cd "$marks/rules" && ls | sort | tr '\n' ' ')
  expect "$mode: the tasks whose rules held ran, no other" "$ran" \
    "alert all-ok any-ok cleanup lint none-failed "
  local job=$body task
  for task in deploy after-deploy rollback min-one; do
    expect "$mode: $task is SKIPPED" "$(state_of "$job" "$task")" SKIPPED
  done
  expect "$mode: deploy says why it was skipped" "$(error_of "$job" deploy)" \
    'not run: its trigger rule all_success cannot be met ("build" FAILED)'
  expect "$mode: the skip propagates" "$(error_of "$job" after-deploy)" \
    'not run: its trigger rule all_success cannot be met ("deploy" SKIPPED)'
  expect "$mode: a none_failed task runs after a skip" "$(state_of "$job" none-failed)" COMPLETED

  # ---- a restart runs again what failed or was skipped, not what completed
  restart_job "$marks/restart" >"$work_dir/restart.yaml"
  id=$(submit "$work_dir/restart.yaml")
  wait_done "$id" 60
  expect "$mode: the restartable job fails first" "$(js "$body" 'j["state"]')" FAILED
  expect "$mode: after was skipped" "$(state_of "$body" after)" SKIPPED
  touch "$marks/restart/fixed"
  http PUT "/jobs/$id/restart"
  expect "$mode: the restart is accepted" "$status" 200
  wait_done "$id" 60
  expect "$mode: the restarted job completes" "$(js "$body" 'j["state"]')" COMPLETED
  expect "$mode: steady ran once, flaky twice, after once" \
    "$(wc -l <"$marks/restart/steady") $(wc -l <"$marks/restart/flaky") $(wc -l <"$marks/restart/after")" \
    "1 2 1"
}

# ---- standalone
start_server

# A cycle is refused with where it is.
post_yaml < <(printf 'name: loop\nmode: dag\ntasks:\n  - name: a\n    needs: [b]\n    run: "true"\n  - name: b\n    needs: [a]\n    run: "true"\n')
expect "a cycle is a bad request" "$status" 400
expect_match "naming its line, column and tasks" "$body" '5:5: tasks\[0\]\.needs: the tasks'"'"' needs form a cycle: \\"a\\" -> \\"b\\" -> \\"a\\"'
post_yaml < <(printf 'name: j\ntasks:\n  - name: a\n    run: "true"\n  - name: b\n    needs: [c]\n    run: "true"\n')
expect_match "an unknown need is named" "$body" '6:13: tasks\[1\]\.needs\[0\]: no task of tasks is named \\"c\\"'

# The plan, as docs/job-format.md shows it ("The plan").
plan=$("$baton" validate --plan "$src/examples/dag.yaml")
documented=$(sed -n '/^\$ baton validate --plan examples\/dag.yaml$/,/^```$/p' "$src/docs/job-format.md" | sed '1d;$d')
expect "validate --plan prints the plan job-format.md shows" "$plan" "$documented"
plan=$("$baton" validate --plan "$src/examples/parallel-needs.yaml")
documented=$(sed -n '/^\$ baton validate --plan examples\/parallel-needs.yaml$/,/^```$/p' "$src/docs/job-format.md" | sed '1d;$d')
expect "validate --plan prints a parallel's graph as job-format.md shows it" "$plan" "$documented"
expect_match "--format dot draws the needs" "$("$baton" validate --plan --format dot "$src/examples/dag.yaml")" '"package" -> "cleanup" \[label="all_done"\];'
expect "--json is the plan's JSON" "$("$baton" validate --json "$src/examples/dag.yaml" | js "$(cat)" 'j["stages"][1]')" '["test", "lint"]'

run_suite standalone
stop_server
server_pid=

# ---- distributed: a coordinator and a worker
work_dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-graphs.XXXXXX")
chmod 711 "$work_dir"
declare -A pid_of
worker_pid=
cleanup() {
  stop_pids "${pid_of[c]:-}" "$worker_pid"
  keep_logs graphs-distributed
  rm -rf "$work_dir"
}
trap cleanup EXIT
distributed_env baton_graphs
port=$(free_port)
url=http://127.0.0.1:$port
start_coordinator c "$port"
"$baton" run worker --queue default:4 --data-dir "$work_dir/w" >"$work_dir/worker.log" 2>&1 &
worker_pid=$!
run_suite distributed

finish graphs
