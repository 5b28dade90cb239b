#!/usr/bin/env bash
# Distributed mode under faults, end to end: `baton run coordinator` ×2 and `baton run
# worker` ×2 as separate processes over the RabbitMQ and PostgreSQL that make test starts
# (BATON_TEST_RABBITMQ_URL, BATON_TEST_POSTGRES_DSN, BATON_SERVICES_DIR), driven over
# HTTP only. Every task appends "<job id> <task>" to one file, so a task run twice or
# never shows; every job must end COMPLETED with each result once in its context.
#   1. kill -9 the coordinator mid-job and start it again;
#   2. two coordinators, one killed mid-run: the other carries on;
#   3. RabbitMQ stopped for a few seconds and started again;
#   4. 200 jobs of 5 tasks submitted concurrently across both coordinators;
#   5. a task whose workers keep dying fails once `redelivered` reaches its cap.
# Usage: faults_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1
src=$2
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

needs_services BATON_SERVICES_DIR

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-faults.XXXXXX")
runs=$work_dir/runs
touch "$runs"
declare -A pid_of
stop_all() {
  stop_pids "${pid_of[@]}"
  # Whatever happened, RabbitMQ is left running for the other suites.
  "$src/scripts/test-services/rabbitmq.sh" start-app >/dev/null 2>&1
  if ((failures)); then
    # Kept beside where the suite ran (the build's tests/ directory under CTest).
    mkdir -p "$PWD/faults-logs" && cp "$work_dir"/*.log "$PWD/faults-logs/"
    for log in "$work_dir"/*.log; do echo "--- $log (kept in $PWD/faults-logs)"; tail -n 25 "$log"; done
  fi
  rm -rf "$work_dir"
}
trap stop_all EXIT
trap "exit 143" TERM INT HUP

distributed_env baton_faults
# Short leases so the cases take seconds; a lost task is re-queued once, then fails.
export BATON_COORDINATOR_LEASE=3s BATON_WORKER_HEARTBEAT=500ms BATON_COORDINATOR_MAX_REDELIVERIES=1

port1=$(free_port)
port2=$(free_port)
url1=http://127.0.0.1:$port1
url2=http://127.0.0.1:$port2

# start_worker NAME: also consuming a queue named NAME, so GET /nodes says which node id
# is this process.
start_worker() {
  "$baton" run worker --queue default:4 --queue "$1:1" --data-dir "$work_dir/$1" >>"$work_dir/$1.log" 2>&1 &
  pid_of[$1]=$!
}
kill9() {
  kill -KILL "${pid_of[$1]}" 2>/dev/null
  wait "${pid_of[$1]}" 2>/dev/null
  unset "pid_of[$1]"
}

# A job of N sequential tasks, each sleeping S seconds, recording its run and its result.
sequential_job() {
  local name=$1 n=$2 s=$3 i output=""
  for ((i = 1; i <= n; i++)); do output+="{{ tasks.t$i }}"; done
  echo "name: $name"
  echo "output: \"$output\""
  echo "tasks:"
  for ((i = 1; i <= n; i++)); do
    echo "  - name: t$i"
    echo "    var: t$i"
    echo "    env: {JOB: \"{{ job.id }}\"}"
    echo "    run: sleep $s; echo \"\$JOB t$i\" >> $runs; echo -n $i > \$TORK_OUTPUT"
  done
}

# runs_of ID: how many runs the job's tasks recorded, and how many distinct ones.
runs_of() { echo "$(grep -c "^$1 " "$runs") $(grep "^$1 " "$runs" | sort -u | wc -l)"; }

# wait_running_at ID N: until the job runs its N-th top-level step or a later one (a
# moment chosen this way is not missed however slowly this loop polls).
wait_running_at() {
  local deadline=$((SECONDS + 30))
  while ((SECONDS < deadline)); do
    http GET "/jobs/$1"
    [[ $(js "$body" "j['state'] == 'RUNNING' and j['position'] >= $2") == true ]] && return 0
    sleep 0.1
  done
  echo "job $1: never RUNNING at step $2 or later; the job: $body" >&2
  return 1
}

start_coordinator c1 "$port1"
start_worker w1
start_worker w2
url=$url1
deadline=$((SECONDS + 30))
until [[ $(curl -s "$url/nodes" | python3 -c 'import json,sys; print(len([n for n in json.load(sys.stdin) if n["name"] == "worker"]))') == 2 ]]; do
  ((SECONDS > deadline)) && { fail "two workers did not register"; break; }
  sleep 0.2
done
pass "a coordinator and two workers are up"

# 1. kill -9 the coordinator mid-job, start it again.
post_yaml < <(sequential_job "coordinator restart" 6 0.6)
id=$(js "$body" 'j["id"]')
if wait_running_at "$id" 2; then
  kill9 c1
  pass "coordinator restart: killed the coordinator mid-job"
  sleep 2
  start_coordinator c1 "$port1"
  wait_done "$id" 90
  expect "coordinator restart: state" "$(js "$body" 'j["state"]')" COMPLETED
  expect "coordinator restart: result" "$(js "$body" 'j["result"]')" 123456
  expect "coordinator restart: task rows" "$(js "$body" '[t["state"] for t in j["execution"]]')" \
    '["COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED"]'
  expect "coordinator restart: runs (all, distinct)" "$(runs_of "$id")" "6 6"
else
  fail "coordinator restart: the job never got going"
fi

# 2. Two coordinators; the one that took the jobs is killed mid-run.
start_coordinator c2 "$port2"
ids=()
survivor_job() {
  sequential_job "survivor $1" 4 0.8
  echo "  - name: fan"
  echo "    each:"
  echo "      list: \"{{ sequence(0, 4) }}\""
  echo "      concurrency: 2"
  echo "      task:"
  echo "        name: \"e{{ item.value }}\""
  echo "        env: {RUN: \"{{ job.id }} e{{ item.value }}\"}"
  echo "        run: sleep 0.3; echo \"\$RUN\" >> $runs"
}
for k in 1 2 3 4; do
  post_yaml < <(survivor_job "$k")
  ids+=("$(js "$body" 'j["id"]')")
done
# The last job submitted: polling starts as soon as it is accepted, well before it ends.
if wait_running_at "${ids[3]}" 2; then
  kill9 c1
  pass "two coordinators: killed the first mid-run"
else
  fail "two coordinators: the jobs did not start"
fi
url=$url2
for k in 0 1 2 3; do
  wait_done "${ids[$k]}" 90
  expect "two coordinators: job $k state" "$(js "$body" 'j["state"]')" COMPLETED
  expect "two coordinators: job $k result" "$(js "$body" 'j["result"]')" 1234
  expect "two coordinators: job $k runs (all, distinct)" "$(runs_of "${ids[$k]}")" "8 8"
done
[[ -n ${pid_of[c1]:-} ]] || start_coordinator c1 "$port1"

# 3. RabbitMQ stops for a few seconds while a job runs.
url=$url1
post_yaml < <(sequential_job "broker blip" 6 0.8)
id=$(js "$body" 'j["id"]')
if wait_running_at "$id" 2; then
  "$src/scripts/test-services/rabbitmq.sh" stop-app >/dev/null 2>&1 || fail "broker blip: stop_app failed"
  pass "broker blip: RabbitMQ stopped mid-job"
  sleep 4
  "$src/scripts/test-services/rabbitmq.sh" start-app >/dev/null 2>&1 || fail "broker blip: start_app failed"
  pass "broker blip: RabbitMQ started again"
  wait_done "$id" 120
  expect "broker blip: state" "$(js "$body" 'j["state"]')" COMPLETED
  expect "broker blip: result" "$(js "$body" 'j["result"]')" 123456
  expect "broker blip: runs (all, distinct)" "$(runs_of "$id")" "6 6"
  alive=0
  for name in c1 c2 w1 w2; do kill -0 "${pid_of[$name]}" 2>/dev/null && alive=$((alive + 1)); done
  expect "broker blip: every process is still up" "$alive" 4
else
  fail "broker blip: the job never got going"
fi

# 4. 200 jobs of 5 tasks, posted 16 at a time across both coordinators.
started=$SECONDS
report=$(python3 - "$url1" "$url2" "$runs" <<'PY'
import concurrent.futures, json, sys, time, urllib.request
urls, runs = sys.argv[1:3], sys.argv[3]
job = "name: load\ntasks:\n" + "".join(
    f"  - name: t{i}\n    var: t{i}\n    env: {{JOB: \"{{{{ job.id }}}}\"}}\n"
    f"    run: echo \"$JOB t{i}\" >> {runs}; echo -n {i} > $TORK_OUTPUT\n"
    for i in range(1, 6))
def post(k):
    req = urllib.request.Request(urls[k % 2] + "/jobs", data=job.encode(),
                                 headers={"Content-Type": "text/yaml"}, method="POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)["id"]
with concurrent.futures.ThreadPoolExecutor(16) as pool:
    ids = list(pool.map(post, range(200)))
states, contexts = {}, {}
deadline = time.time() + 240
pending = set(ids)
while pending and time.time() < deadline:
    for i in list(pending):
        with urllib.request.urlopen(urls[1] + "/jobs/" + i, timeout=60) as r:
            j = json.load(r)
        if j["state"] in ("COMPLETED", "FAILED", "CANCELLED"):
            states[i] = j["state"]
            contexts[i] = j["context"]["tasks"]
            pending.discard(i)
    time.sleep(0.5)
lines = [l.split() for l in open(runs) if l.split()[0] in set(ids)]
print(json.dumps({
    "jobs": len(ids),
    "completed": sum(1 for s in states.values() if s == "COMPLETED"),
    "unfinished": len(pending),
    "good_contexts": sum(1 for c in contexts.values() if c == {f"t{i}": str(i) for i in range(1, 6)}),
    "runs": len(lines),
    "distinct_runs": len({tuple(l) for l in lines}),
}))
PY
)
echo "load: $report ($((SECONDS - started)) s)"
expect "load: all COMPLETED" "$(js "$report" 'j["completed"]')" 200
expect "load: every context holds its five results" "$(js "$report" 'j["good_contexts"]')" 200
expect "load: every task ran once" "$(js "$report" '[j["runs"], j["distinct_runs"]]')" "[1000, 1000]"

# 5. Both workers die under the same task: re-queued once (the cap), then FAILED.
post_yaml <<JOB
name: doomed
tasks:
  - name: long
    env: {JOB: "{{ job.id }}"}
    run: echo "\$JOB long" >> $runs; sleep 60
JOB
id=$(js "$body" 'j["id"]')
# kill_runner ATTEMPT: waits until attempt ATTEMPT (1-based) of the task runs, then
# kills -9 the worker running it: the one GET /nodes lists with the nodeId of the task's
# RUNNING row; sets `killed` and `killed_node`.
kill_runner() {
  local deadline=$((SECONDS + 30)) node w
  killed=""
  killed_node=""
  while ((SECONDS < deadline)); do
    http GET "/jobs/$id"
    node=$(js "$body" "[t.get('nodeId', '') for t in j['execution'] if t['state'] == 'RUNNING' and len(j['execution']) == $1] + ['']")
    node=$(js "$node" 'j[0]')
    if [[ -n $node ]]; then
      for w in w1 w2; do
        if [[ -n ${pid_of[$w]:-} && $(node_of "$url" "$w") == "$node" ]]; then
          kill9 "$w"
          killed=$w
          killed_node=$node
          return 0
        fi
      done
    fi
    sleep 0.1
  done
  return 1
}
if kill_runner 1; then pass "redelivery cap: killed $killed running the task"; else fail "redelivery cap: the task never ran"; fi
first_node=$killed_node
if kill_runner 2; then pass "redelivery cap: killed $killed running it again"; else fail "redelivery cap: the task was not re-queued"; fi
[[ -n $first_node && $killed_node != "$first_node" ]] && pass "redelivery cap: the second attempt ran on the other worker" ||
  fail "redelivery cap: both attempts on node [$first_node]"
wait_done "$id" 60
expect "redelivery cap: state" "$(js "$body" 'j["state"]')" FAILED
expect "redelivery cap: attempts" "$(js "$body" 'len(j["execution"])')" 2
expect "redelivery cap: the task was started twice (runs, distinct)" "$(runs_of "$id")" "2 1"
expect_match "redelivery cap: the error says why" "$(js "$body" 'j["error"]')" "giving up"

finish faults
