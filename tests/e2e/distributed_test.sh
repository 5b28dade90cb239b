#!/usr/bin/env bash
# Distributed mode end to end: one `baton run coordinator` and two `baton run worker`
# processes over the RabbitMQ and PostgreSQL that make test starts
# (BATON_TEST_RABBITMQ_URL, BATON_TEST_POSTGRES_DSN), driven over HTTP only; as root,
# each process is a host of its own (a network namespace, see netns.sh).
# Usage: distributed_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1
src=$2
examples=$src/examples
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=netns.sh
. "$(dirname "$0")/netns.sh"

needs_services

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-dist.XXXXXX")
pids=()
worker_pids=()
stop_all() {
  stop_pids "${pids[@]}"
  if ((failures)); then tail -n 30 "$work_dir"/*.log; fi
  netns_cleanup
  rm -rf "$work_dir"
}
trap stop_all EXIT
trap "exit 143" TERM INT HUP

distributed_env baton_dist
# Short leases, so the fault cases below take seconds.
export BATON_COORDINATOR_LEASE=3s BATON_WORKER_HEARTBEAT=500ms

# Each process on a host of its own when network namespaces can be made here (tests/e2e/
# netns.sh): the coordinator and the workers reach RabbitMQ and PostgreSQL, and this
# script the API, over veth interfaces.
made=false
if netns_start; then
  made=true
  for h in c w1 w2 gpu; do netns_host "$h" || made=false; done
  $made || { netns_cleanup; netns_ok=false; }
fi
if $made; then
  pass "separate network namespaces: coordinator ${addr_of[c]}, workers ${addr_of[w1]} and ${addr_of[w2]}"
else
  for h in c w1 w2 gpu; do netns_host "$h"; done
  # Loopback hides what only separate hosts show (an address that is only reachable
  # locally): a run without namespaces is not a full pass unless the developer opts out.
  if [[ ${BATON_TEST_ALLOW_SKIP:-} == 1 ]]; then
    echo "note: network namespaces cannot be made here (root, ip and socat needed): processes share loopback (BATON_TEST_ALLOW_SKIP=1)"
  else
    fail "network namespaces cannot be made here (root, ip and socat needed; BATON_TEST_ALLOW_SKIP=1 runs on loopback)"
  fi
fi
# start_on HOST COMMAND...: runs COMMAND on HOST (its namespace), with the service
# addresses as HOST sees them; $! is its PID.
start_on() {
  local host=$1
  shift
  netns_forward "$host" "$BATON_BROKER_RABBITMQ_URL" "$BATON_BROKER_RABBITMQ_MANAGEMENT_URL" \
    "$BATON_DATASTORE_POSTGRES_DSN"
  (
    export BATON_BROKER_RABBITMQ_URL=$(netns_rewrite "$host" "$BATON_BROKER_RABBITMQ_URL")
    export BATON_BROKER_RABBITMQ_MANAGEMENT_URL=$(netns_rewrite "$host" "$BATON_BROKER_RABBITMQ_MANAGEMENT_URL")
    export BATON_DATASTORE_POSTGRES_DSN=$(netns_rewrite "$host" "$BATON_DATASTORE_POSTGRES_DSN")
    netns_run "$host" "$@"
  ) &
}

port=$(free_port)
url=http://${addr_of[c]}:$port
start_on c "$baton" run coordinator --address "${addr_of[c]}:$port" --data-dir "$work_dir/c" >"$work_dir/coordinator.log" 2>&1
pids+=($!)
# Each worker also takes a queue named after it (w1, w2): GET /nodes then says which node
# id is which process.
for w in 1 2; do
  start_on "w$w" "$baton" run worker --queue default:2 --queue "w$w:1" --data-dir "$work_dir/w$w" >"$work_dir/worker$w.log" 2>&1
  pids+=($!)
  worker_pids+=($!)
done
deadline=$((SECONDS + 60))
until curl -sf "$url/health" >/dev/null 2>&1; do
  ((SECONDS > deadline)) && { echo "FAIL: the coordinator did not answer"; cat "$work_dir"/*.log; exit 1; }
  sleep 0.1
done
deadline=$((SECONDS + 30))
until [[ $(curl -s "$url/nodes" | python3 -c 'import json,sys; print(len([n for n in json.load(sys.stdin) if n["name"] == "worker"]))') == 2 ]]; do
  ((SECONDS > deadline)) && { fail "two workers did not register"; break; }
  sleep 0.2
done
pass "coordinator and two workers are up"

id=$(submit "$examples/hello.yaml") && wait_done "$id"
expect "hello: state" "$(js "$body" 'j["state"]')" COMPLETED
expect "hello: result" "$(js "$body" 'j["result"]')" "hello world"

id=$(submit "$examples/parallel.yaml") && wait_done "$id"
expect "parallel: state" "$(js "$body" 'j["state"]')" COMPLETED
expect "parallel: executions" "$(js "$body" 'len(j["execution"])')" 9
expect "parallel: both workers ran tasks" \
  "$(js "$body" 'len({t.get("nodeId") for t in j["execution"] if t.get("nodeId")})')" 2

id=$(submit "$examples/each-results.yaml") && wait_done "$id"
expect "each: state" "$(js "$body" 'j["state"]')" COMPLETED
expect "each: eachTask0" "$(js "$body" 'j["context"]["tasks"]["eachTask0"]')" 1

id=$(submit "$examples/subjob.yaml") && wait_done "$id"
expect "subjob: state" "$(js "$body" 'j["state"]')" COMPLETED

id=$(submit "$examples/retry.yaml") && wait_done "$id"
expect "retry: state" "$(js "$body" 'j["state"]')" FAILED
expect "retry: attempts" "$(js "$body" 'len(j["execution"])')" 3

# Queue routing: a task for `gpu` waits until a worker consuming `gpu` comes, and runs there.
post_yaml <<'JOB'
name: routed
output: "{{ tasks.where }}"
tasks:
  - name: on the gpu queue
    queue: gpu
    var: where
    run: echo -n "$(basename "$(dirname "$(dirname "$PWD")")")" > $TORK_OUTPUT
JOB
id=$(js "$body" 'j["id"]')
sleep 1.5
http GET "/jobs/$id"
expect "routing: no gpu worker, the task waits" "$(js "$body" '[t["state"] for t in j["execution"]]')" '["SCHEDULED"]'
start_on gpu "$baton" run worker --queue gpu:1 --data-dir "$work_dir/gpu" >"$work_dir/worker-gpu.log" 2>&1
pids+=($!)
wait_done "$id" 30
expect "routing: state" "$(js "$body" 'j["state"]')" COMPLETED
expect "routing: ran on the gpu worker" "$(js "$body" 'j["result"]')" gpu
kill -TERM "${pids[-1]}"

# GET /queues: RabbitMQ's own figures for the vhost (sizes and consumers exact, unacked
# sampled by its management API). Eight 2-second tasks on two workers of two slots: four
# run, four wait in `default`, and the full workers stop consuming (their prefetch is
# their free slots: none); the coordinator consumes x-completed.
post_yaml <<'JOB'
name: queue stats
tasks:
  - name: wide
    parallel:
      tasks:
        - {name: s1, run: sleep 2}
        - {name: s2, run: sleep 2}
        - {name: s3, run: sleep 2}
        - {name: s4, run: sleep 2}
        - {name: s5, run: sleep 2}
        - {name: s6, run: sleep 2}
        - {name: s7, run: sleep 2}
        - {name: s8, run: sleep 2}
JOB
id=$(js "$body" 'j["id"]')
queue_view=""
views=()
want='{"default": [4, 0], "x-completed": [0, 1]}'
deadline=$((SECONDS + 15))
while ((SECONDS < deadline)); do
  http GET /queues
  queue_view=$(js "$body" 'dict(sorted((q["name"], [q["size"], q["subscribers"]]) for q in j if q["name"] in ("default", "x-completed")))')
  views+=("$queue_view")
  [[ $queue_view == "$want" ]] && break
  sleep 0.1
done
[[ $queue_view == "$want" ]] || printf 'views seen: %s\n' "${views[@]}" | uniq -c
expect "queues: four wait in default, the coordinator consumes x-completed" "$queue_view" "$want"
expect "queues: unacked is a count" "$(js "$body" 'all(isinstance(q["unacked"], int) for q in j)')" true
wait_done "$id" 60
expect "queue stats: state" "$(js "$body" 'j["state"]')" COMPLETED

# Fault: kill -9 the worker running a long task, the one its task row names (nodeId);
# after the lease the task re-runs on the other worker as a new attempt, and the job
# completes with its result recorded once. The task marks its start in a file: it
# started twice, once on each worker.
declare -A worker_of_node
for w in 1 2; do
  node=$(node_of "$url" "w$w")
  [[ -n $node ]] && worker_of_node[$node]=$w || fail "worker kill: GET /nodes lists no node consuming w$w"
done
marks=$work_dir/slow-marks
post_yaml <<JOB
name: survive a worker
output: "{{ tasks.slow }}"
tasks:
  - name: slow
    var: slow
    run: echo start >> $marks; sleep 3; echo -n done > \$TORK_OUTPUT
JOB
id=$(js "$body" 'j["id"]')
dead=""
deadline=$((SECONDS + 20))
while [[ -z $dead ]] && ((SECONDS < deadline)); do
  dead=$(running_node "$id")
  [[ -n $dead ]] || sleep 0.05
done
victim=${worker_of_node[${dead:-none}]:-}
if [[ -z $dead ]]; then
  fail "worker kill: no task row of the job was RUNNING with a nodeId"
elif [[ -z $victim ]]; then
  fail "worker kill: the RUNNING row's nodeId $dead is neither worker's (GET /nodes)"
else
  # The row turns RUNNING as the worker starts it: wait for its mark before the kill.
  deadline=$((SECONDS + 10))
  until [[ -s $marks ]] || ((SECONDS > deadline)); do sleep 0.05; done
  kill -KILL "${worker_pids[$((victim - 1))]}"
  pass "worker kill: killed worker $victim (node $dead), which its task row names"
  wait_done "$id" 60
  expect "worker kill: state" "$(js "$body" 'j["state"]')" COMPLETED
  expect "worker kill: result" "$(js "$body" 'j["result"]')" done
  expect "worker kill: attempts" "$(js "$body" '[t["state"] for t in j["execution"]]')" '["FAILED", "COMPLETED"]'
  expect_match "worker kill: the lost attempt says why" \
    "$(js "$body" 'j["execution"][0].get("error", "")')" "stopped heartbeating"
  expect "worker kill: the lost attempt ran on the killed node" \
    "$(js "$body" 'j["execution"][0].get("nodeId")')" "$dead"
  other=$((3 - victim))
  other_node=$(for n in "${!worker_of_node[@]}"; do [[ ${worker_of_node[$n]} == "$other" ]] && echo "$n"; done)
  expect "worker kill: the new attempt ran on the other worker" \
    "$(js "$body" 'j["execution"][-1].get("nodeId")')" "$other_node"
  expect "worker kill: the new attempt is a redelivery" \
    "$(js "$body" 'j["execution"][-1].get("redelivered", 0) >= 1')" true
  # (The killed worker's orphaned first attempt may still end: only the starts count.)
  expect "worker kill: the task started twice" "$(grep -c start "$marks")" 2
  # GET /nodes: the dead worker is DOWN (silent for longer than the lease), the other
  # worker and the coordinator UP, with their CPU and task counts.
  http GET /nodes
  expect "nodes: the killed worker is DOWN" \
    "$(js "$body" "[n['status'] for n in j if n['id'] == '$dead']")" '["DOWN"]'
  expect "nodes: the other worker and the coordinator are UP" \
    "$(js "$body" "sorted(n['name'] for n in j if n['status'] == 'UP')")" '["coordinator", "worker"]'
  expect "nodes: CPU and task counts are numbers" \
    "$(js "$body" "all(isinstance(n['cpuPercent'], (int, float)) and isinstance(n['taskCount'], int) for n in j)")" true
fi

finish distributed
