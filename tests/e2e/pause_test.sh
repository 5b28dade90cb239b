#!/usr/bin/env bash
# Pause and resume over the binary: a pause during a parallel (the running tasks finish,
# the queued ones are withdrawn, nothing new starts), a `kill -9` of the engine
# (standalone) and of the coordinator (distributed) while paused, the job still PAUSED
# after the restart with nothing started, and a resume that runs the rest once; markers
# with times show what ran when. Then the refusals, and a pause point in a sub-job. Then
# reruns, each mode over a sequence and a graph, markers showing exactly which tasks ran
# again, with new inputs and through the CLI, and a skip of a failed task.
# Usage: pause_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1
src=$2
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

needs_services

# parallel_job MARKS: four 2-second tasks at once (two worker slots: two run, two wait in
# the queue), then `after`; each appends "start TIME" and "end TIME" to MARKS/<name>.
parallel_job() {
  local tasks="" n
  for n in 1 2 3 4; do
    tasks+="
      - name: p$n
        run: echo start \$(date +%s.%N) >> $1/p$n; sleep 2; echo end \$(date +%s.%N) >> $1/p$n"
  done
  cat <<YAML
name: pause during a parallel
tasks:
  - name: group
    parallel:
      tasks:$tasks
  - name: after
    run: echo start \$(date +%s.%N) >> $1/after
YAML
}

started() { grep -l '^start' "$1"/p* 2>/dev/null | wc -l; }
ended() { grep -l '^end' "$1"/p* 2>/dev/null | wc -l; }
now() { date +%s.%N; }
# later A B: true when time A is later than time B.
later() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)' "$1" "$2"; }

# run_pause MODE RESTART: the parallel job paused with two tasks running; RESTART kills
# the engine (or the coordinator) with -9 and starts it again, on the same data.
run_pause() {
  local mode=$1 restart=$2 marks id at_pause resumed f
  marks=$(mktemp -d "$work_dir/marks.XXXXXX")
  parallel_job "$marks" >"$marks.yaml"
  id=$(submit "$marks.yaml") || { fail "$mode: not accepted"; return; }
  # Two tasks started (their markers), whether or not their workers reported it yet (a
  # worker reports a start 50 ms in): a pause lets them run on.
  local deadline=$((SECONDS + 30))
  until (($(started "$marks") >= 2)) || ((SECONDS > deadline)); do sleep 0.02; done
  http PUT "/jobs/$id/pause"
  expect "$mode: the pause is accepted" "$status $body" '200 {"status":"OK"}'
  at_pause=$(now)
  http GET "/jobs/$id"
  expect "$mode: the job is PAUSED" "$(js "$body" 'j["state"]')" PAUSED
  # The two running tasks finish; nothing else starts.
  deadline=$((SECONDS + 30))
  until (($(ended "$marks") >= 2)) || ((SECONDS > deadline)); do sleep 0.1; done
  sleep 1.5
  expect "$mode: while paused, the two running tasks ended and no other started" \
    "$(started "$marks") $(ended "$marks") $([[ -e $marks/after ]] && echo after)" "2 2 "
  http GET "/jobs/$id"
  expect "$mode: the two queued tasks wait, withdrawn from the queue; the two that ran completed" \
    "$(js "$body" 'sorted(t["state"] for t in j["execution"] if t["name"].startswith("p"))')" \
    '["COMPLETED", "COMPLETED", "SCHEDULED", "SCHEDULED"]'

  $restart
  sleep 2
  http GET "/jobs/$id"
  expect "$mode: after the kill -9 and a restart, still PAUSED" "$(js "$body" 'j["state"]')" PAUSED
  expect "$mode: ...and nothing more started" \
    "$(started "$marks") $([[ -e $marks/after ]] && echo after)" "2 "

  resumed=$(now)
  http PUT "/jobs/$id/resume"
  expect "$mode: the resume is accepted" "$status $body" '200 {"status":"OK"}'
  wait_done "$id" 60 || { fail "$mode: did not end after the resume"; return; }
  expect "$mode: the job completes" "$(js "$body" 'j["state"]')" COMPLETED
  local once=0 late=0
  for f in "$marks"/p1 "$marks"/p2 "$marks"/p3 "$marks"/p4; do
    [[ $(grep -c '^start' "$f") == 1 ]] && once=$((once + 1))
    later "$(awk '/^start/ {print $2}' "$f")" "$resumed" && late=$((late + 1))
  done
  expect "$mode: every task of the parallel ran exactly once, two of them after the resume" \
    "$once $late" "4 2"
  expect "$mode: the withdrawn rows are kept, CANCELLED, beside their new attempts" \
    "$(js "$body" 'sorted(t["state"] for t in j["execution"] if t["name"].startswith("p"))') $(js "$body" 'len([t for t in j["execution"] if "withdrawn" in t.get("error", "")])')" \
    '["CANCELLED", "CANCELLED", "COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED"] 2'
  later "$(awk '{print $2}' "$marks/after")" "$resumed" && pass "$mode: after started after the resume" ||
    fail "$mode: after started before the resume"
  later "$resumed" "$at_pause" || fail "$mode: the clock"
}

# late_worker: tasks queued on a queue no worker reads are withdrawn by a pause; a worker
# started then (a new process, told of them from the store before it takes a task) does
# not start them; after the resume it runs each once.
late_worker() {
  local marks id late_pid
  marks=$(mktemp -d "$work_dir/late.XXXXXX")
  cat >"$marks.yaml" <<YAML
name: queued for a late worker
tasks:
  - name: group
    parallel:
      tasks:
        - {name: l1, queue: late, run: "echo start >> $marks/l1"}
        - {name: l2, queue: late, run: "echo start >> $marks/l2"}
YAML
  id=$(submit "$marks.yaml") || { fail "distributed: the late job not accepted"; return; }
  local deadline=$((SECONDS + 30))
  until http GET "/jobs/$id" && [[ $(js "$body" 'sorted(t["state"] for t in j["execution"] if t["name"] in ("l1", "l2"))') == '["SCHEDULED", "SCHEDULED"]' ]] ||
    ((SECONDS > deadline)); do sleep 0.1; done
  http PUT "/jobs/$id/pause"
  expect "distributed: the job queued for no worker is paused" "$status" 200
  "$baton" run worker --queue late:2 --data-dir "$work_dir/late" >"$work_dir/late-worker.log" 2>&1 &
  late_pid=$!
  # Heard of, told, then taking tasks: its heartbeat is stored.
  deadline=$((SECONDS + 30))
  until http GET /nodes && [[ $(js "$body" 'len([n for n in j if "late" in n.get("queue", "")])') != 0 ]] ||
    ((SECONDS > deadline)); do sleep 0.2; done
  sleep 3
  expect "distributed: a worker started during the pause did not start the withdrawn tasks" \
    "$(cat "$marks"/l* 2>/dev/null | wc -l)" 0
  http PUT "/jobs/$id/resume"
  wait_done "$id" 60 || { fail "distributed: the late job did not end after the resume"; stop_pids "$late_pid"; return; }
  expect "distributed: after the resume the late worker ran each task once" \
    "$(js "$body" 'j["state"]') $(cat "$marks"/l1 "$marks"/l2 2>/dev/null | wc -l)" "COMPLETED 2"
  stop_pids "$late_pid"
  wait "$late_pid" 2>/dev/null
}

refusals() {
  local mode=$1 id
  printf 'name: quick\ntasks:\n  - name: a\n    run: "true"\n' >"$work_dir/quick.yaml"
  id=$(submit "$work_dir/quick.yaml") || { fail "$mode: quick not accepted"; return; }
  wait_done "$id" 30
  http PUT "/jobs/$id/pause"
  expect "$mode: a COMPLETED job cannot be paused" "$status $(js "$body" 'j["message"]')" \
    "400 only a SCHEDULED or RUNNING job can be paused; this one is COMPLETED"
  http PUT "/jobs/$id/resume"
  expect "$mode: nor resumed" "$status $(js "$body" 'j["message"]')" \
    "400 only a PAUSED job can be resumed; this one is COMPLETED"
  http PUT "/jobs/0123456789abcdef0123456789abcdef/pause"
  expect "$mode: an unknown job is a 404" "$status" 404
}

# A pause point inside a sub-job pauses the top-level job; `baton jobs resume` resumes the
# tree.
subjob_point() {
  local mode=$1 marks id
  marks=$(mktemp -d "$work_dir/marks.XXXXXX")
  printf 'name: outer\ntasks:\n  - name: s\n    subjob:\n      name: inner\n      tasks:\n        - name: x\n          run: touch %s/x\n        - name: y\n          pauseBefore: true\n          run: touch %s/y\n' "$marks" "$marks" >"$marks.yaml"
  id=$(submit "$marks.yaml") || { fail "$mode: outer not accepted"; return; }
  wait_state "$id" PAUSED 30 || { fail "$mode: the top-level job never PAUSED"; return; }
  sleep 1
  expect "$mode: x ran, y waits at its pause point" "$(ls "$marks" | tr '\n' ' ')" "x "
  local out
  out=$("$baton" jobs resume "$id" --url "$url" 2>&1)
  expect "$mode: baton jobs resume says so" "$out" "job $id resumed"
  wait_done "$id" 30
  expect "$mode: the tree completes, y ran" "$(js "$body" 'j["state"]') $(ls "$marks" | tr '\n' ' ')" "COMPLETED x y "
}

# count FILE: its lines (0 when absent).
count() { [[ -e $1 ]] && wc -l <"$1" || echo 0; }
# counts MARKS NAMES...: "name=lines" words.
counts() {
  local marks=$1 out="" n
  shift
  for n in "$@"; do out+="$n=$(count "$marks/$n") "; done
  echo "${out% }"
}
rerun() {
  http PUT "/jobs/$1/rerun" -H "Content-Type: application/json" --data-binary "$2"
}

reruns() {
  local mode=$1 marks id
  marks=$(mktemp -d "$work_dir/marks.XXXXXX")
  cat >"$marks.yaml" <<YAML
name: rerun me
inputs:
  greeting: hello
tasks:
  - name: a
    var: a
    run: echo a >> $marks/a; echo -n A > \$BATON_OUTPUT
  - name: b
    run: echo b >> $marks/b; [ -e $marks/ok ]
  - name: c
    env:
      GREETING: "{{ inputs.greeting }}"
      A: "{{ tasks.a }}"
    run: echo "\$GREETING \$A" >> $marks/c
YAML
  id=$(submit "$marks.yaml") || { fail "$mode: rerun me not accepted"; return; }
  wait_done "$id" 30
  expect "$mode: b fails the job the first time" "$(js "$body" 'j["state"]') $(counts "$marks" a b c)" "FAILED a=1 b=1 c=0"
  touch "$marks/ok"
  rerun "$id" '{}'
  expect "$mode: a rerun (failed_only by default) is accepted" "$status $body" '200 {"status":"OK"}'
  wait_done "$id" 30
  expect "$mode: failed_only ran b and c again, not a" "$(js "$body" 'j["state"]') $(counts "$marks" a b c)" "COMPLETED a=1 b=2 c=1"
  expect "$mode: ...and c saw a's result kept" "$(tail -1 "$marks/c")" "hello A"
  expect "$mode: every attempt stays in the history" \
    "$(js "$body" '" ".join(t["name"] + "=" + t["state"] for t in j["execution"])')" \
    "a=COMPLETED b=FAILED b=COMPLETED c=COMPLETED"
  rerun "$id" '{"mode":"from_failed"}'
  expect "$mode: nothing failed: from_failed is refused" "$status $(js "$body" 'j["message"]')" \
    "400 none of its tasks failed: rerun it with mode all"
  rerun "$id" '{"mode":"sometimes"}'
  expect "$mode: a bad mode is named" "$status $(js "$body" 'j["message"]')" \
    '400 mode: expected failed_only, from_failed or all, not "sometimes"'
  rerun "$id" '{"mode":"all","from":"b","inputs":{"greeting":"bonjour"}}'
  expect "$mode: all from b is accepted" "$status" 200
  wait_done "$id" 30
  expect "$mode: all from b ran b and c again, with the new input" \
    "$(js "$body" 'j["state"]') $(counts "$marks" a b c) $(tail -1 "$marks/c")" "COMPLETED a=1 b=3 c=2 bonjour A"
  local out
  out=$("$baton" jobs rerun "$id" --mode all --url "$url" 2>&1)
  expect "$mode: baton jobs rerun --mode all says so" "$out" "job $id runs again"
  wait_done "$id" 30
  expect "$mode: all ran every task again" "$(js "$body" 'j["state"]') $(counts "$marks" a b c)" "COMPLETED a=2 b=4 c=3"

  # A skip: the failed task it stopped at is SKIPPED with a result, and the job goes on.
  cat >"$marks.skip.yaml" <<YAML
name: skip me
tasks:
  - name: fetch
    var: price
    run: exit 3
  - name: use
    env:
      PRICE: "{{ tasks.price }}"
    run: echo "price \$PRICE" >> $marks/use
YAML
  id=$(submit "$marks.skip.yaml") || { fail "$mode: skip me not accepted"; return; }
  wait_done "$id" 30
  local fetch
  fetch=$(js "$body" '[t["id"] for t in j["execution"] if t["name"] == "fetch"][0]')
  http PUT "/tasks/$fetch/skip" -H "Content-Type: application/json" --data-binary '{"result":"42"}'
  expect "$mode: the skip of the failed task is accepted" "$status $body" '200 {"status":"OK"}'
  wait_done "$id" 30
  expect "$mode: the job went on with the skipped task's result" \
    "$(js "$body" 'j["state"]') $(js "$body" '" ".join(t["name"] + "=" + t["state"] for t in j["execution"])') $(cat "$marks/use")" \
    "COMPLETED fetch=FAILED fetch=SKIPPED use=COMPLETED price 42"
  http PUT "/tasks/$fetch/skip"
  expect "$mode: a task that is not where its job stopped is refused" "$status" 400

  # A graph: b fails, c completes, d is skipped; from_failed runs b and d, not a or c.
  rm -f "$marks/ok" "$marks"/[abcd]
  cat >"$marks.yaml" <<YAML
name: rerun a graph
mode: dag
tasks:
  - name: a
    run: echo a >> $marks/a
  - name: b
    needs: [a]
    run: echo b >> $marks/b; [ -e $marks/ok ]
  - name: c
    needs: [a]
    run: echo c >> $marks/c
  - name: d
    needs: [b, c]
    run: echo d >> $marks/d
YAML
  id=$(submit "$marks.yaml") || { fail "$mode: the graph not accepted"; return; }
  wait_done "$id" 30
  expect "$mode: the graph fails at b, d skipped" "$(js "$body" 'j["state"]') $(counts "$marks" a b c d)" "FAILED a=1 b=1 c=1 d=0"
  touch "$marks/ok"
  rerun "$id" '{"mode":"from_failed"}'
  wait_done "$id" 30
  expect "$mode: from_failed ran b and d, not a or c" "$(js "$body" 'j["state"]') $(counts "$marks" a b c d)" "COMPLETED a=1 b=2 c=1 d=1"
  rerun "$id" '{"mode":"all","from":"c"}'
  wait_done "$id" 30
  expect "$mode: all from c ran c and d" "$(js "$body" 'j["state"]') $(counts "$marks" a b c d)" "COMPLETED a=1 b=2 c=2 d=2"
}

# ---- standalone: the engine killed with -9 while the job is paused
work_dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-pause.XXXXXX")
chmod 711 "$work_dir"
data_dir=$work_dir/data
port=$(free_port)
url=http://127.0.0.1:$port
server_pid=
start_standalone() {
  "$baton" run standalone --address "127.0.0.1:$port" --data-dir "$data_dir" --queue default:2 \
    >>"$work_dir/server.log" 2>&1 &
  server_pid=$!
  await_health "$url" "$server_pid" "the standalone engine"
}
declare -A pid_of
worker_pid=
cleanup() {
  stop_pids ${server_pid:+"$server_pid"} ${pid_of[c]:+"${pid_of[c]}"} ${worker_pid:+"$worker_pid"}
  keep_logs pause
  rm -rf "$work_dir"
}
trap cleanup EXIT
kill_standalone() {
  kill -9 "$server_pid"
  wait "$server_pid" 2>/dev/null
  # Its tasks' processes die with it (a task is in the engine's process group or is
  # reaped by its runtime); the restart finds the job as stored.
  start_standalone
}
start_standalone
run_pause standalone kill_standalone
refusals standalone
subjob_point standalone
reruns standalone
stop_pids "$server_pid"
wait "$server_pid" 2>/dev/null
server_pid=

# ---- distributed: a coordinator and a worker; the coordinator killed with -9
distributed_env baton_pause
port=$(free_port)
url=http://127.0.0.1:$port
start_coordinator c "$port"
"$baton" run worker --queue default:2 --data-dir "$work_dir/w" >"$work_dir/worker.log" 2>&1 &
worker_pid=$!
kill_coordinator() {
  kill -9 "${pid_of[c]}"
  wait "${pid_of[c]}" 2>/dev/null
  pid_of[c]=
  start_coordinator c "$port"
}
run_pause distributed kill_coordinator
late_worker
refusals distributed
subjob_point distributed
reruns distributed

finish pause
