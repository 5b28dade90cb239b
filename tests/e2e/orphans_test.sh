#!/usr/bin/env bash
# A killed engine's running tasks, end to end: after `kill -9` of the process that runs a
# task, the restarted process kills what is left of the task before it runs the
# redelivered attempt, so the task's effect never happens twice at once.
#   1. `baton run standalone` killed while a shell task loops (always);
#   2. `baton run worker` killed alone, beside `baton run coordinator`, over the RabbitMQ
#      and PostgreSQL that make test starts (skipped without them);
#   3. `baton run standalone` with the Docker runtime (Podman, BATON_TEST_DOCKER_HOST):
#      the task's container is removed before the re-run's starts (skipped without it).
# Each task appends "<its pid> <n>" to a file every 50 ms: the first attempt's lines must
# stop before the second attempt's first line, and the first attempt's process must be
# gone as soon as the second runs.
# Usage: orphans_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1
src=$2
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-orphans.XXXXXX")
declare -A pid_of
stop_all() {
  ((${#pid_of[@]})) && stop_pids "${pid_of[@]}"
  # What a failed check left running.
  for f in "$work_dir"/*/pids; do
    [[ -f $f ]] && while read -r p; do kill -KILL -- "-$p" "$p" 2>/dev/null; done <"$f"
  done
  keep_logs orphans-logs
  rm -rf "$work_dir"
}
trap stop_all EXIT
trap "exit 143" TERM INT HUP

# running PID: the process exists and is not a zombie.
running() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ ${stat:0:1} != Z ]]
}

# start NAME PORT ARGS...: starts `baton ARGS` with its log in NAME.log, waits for
# /health on PORT (none for a worker: PORT empty).
start() {
  local name=$1 port=$2
  shift 2
  "$baton" "$@" >>"$work_dir/$name.log" 2>&1 &
  pid_of[$name]=$!
  [[ -z $port ]] && return 0
  await_health "http://127.0.0.1:$port" "${pid_of[$name]}" "$name"
}

kill9() {
  kill -KILL "${pid_of[$1]}" 2>/dev/null
  wait "${pid_of[$1]}" 2>/dev/null
  unset "pid_of[$1]"
}

# A job whose one task writes its pid to M/pids, then loops COUNT times (60: about 3 s) appending
# "<pid> <n>" to M/runs. Under the Docker runtime $$ is the container's 1: the lines then
# carry the attempt's start time instead.
write_job() {
  local marks=$1 file=$2 count=${3:-60}
  cat >"$file" <<EOF
name: orphans
tasks:
  - name: loop
    run: |
      me=\$\$-\$(date +%s%N)
      echo \$\$ >> $marks/pids
      echo \$me >> $marks/attempts
      n=0
      while [ \$n -lt $count ]; do echo "\$me \$n" >> $marks/runs; n=\$((n + 1)); sleep 0.05; done
EOF
}

# check_runs NAME MARKS: the first attempt wrote nothing once the second had started,
# and both attempts were seen.
check_runs() {
  local name=$1 marks=$2 first second
  first=$(sed -n 1p "$marks/attempts")
  second=$(sed -n 2p "$marks/attempts")
  [[ -n $first && -n $second && $first != "$second" ]] ||
    { fail "$name: two attempts were expected, got [$(cat "$marks/attempts" 2>/dev/null)]"; return; }
  local after
  after=$(awk -v a="$first" -v b="$second" '$1 == b { seen = 1 } seen && $1 == a { n++ } END { print n + 0 }' "$marks/runs")
  expect "$name: lines of the first attempt after the second began" "$after" 0
}

# ---- 1. standalone ----
case_standalone() {
  local marks=$work_dir/standalone port id first
  mkdir -p "$marks"
  write_job "$marks" "$work_dir/job.yaml"
  port=$(free_port)
  url=http://127.0.0.1:$port
  start standalone "$port" run standalone --address "127.0.0.1:$port" --data-dir "$work_dir/sa-data"
  id=$(submit "$work_dir/job.yaml") || { fail "standalone: submit"; return; }
  wait_lines "$marks/runs" 3 || { fail "standalone: the task did not start"; return; }
  first=$(sed -n 1p "$marks/pids")
  kill9 standalone
  running "$first" && pass "standalone: the task outlived kill -9 of the server (what a restart must handle)" ||
    echo "note: the task died with the server"
  start standalone "$port" run standalone --address "127.0.0.1:$port" --data-dir "$work_dir/sa-data"
  # KillLeftovers ran before the worker took the redelivered task: the first attempt is
  # gone by the time the second has written its pid.
  wait_lines "$marks/pids" 2 || { fail "standalone: the task was not run again"; return; }
  running "$first" && fail "standalone: the first attempt (pid $first) still runs beside the second" ||
    pass "standalone: the first attempt is gone once the second runs"
  wait_done "$id" 60
  expect "standalone: the job" "$(js "$body" 'j["state"]')" COMPLETED
  check_runs standalone "$marks"
  grep -q "Killed the processes of tasks that an earlier run left running" "$work_dir/standalone.log" &&
    pass "standalone: the restart says it killed the leftovers" ||
    fail "standalone: no log line about the killed leftovers"
  stop_pids "${pid_of[standalone]}"
  unset "pid_of[standalone]"
}

# ---- 2. a worker killed alone ----
case_worker() {
  if [[ -z ${BATON_TEST_RABBITMQ_URL:-} || -z ${BATON_TEST_POSTGRES_DSN:-} ]]; then
    echo "skipped: worker case (RabbitMQ/PostgreSQL not configured; make test starts them)"
    skipped=1
    return
  fi
  (
    trap '((${#pid_of[@]})) && stop_pids "${pid_of[@]}"' EXIT
    distributed_env baton_orphans
    export BATON_COORDINATOR_LEASE=3s BATON_WORKER_HEARTBEAT=500ms
    local marks=$work_dir/worker port id first
    mkdir -p "$marks"
    # Longer than the redelivery takes (the lease, then a new worker), so that the first
    # attempt would still run when the second starts.
    write_job "$marks" "$work_dir/job-w.yaml" 300
    port=$(free_port)
    url=http://127.0.0.1:$port
    start coordinator "$port" run coordinator --address "127.0.0.1:$port" --data-dir "$work_dir/c-data"
    start worker "" run worker --queue default:1 --data-dir "$work_dir/w-data"
    id=$(submit "$work_dir/job-w.yaml") || { fail "worker: submit"; exit "$failures"; }
    wait_lines "$marks/runs" 3 || { fail "worker: the task did not start"; exit "$failures"; }
    first=$(sed -n 1p "$marks/pids")
    kill9 worker
    running "$first" && pass "worker: the task outlived kill -9 of the worker" ||
      echo "note: the task died with the worker"
    start worker "" run worker --queue default:1 --data-dir "$work_dir/w-data"
    wait_lines "$marks/pids" 2 || { fail "worker: the task was not run again"; exit "$failures"; }
    running "$first" && fail "worker: the first attempt (pid $first) still runs beside the second" ||
      pass "worker: the first attempt is gone once the second runs"
    wait_done "$id" 60
    expect "worker: the job" "$(js "$body" 'j["state"]')" COMPLETED
    check_runs worker "$marks"
    exit "$failures"
  )
  failures=$((failures + $?))
}

# ---- 3. containers ----
case_containers() {
  if [[ -z ${BATON_TEST_DOCKER_HOST:-} ]]; then
    echo "skipped: containers case (BATON_TEST_DOCKER_HOST is not set; with-services.sh sets it)"
    skipped=1
    return
  fi
  local socket=${BATON_TEST_DOCKER_HOST#unix://}
  docker_api() { curl -s --max-time 30 --unix-socket "$socket" "http://d/v1.41$1"; }
  [[ $(docker_api /_ping) == OK ]] || { echo "skipped: containers case (no Docker API answers)"; skipped=1; return; }
  (
    trap '((${#pid_of[@]})) && stop_pids "${pid_of[@]}"' EXIT
    export BATON_RUNTIME_TYPE=docker BATON_RUNTIME_DOCKER_HOST=$BATON_TEST_DOCKER_HOST
    export BATON_RUNTIME_DOCKER_IMAGE=localhost/busybox:latest
    local port id first_container containers
    # The task writes nothing to the host: its container is what is watched.
    cat >"$work_dir/job-c.yaml" <<'EOF'
name: orphans-containers
tasks:
  - name: loop
    run: i=0; while [ $i -lt 40 ]; do echo $i; i=$((i + 1)); sleep 0.1; done
EOF
    port=$(free_port)
    url=http://127.0.0.1:$port
    start docker "$port" run standalone --address "127.0.0.1:$port" --data-dir "$work_dir/d-data"
    id=$(submit "$work_dir/job-c.yaml") || { fail "containers: submit"; exit "$failures"; }
    # containers_of JOB: the ids of the job's containers that run.
    containers_of() {
      docker_api "/containers/json?filters=$(python3 -c 'import json,sys,urllib.parse; print(urllib.parse.quote(json.dumps({"label": ["baton.job=" + sys.argv[1]]})))' "$1")" |
        python3 -c 'import json,sys; print(" ".join(c["Id"] for c in json.load(sys.stdin)))'
    }
    local deadline=$((SECONDS + 60))
    until [[ -n $(containers_of "$id") ]]; do
      ((SECONDS > deadline)) && { fail "containers: the task's container did not start"; exit "$failures"; }
      sleep 0.1
    done
    first_container=$(containers_of "$id")
    kill9 docker
    [[ -n $(containers_of "$id") ]] && pass "containers: the container outlived kill -9 of the server" ||
      echo "note: the container died with the server"
    start docker "$port" run standalone --address "127.0.0.1:$port" --data-dir "$work_dir/d-data"
    local most=0 seen_other=0 n
    deadline=$((SECONDS + 60))
    while ((SECONDS < deadline)); do
      containers=$(containers_of "$id")
      n=$(wc -w <<<"$containers")
      ((n > most)) && most=$n
      [[ -n $containers && $containers != "$first_container" ]] && seen_other=1
      ((seen_other)) && break
      sleep 0.05
    done
    ((seen_other)) || { fail "containers: the task was not run again in a new container"; exit "$failures"; }
    expect "containers: task containers running at once, at most" "$most" 1
    [[ $(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$socket" \
         "http://d/v1.41/containers/$first_container/json") == 404 ]] &&
      pass "containers: the first attempt's container was removed" ||
      fail "containers: the first attempt's container $first_container still exists"
    wait_done "$id" 60
    expect "containers: the job" "$(js "$body" 'j["state"]')" COMPLETED
    exit "$failures"
  )
  failures=$((failures + $?))
}

skipped=0
case_standalone
case_worker
case_containers
# A case that could not run makes the suite a skip (77), which `make test` fails.
((skipped && !failures)) && { echo "some cases were skipped"; exit 77; }
finish orphans
