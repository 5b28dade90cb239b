#!/usr/bin/env bash
# HTTPS end to end: a certificate made here (openssl req -x509), `baton run standalone`
# with BATON_API_TLS_CERT / BATON_API_TLS_KEY, the README's short tour over https (curl
# --cacert, and the baton client with --url https://... --cacert), the UI's page, a
# plain-HTTP request to the TLS port refused cleanly (a 400 or a close, at once), and a
# SIGHUP that swaps the certificate for new connections while an open keep-alive
# connection goes on.
# Usage: https_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$(realpath "$1")
src=$(cd "$2" && pwd)
source "$src/tests/e2e/lib.sh"
command -v openssl >/dev/null || { echo "SKIPPED: no openssl"; exit 77; }

work_dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-https.XXXXXX")
data_dir=$work_dir/data
trap stop_server EXIT
trap "exit 143" TERM INT HUP

# make_cert NAME CN: NAME.crt and NAME.key, self-signed for 127.0.0.1 and localhost.
make_cert() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=$2" \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    -keyout "$work_dir/$1.key" -out "$work_dir/$1.crt" 2>/dev/null
}
make_cert first "baton test first"
make_cert second "baton test second"
# The files the server reads; SIGHUP re-reads them.
cp "$work_dir/first.crt" "$work_dir/server.crt"
cp "$work_dir/first.key" "$work_dir/server.key"

port=$(free_port)
url=https://127.0.0.1:$port
BATON_API_TLS_CERT=$work_dir/server.crt BATON_API_TLS_KEY=$work_dir/server.key \
  "$baton" run standalone --address "127.0.0.1:$port" --data-dir "$data_dir" \
  >"$work_dir/server.log" 2>&1 &
server_pid=$!
cacert=$work_dir/first.crt
deadline=$((SECONDS + 60))
until curl -sf --cacert "$cacert" "$url/health" >/dev/null 2>&1; do
  kill -0 "$server_pid" 2>/dev/null || { echo "FAIL: the server exited:"; cat "$work_dir/server.log"; exit 1; }
  ((SECONDS > deadline)) && { echo "FAIL: no HTTPS answer within 60s"; cat "$work_dir/server.log"; exit 1; }
  sleep 0.1
done
pass "the server answers GET /health over HTTPS"

# http (lib.sh) over TLS.
https() { http "$@" --cacert "$cacert"; }

# --- The README's tour, over https.
https POST /jobs --data-binary "@$src/examples/hello.yaml" -H "Content-Type: text/yaml"
expect "tour: POST /jobs over https" "$status" 200
job_id=$(js "$body" 'j["id"]')
expect "tour: the job is accepted PENDING" "$(js "$body" 'j["state"]')" PENDING
deadline=$((SECONDS + 30))
while https GET "/jobs/$job_id" && [[ ! $(js "$body" 'j["state"]') =~ ^(COMPLETED|FAILED|CANCELLED)$ ]] &&
  ((SECONDS < deadline)); do sleep 0.2; done
expect "tour: GET /jobs/ID: COMPLETED" "$(js "$body" 'j["state"]')" COMPLETED
expect "tour: GET /jobs/ID: its result" "$(js "$body" 'j.get("result")')" "hello world"
https GET "/jobs/$job_id/log"
expect "tour: GET /jobs/ID/log is a page of log parts" "$(js "$body" 'isinstance(j["items"], list)')" true
head=$(curl -sI --cacert "$cacert" "$url/")
expect_match "tour: HEAD / answers 200" "$head" '^HTTP/1.1 200'
expect_match "tour: HEAD / is the UI's page" "$head" $'\nContent-Type: text/html'
page=$(curl -s --cacert "$cacert" "$url/")
expect_match "the UI's index page loads over HTTPS" "$page" '<title>Baton</title>'
bad=$(curl -s -o /dev/null -w '%{http_code}' "$url/health")
expect "curl without the CA refuses the certificate (000)" "$bad" 000

# The baton client over https (its --cacert comes with the client's branch).
out=$("$baton" submit "$src/examples/hello.yaml" --wait --url "$url" --cacert "$cacert" 2>&1)
expect "tour: baton submit --wait over https: exit" "$?" 0
expect_match "tour: baton submit --wait prints the result" "$out" "hello world"
out=$("$baton" submit "$src/examples/parallel.yaml" --follow --url "$url" --cacert "$cacert" 2>/dev/null)
expect "tour: baton submit --follow over https: exit" "$?" 0
expect_match "tour: baton submit --follow streams the log" "$out" "three"
out=$("$baton" jobs list --url "$url" --cacert "$cacert" 2>&1)
expect_match "tour: baton jobs list over https" "$out" "hello job"
out=$("$baton" health --url "$url" --cacert "$cacert" 2>&1)
expect_match "tour: baton health over https says UP" "$out" '^UP'

# --- Plain HTTP to the TLS port: a 400 or a close, at once; never a hang.
plain=$(python3 - "$port" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
start = time.monotonic()
s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
got = b""
try:
    while True:
        b = s.recv(4096)
        if not b:
            break
        got += b
except OSError:
    pass
took = time.monotonic() - start
ok = (got == b"" or got.startswith(b"HTTP/1.1 400 ")) and took < 2
print("refused" if ok else "NOT refused: %r after %.1fs" % (got[:80], took))
PY
)
expect "a plain HTTP request to the TLS port is refused cleanly" "$plain" refused
https GET /health
expect "the server still answers over HTTPS after it" "$status" 200

# --- SIGHUP swaps the certificate for new connections; an open keep-alive one goes on.
reload=$(python3 - "$port" "$work_dir" "$server_pid" <<'PY'
import http.client, os, shutil, signal, ssl, sys, time
port, work, pid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
def context(ca):
    c = ssl.create_default_context(cafile=ca)
    return c
def subject(conn):
    cert = conn.sock.getpeercert()
    return dict(x[0] for x in cert["subject"])["commonName"]
kept = http.client.HTTPSConnection("127.0.0.1", port, context=context(f"{work}/first.crt"), timeout=10)
kept.request("GET", "/health"); r = kept.getresponse(); r.read()
before = subject(kept)
shutil.copy(f"{work}/second.crt", f"{work}/server.crt")
shutil.copy(f"{work}/second.key", f"{work}/server.key")
os.kill(pid, signal.SIGHUP)
fresh_subject = None
deadline = time.monotonic() + 10
while time.monotonic() < deadline:
    try:
        fresh = http.client.HTTPSConnection("127.0.0.1", port, context=context(f"{work}/second.crt"), timeout=5)
        fresh.request("GET", "/health"); fr = fresh.getresponse(); fr.read()
        fresh_subject = subject(fresh)
        fresh.close()
        break
    except (ssl.SSLError, OSError):
        time.sleep(0.1)
kept.request("GET", "/health"); r2 = kept.getresponse(); r2.read()
print(before, "|", fresh_subject, "|", r2.status, "|", subject(kept))
PY
)
expect "SIGHUP: new connections get the new certificate; the open one goes on with the old" \
  "$reload" "baton test first | baton test second | 200 | baton test first"
kill -0 "$server_pid" 2>/dev/null && pass "the server lives after SIGHUP" || fail "SIGHUP killed the server"

finish https
