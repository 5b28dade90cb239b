#!/usr/bin/env bash
# Live events across coordinators, end to end: two `baton run coordinator` and one
# `baton run worker` over the RabbitMQ and PostgreSQL that make test starts. A
# `GET /events` stream opened on coordinator 1 must carry a COMPLETED `job` event for
# every one of 20 jobs submitted to coordinator 2. The coordinators compete for the
# worker's reports, so about half of the decisions that end those jobs are taken by
# coordinator 2: without the relay between them (src/coordinator/event_relay.h) the
# stream would miss those until its reader re-read the state. Also: while no stream is
# open anywhere, nothing is relayed (baton_events_relayed_total in /metrics), and once the
# stream closes, coordinator 2 stops relaying after its want expires.
# Usage: events_distributed_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

needs_services

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-events.XXXXXX")
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

distributed_env baton_events
export BATON_COORDINATOR_LEASE=3s BATON_WORKER_HEARTBEAT=500ms

port1=$(free_port)
port2=$(free_port)
url1=http://127.0.0.1:$port1
url2=http://127.0.0.1:$port2
url=$url1
start_coordinator c1 "$port1"
start_coordinator c2 "$port2"
"$baton" run worker --queue default:4 --data-dir "$work_dir/w1" >>"$work_dir/w1.log" 2>&1 &
pid_of[w1]=$!

# relayed URL DIRECTION MESSAGE: the coordinator's baton_events_relayed_total of that kind.
relayed() {
  curl -s "$1/metrics?format=prometheus" | python3 -c '
import re, sys
direction, message = sys.argv[1], sys.argv[2]
total = 0
for line in sys.stdin:
    m = re.match(r"baton_events_relayed_total\{(.*)\} (\S+)", line)
    if m and f"direction=\"{direction}\"" in m.group(1) and f"message=\"{message}\"" in m.group(1):
        total += float(m.group(2))
print(int(total))' "$2" "$3"
}

# submit_many URL N: submits N one-task jobs to URL and prints their ids, one a line.
submit_many() {
  local saved=$url
  url=$1
  for ((i = 0; i < $2; i++)); do
    post_yaml <<YAML
name: relayed $i
tasks:
  - name: t
    run: echo $i
YAML
    if [[ $status == 200 ]]; then js "$body" 'j["id"]'; else echo "submit: HTTP $status: $body" >&2; fi
  done
  url=$saved
}

# wait_all_done URL IDS...: waits (60 s) for every job to end, through URL.
wait_all_done() {
  local saved=$url id
  url=$1
  shift
  for id in "$@"; do wait_done "$id" 60 >/dev/null || fail "job $id did not end"; done
  url=$saved
}

# Nobody listens: jobs run, nothing is relayed either way.
mapfile -t quiet_ids < <(submit_many "$url2" 5)
expect "5 jobs submitted with no stream open" "${#quiet_ids[@]}" 5
wait_all_done "$url2" "${quiet_ids[@]}"
for c in "$url1" "$url2"; do
  expect "no stream open: $c sent no want" "$(relayed "$c" sent want)" 0
  expect "no stream open: $c sent no changes" "$(relayed "$c" sent changes)" 0
done

# A stream on coordinator 1; coordinator 2 hears its want at once.
curl -sN "$url1/events" >"$work_dir/stream1.txt" 2>/dev/null &
pid_of[stream]=$!
deadline=$((SECONDS + 10))
until (($(relayed "$url2" received want) >= 1)) || ((SECONDS > deadline)); do sleep 0.1; done
expect "coordinator 2 heard the want of coordinator 1's stream" \
  "$(( $(relayed "$url2" received want) >= 1 ))" 1

mapfile -t ids < <(submit_many "$url2" 20)
expect "20 jobs submitted to coordinator 2" "${#ids[@]}" 20
wait_all_done "$url2" "${ids[@]}"

# missing: the ids without a COMPLETED job event on coordinator 1's stream.
missing() {
  python3 - "$work_dir/stream1.txt" "${ids[@]}" <<'PY'
import json, sys
path, ids = sys.argv[1], sys.argv[2:]
done = set()
event = None
for line in open(path, encoding="utf-8", errors="replace"):
    line = line.rstrip("\n")
    if line.startswith("event: "):
        event = line[7:]
    elif line.startswith("data: ") and event == "job":
        data = json.loads(line[6:])
        if data.get("state") == "COMPLETED":
            done.add(data["jobId"])
print(" ".join(i for i in ids if i not in done))
PY
}
deadline=$((SECONDS + 10))
until [[ -z $(missing) ]]; do
  ((SECONDS > deadline)) && break
  sleep 0.2
done
expect "coordinator 1's stream has a COMPLETED job event for each of the 20 jobs" "$(missing)" ""
expect "coordinator 2 relayed changes" "$(( $(relayed "$url2" sent changes) > 0 ))" 1
expect "coordinator 1 received changes" "$(( $(relayed "$url1" received changes) > 0 ))" 1
echo "  coordinator 2 sent $(relayed "$url2" sent changes) change messages; coordinator 1 sent $(relayed "$url1" sent want) wants"

# The stream closes; once its last want is older than 3 want periods (2 s each),
# coordinator 2 relays nothing more.
kill "${pid_of[stream]}"; wait "${pid_of[stream]}" 2>/dev/null; unset "pid_of[stream]"
sleep 10
before=$(relayed "$url2" sent changes)
mapfile -t late_ids < <(submit_many "$url2" 5)
wait_all_done "$url2" "${late_ids[@]}"
expect "no stream open any more: coordinator 2 relays no changes" "$(relayed "$url2" sent changes)" "$before"

finish events_distributed
