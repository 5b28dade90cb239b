#!/usr/bin/env bash
# Every acknowledged job completes after `kill -9` of `baton run standalone`, with each of
# its tasks run at least once; a task the crash interrupted runs again as a new attempt,
# without spending its redeliveries or retries.
#   1. killed four times while one long task runs (each kill once the new attempt has
#      started): more kills than the redeliveries a lost task is allowed;
#   2. killed during a burst of concurrent submissions (some jobs with a parallel and an
#      each), then restarted;
#   3. the same, then killed again about 0.3 s into the recovery, then restarted.
# Tasks leave a mark per run (tests/e2e/crash_probe.py makes the jobs and checks).
# Usage: crash_test.sh BATON SOURCE_DIR   (CRASH_CASES="long burst burst-twice": which)
set -uo pipefail
baton=$1
src=$2
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
probe="$(dirname "$0")/crash_probe.py"

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-crash.XXXXXX")
server_pid=
stop_all() {
  [[ -n $server_pid ]] && stop_pids "$server_pid"
  keep_logs crash-logs
  rm -rf "$work_dir"
}
trap stop_all EXIT
trap "exit 143" TERM INT HUP

# launch NAME: `baton run standalone` on $port with its data in $work_dir/NAME-data and its
# log in NAME.log (appended); sets server_pid, does not wait.
launch() {
  # Eight tasks at once: more of them are running when the kill comes.
  "$baton" run standalone --address "127.0.0.1:$port" --data-dir "$work_dir/$1-data" \
    --queue default:8 >>"$work_dir/$1.log" 2>&1 &
  server_pid=$!
}

# up NAME: launch, then wait for /health.
up() {
  launch "$1"
  await_health "$url" "$server_pid" "$1: the server"
}

kill9() {
  kill -KILL "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=
}

# wait_running ID N: until job ID has N task rows, one of them RUNNING.
wait_running() {
  local deadline=$((SECONDS + 60))
  until http GET "/jobs/$1" &&
    [[ $(js "$body" 'len(j["execution"]) == '"$2"' and any(t["state"] == "RUNNING" for t in j["execution"])') == true ]]; do
    ((SECONDS > deadline)) && return 1
    sleep 0.05
  done
}

# ---- 1. four kills under one task ----
case_long_task() {
  local marks=$work_dir/long kills=4 id k
  mkdir -p "$marks"
  port=$(free_port)
  url=http://127.0.0.1:$port
  # Each attempt notes its start, runs about 6 s and notes its end.
  cat >"$work_dir/long.yaml" <<EOF
name: crash long
tasks:
  - name: long
    run: |
      echo \$\$ >> $marks/started
      sleep 6
      echo \$\$ >> $marks/ended
EOF
  up long
  id=$(submit "$work_dir/long.yaml") || { fail "long: submit"; return; }
  for ((k = 1; k <= kills; k++)); do
    wait_lines "$marks/started" "$k" 60 || { fail "long: attempt $k did not start"; return; }
    # Its row RUNNING (the start stored, not only the process begun): the kill is charged
    # to the task, if to anything.
    wait_running "$id" "$k" || { fail "long: attempt $k is not RUNNING"; return; }
    kill9
    # What an earlier run left is killed by the restart; here the attempt is cut short.
    up long
  done
  wait_done "$id" 60
  http GET "/jobs/$id"
  expect "long: the job after $kills kills" "$(js "$body" 'j["state"] + " " + j.get("error", "")')" "COMPLETED "
  expect "long: attempts started" "$(wc -l <"$marks/started")" $((kills + 1))
  expect_match "long: attempts that ran to their end" "$(cat "$marks/ended" 2>/dev/null | wc -l)" '^[1-9]'
  expect "long: its rows (one per attempt)" "$(js "$body" 'len(j["execution"])')" $((kills + 1))
  kill9
}

# ---- 2. and 3. a burst of submissions ----
# case_burst NAME COUNT KILL_AFTER SECOND_KILL: posts COUNT jobs, kills the server after
# KILL_AFTER are acknowledged; with SECOND_KILL=1 kills the restarted server 0.3 s after
# it was launched; then restarts it and checks every acknowledged job.
case_burst() {
  local name=$1 count=$2 kill_after=$3 second=$4 marks=$work_dir/$1-marks
  mkdir -p "$marks"
  port=$(free_port)
  url=http://127.0.0.1:$port
  up "$name"
  python3 "$probe" burst "$url" "$marks" "$count" "$kill_after" "$server_pid" \
    "$work_dir/$name.acked" || { fail "$name: the burst"; return; }
  wait "$server_pid" 2>/dev/null
  server_pid=
  if ((second)); then
    # The recovery starts once the new run's worker has started (the reconcile follows it
    # at once, before the API answers): killed again 0.3 s into it.
    local workers
    workers=$(grep -c "worker started" "$work_dir/$name.log")
    launch "$name"
    local deadline=$((SECONDS + 60))
    until (($(grep -c "worker started" "$work_dir/$name.log") > workers)); do
      ((SECONDS > deadline)) && { fail "$name: the restart did not start its worker"; return; }
      sleep 0.02
    done
    sleep 0.3
    curl -sf "$url/health" >/dev/null 2>&1 && echo "note: $name: the recovery was over within 0.3 s"
    kill9
    echo "$name: killed again 0.3 s into the recovery"
  fi
  up "$name"
  local out
  out=$(python3 "$probe" check "$url" "$marks" "$work_dir/$name.acked" 120)
  local rc=$?
  echo "$out" | tail -n 20
  ((rc == 0)) && pass "$name: every acknowledged job completed, each task ran" ||
    fail "$name: $(echo "$out" | tail -n 1)"
  kill9
}

# CRASH_CASES picks cases (default: all), to hunt one.
for c in ${CRASH_CASES:-long burst burst-twice}; do
  case $c in
    long) case_long_task ;;
    burst) case_burst burst 300 120 0 ;;
    burst-twice) case_burst burst-twice 300 120 1 ;;
    *) fail "unknown case $c" ;;
  esac
done
finish crash
