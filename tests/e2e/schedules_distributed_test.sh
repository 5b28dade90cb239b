#!/usr/bin/env bash
# Scheduled jobs with two coordinators over one PostgreSQL (and RabbitMQ, with a worker),
# end to end: three `* * * * *` scheduled jobs, created through either coordinator, run
# for two ticks or more while both coordinators look for due ticks at the same instants;
# every (scheduled job, tick) has exactly one job. Then the coordinator that fired is
# killed with -9 and the other fires the next tick, once.
# Usage: schedules_distributed_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

needs_services

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-sched.XXXXXX")
declare -A pid_of
stop_all() {
  stop_pids "${pid_of[@]}"
  if ((failures)); then
    for log in "$work_dir"/*.log; do echo "--- $log"; tail -n 25 "$log"; done
  fi
  rm -rf "$work_dir"
}
trap stop_all EXIT
trap "exit 143" TERM INT HUP

distributed_env baton_sched
export BATON_COORDINATOR_LEASE=3s BATON_WORKER_HEARTBEAT=500ms
# Each coordinator also sees the scheduled jobs the other made within 2 s.
export BATON_COORDINATOR_SCHEDULES_MAX_IDLE=2s

port1=$(free_port)
port2=$(free_port)
url1=http://127.0.0.1:$port1
url2=http://127.0.0.1:$port2
start_coordinator c1 "$port1"
start_coordinator c2 "$port2"
"$baton" run worker --queue default:4 --data-dir "$work_dir/w1" >>"$work_dir/w1.log" 2>&1 &
pid_of[w1]=$!

sids=()
for k in 1 2 3; do
  url=$url1
  ((k == 2)) && url=$url2
  http POST /scheduled-jobs -H 'Content-Type: text/yaml' --data-binary @- <<YAML
name: every minute $k
schedule: {cron: "* * * * *"}
tasks:
  - name: t
    run: echo tick $k
YAML
  expect "scheduled job $k created" "$status" 200
  sids+=("$(js "$body" 'j["id"]')")
done
url=$url1

# per_tick: for each of our scheduled jobs, the number of jobs fired per tick minute
# ({sid: {minute: count}}), from GET /jobs through coordinator 1.
per_tick() {
  local all="[]" page=1 pages=1
  while ((page <= pages)); do
    http GET "/jobs?size=100&page=$page"
    all=$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1]) + json.loads(sys.argv[2])["items"]))' "$all" "$body")
    pages=$(js "$body" 'j["totalPages"]')
    page=$((page + 1))
  done
  python3 -c '
import json, sys
jobs, sids = json.loads(sys.argv[1]), sys.argv[2].split()
out = {s: {} for s in sids}
for x in jobs:
    s = x.get("schedule", {}).get("id")
    if s in out:
        minute = x["createdAt"][:16]
        out[s][minute] = out[s].get(minute, 0) + 1
print(json.dumps(out))' "$all" "${sids[*]}"
}

# Until each has fired for two ticks.
deadline=$((SECONDS + 150))
while ((SECONDS < deadline)); do
  counts=$(per_tick)
  [[ $(js "$counts" 'min(len(v) for v in j.values())') -ge 2 ]] && break
  sleep 1
done
counts=$(per_tick)
expect "every scheduled job fired at two ticks or more" "$(js "$counts" 'min(len(v) for v in j.values()) >= 2')" true
expect "every tick of every scheduled job fired exactly one job" \
  "$(js "$counts" 'sorted({n for v in j.values() for n in v.values()})')" "[1]"
echo "  jobs per tick: $counts"

# Kill -9 the coordinator that fired the last tick's jobs (either may have); the other
# fires the next tick, once.
before=$(js "$counts" 'sum(len(v) for v in j.values())')
kill -KILL "${pid_of[c1]}"; wait "${pid_of[c1]}" 2>/dev/null; unset "pid_of[c1]"
url=$url2
deadline=$((SECONDS + 75))
while ((SECONDS < deadline)); do
  counts=$(per_tick)
  (( $(js "$counts" 'sum(len(v) for v in j.values())') >= before + 3 )) && break
  sleep 1
done
expect "after kill -9 of one coordinator, the other fired the next tick of each" \
  "$(( $(js "$counts" 'sum(len(v) for v in j.values())') >= before + 3 ))" 1
expect "still exactly one job per tick" \
  "$(js "$counts" 'sorted({n for v in j.values() for n in v.values()})')" "[1]"
for sid in "${sids[@]}"; do http DELETE "/scheduled-jobs/$sid"; done

finish schedules_distributed
