#!/usr/bin/env bash
# The HTTP server of the real binary: a second server on a busy address refuses to start
# (exit 2, "address already in use") and the first goes on; waiting submissions and
# clients that send their headers slowly do not stop the API answering others; a restart
# binds at once while the old connections sit in TIME_WAIT.
# Usage: server_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"
# Enough slots that the twelve `sleep 5` jobs below run at once.
export BATON_WORKER_QUEUES=default:16
start_server
address=${url#http://}

# --- A second server on the same address.
second_log=$work_dir/second.log
timeout 20 "$baton" run standalone --address "$address" --data-dir "$work_dir/data2" \
  >"$second_log" 2>&1
code=$?
expect "a second server on $address exits 2" "$code" 2
expect_match "it says the address is in use" "$(cat "$second_log")" "$address.*address already in use"
http GET /health
expect "the first server still answers /health" "$status" 200

# --- Twelve slow clients, then twelve waiting submissions, then /health: the old server's
# eight threads were all taken by the first eight of them.
# Each slow client sends half a request and then nothing for 30 s.
python3 - "${address%:*}" "${address##*:}" "$work_dir/slow.ready" <<'PY' &
import socket, sys, time
host, port, ready = sys.argv[1], int(sys.argv[2]), sys.argv[3]
conns = []
for _ in range(12):
    s = socket.create_connection((host, port))
    s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
    conns.append(s)
open(ready, "w").close()
time.sleep(30)
PY
slow_pid=$!
deadline=$((SECONDS + 20))
until [[ -e $work_dir/slow.ready ]] || ((SECONDS > deadline)); do sleep 0.1; done
[[ -e $work_dir/slow.ready ]] || fail "the slow clients did not connect"
wait_pids=()
for i in $(seq 12); do
  curl -s --max-time 60 -o "$work_dir/wait$i.json" -w '%{http_code}' \
    -H 'Content-Type: text/yaml' --data-binary @- "$url/jobs" >"$work_dir/wait$i.code" <<EOF &
name: wait-$i
wait: {timeout: 60s}
tasks:
  - {name: nap, run: sleep 8}
EOF
  wait_pids+=($!)
done
# All twelve waits are in (each job is stored before its submission waits), well before
# their jobs can end.
deadline=$((SECONDS + 5))
stored=0
while ((SECONDS < deadline)); do
  stored=$(curl -s --max-time 2 "$url/jobs?size=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["totalItems"])' 2>/dev/null)
  [[ $stored == 12 ]] && break
  sleep 0.1
done
expect "twelve waiting submissions are in" "$stored" 12
health=$(curl -s --max-time 2 -o /dev/null -w '%{http_code}' "$url/health")
expect "GET /health answers within 2s while 12 wait and 12 send slowly" "$health" 200
waiting=0
for pid in "${wait_pids[@]}"; do kill -0 "$pid" 2>/dev/null && waiting=$((waiting + 1)); done
expect "the twelve waits were still waiting then" "$waiting" 12
kill "$slow_pid" 2>/dev/null
wait "$slow_pid" "${wait_pids[@]}"
completed=0
for i in $(seq 12); do
  if [[ $(cat "$work_dir/wait$i.code") == 200 &&
        $(js "$(cat "$work_dir/wait$i.json")" 'j["state"]') == COMPLETED ]]; then
    completed=$((completed + 1))
  fi
done
expect "every waiting submission got its COMPLETED job" "$completed" 12

# --- A restart binds at once although the old server's connections are in TIME_WAIT:
# `Connection: close` makes the server close first, so the TIME_WAIT is on its side.
for i in $(seq 5); do curl -s -o /dev/null -H 'Connection: close' "$url/health"; done
time_wait=$(ss -Htan state time-wait "( sport = :${address##*:} )" 2>/dev/null | wc -l)
kill -TERM "$server_pid"
wait "$server_pid" 2>/dev/null
"$baton" run standalone --address "$address" --data-dir "$data_dir" >>"$work_dir/server.log" 2>&1 &
server_pid=$!
deadline=$((SECONDS + 20))
until curl -sf --max-time 1 "$url/health" >/dev/null 2>&1; do
  kill -0 "$server_pid" 2>/dev/null || break
  ((SECONDS > deadline)) && break
  sleep 0.1
done
http GET /health
expect "a restart with $time_wait connections in TIME_WAIT answers /health" "$status" 200

finish 8
