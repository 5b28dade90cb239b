#!/usr/bin/env bash
# The HTTP server of the real binary: a second server on a busy address refuses to start
# (exit 2, "address already in use") and the first goes on; waiting submissions and
# clients that send their headers slowly do not stop the API answering others; a restart
# binds at once while the old connections sit in TIME_WAIT; idle, slow, huge-body and
# waiting clients by the hundred do not delay GET /health; Range headers are ignored.
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

# --- Clients that hold connections hold no thread: while each of these goes on, a client
# doing GET /health every 100 ms is answered within a second, never refused. 2,000 idle
# connections; 12 that send their headers a byte at a time; 8 announcing a 1 GB body and
# sending nothing (each gets its 413 within a second, from the headers); 300 waiting
# submissions (on a queue no worker takes, so they wait out their 5 s timeout: 408).
hostile=$(python3 - "${address%:*}" "${address##*:}" <<'PY'
import resource, socket, sys, threading, time
host, port = sys.argv[1], int(sys.argv[2])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
polls, refused, slowest, stop = [0], [0], [0.0], [False]
def poll_health():
    while not stop[0]:
        start = time.monotonic()
        try:
            s = socket.create_connection((host, port), timeout=1)
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            reply = b""
            while True:
                b = s.recv(4096)
                if not b: break
                reply += b
            s.close()
            if not reply.startswith(b"HTTP/1.1 200 "): refused[0] += 1
        except OSError:
            refused[0] += 1
        slowest[0] = max(slowest[0], time.monotonic() - start)
        polls[0] += 1
        time.sleep(0.1)
poller = threading.Thread(target=poll_health)
poller.start()
idle = [socket.create_connection((host, port)) for _ in range(2000)]
time.sleep(1.5)
slow = [socket.create_connection((host, port)) for _ in range(12)]
def send(s, data):
    try:
        s.sendall(data)
    except OSError:
        pass  # refused or closed by the server: the poll counts say so
for s in slow: send(s, b"GET /health HTTP/1.1\r\nHo")
for _ in range(15):
    for s in slow: send(s, b"X")
    time.sleep(0.1)
late413 = 0
huge = [socket.create_connection((host, port)) for _ in range(8)]
for s in huge:
    send(s, b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: text/yaml\r\nContent-Length: 1000000000\r\n\r\n")
for s in huge:
    s.settimeout(1)
    try:
        if not s.recv(4096).startswith(b"HTTP/1.1 413 "): late413 += 1
    except OSError:
        late413 += 1
body = b"name: parked\nwait: {timeout: 5s}\ntasks:\n  - {name: t, run: 'true', queue: nowhere}\n"
req = b"POST /jobs HTTP/1.1\r\nHost: x\r\nContent-Type: text/yaml\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
waits = [socket.create_connection((host, port)) for _ in range(300)]
for s in waits: send(s, req)
timed_out = 0
for s in waits:
    s.settimeout(15)
    try:
        if s.recv(4096).startswith(b"HTTP/1.1 408 "): timed_out += 1
    except OSError:
        pass
stop[0] = True
poller.join()
print(polls[0], refused[0], "%.3f" % slowest[0], late413, timed_out)
PY
)
read -r polls refused slowest late413 timed_out <<<"$hostile"
expect "GET /health was polled throughout" "$((polls > 40))" 1
expect "no /health poll was refused or took a second" "$refused" 0
expect "the slowest /health took under a second" "$(python3 -c "print(int(${slowest:-9} < 1))")" 1
expect "each huge Content-Length got its 413 within a second" "$late413" 0
expect "all 300 parked waits were answered 408 at their timeout" "$timed_out" 300

# --- Range: ignored. 2,600 ranges get the normal 200 body, not a multipart 206.
ranges="bytes=0-$(printf ',0-%.0s' $(seq 2599))"
normal=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' "$url/jobs?size=100")
ranged=$(curl -s -o /dev/null -w '%{http_code} %{size_download}' -H "Range: $ranges" "$url/jobs?size=100")
expect "GET /jobs?size=100 with 2,600 ranges is the normal 200 response" "$ranged" "$normal"

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

finish 14
