#!/usr/bin/env bash
# End to end: Tork's web middleware keys on the real server. middleware.web.bodylimit
# bounds a request body (413 past it, naming the limit); CORS answers a browser's
# preflight and marks answers to an allowed origin only; the rate limit answers 429 past
# a client's rate, and never to GET /health.
# Usage: middleware_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"

export BATON_MIDDLEWARE_WEB_BODYLIMIT=8K
export BATON_MIDDLEWARE_WEB_CORS_ENABLED=true BATON_MIDDLEWARE_WEB_CORS_ORIGINS=https://ui.example
export BATON_MIDDLEWARE_WEB_RATELIMIT_ENABLED=true BATON_MIDDLEWARE_WEB_RATELIMIT_RPS=5
start_server

# ---- body limit
big=$(python3 -c 'print("name: big\ndescription: " + "x" * 20000 + "\ntasks:\n  - {name: t, run: \"true\"}")')
status=$(printf '%s' "$big" | curl -s -o "$work_dir/big.out" -w '%{http_code}' -X POST \
  -H 'Content-Type: text/yaml' --data-binary @- "$url/jobs")
expect "a body over middleware.web.bodylimit is 413" "$status" 413
expect_match "its message says so" "$(cat "$work_dir/big.out")" 'too large|limit'
sleep 1.1  # a fresh bucket for what follows
http POST /jobs -H 'Content-Type: text/yaml' --data-binary $'name: small\ntasks:\n  - {name: t, run: "true"}\n'
expect "a body under it is accepted" "$status" 200

# ---- CORS
sleep 1.1
headers=$(curl -s -D - -o /dev/null -X OPTIONS -H 'Origin: https://ui.example' \
  -H 'Access-Control-Request-Method: POST' -H 'Access-Control-Request-Headers: content-type' \
  "$url/jobs" | tr -d '\r')
expect_match "a preflight is answered 204" "$headers" '^HTTP/1.1 204'
expect_match "for the allowed origin" "$headers" $'\nAccess-Control-Allow-Origin: https://ui.example\n'
expect_match "with the methods" "$headers" $'\nAccess-Control-Allow-Methods: GET, POST, PUT, DELETE, PATCH, OPTIONS\n'
expect_match "and the asked headers" "$headers" $'\nAccess-Control-Allow-Headers: content-type\n'
headers=$(curl -s -D - -o /dev/null -H 'Origin: https://ui.example' "$url/health" | tr -d '\r')
expect_match "an answer to the allowed origin is marked" "$headers" $'\nAccess-Control-Allow-Origin: https://ui.example\n'
headers=$(curl -s -D - -o /dev/null -H 'Origin: https://evil.example' "$url/health" | tr -d '\r')
if [[ $headers == *Access-Control-Allow-Origin* ]]; then
  fail "an answer to another origin is not marked"
else
  pass "an answer to another origin is not marked"
fi

# ---- rate limit: 5 a second per client
sleep 1.1
# Sent at once (curl --parallel): one after another, a loaded machine refills the bucket
# between them.
args=()
for _ in $(seq 12); do args+=(-o /dev/null "$url/queues"); done
codes=$(curl -s -Z --parallel-immediate --parallel-max 12 -w '%{http_code} ' "${args[@]}")
ok=$(grep -o 200 <<<"$codes" | wc -l)
limited=$(grep -o 429 <<<"$codes" | wc -l)
expect "12 requests at once: 5 (or 6, as the bucket refills) pass" "$((ok >= 5 && ok <= 7))" 1
expect "the rest are 429" "$((ok + limited))" 12
# The next refused request (a loaded machine may refill the bucket between two curls).
for _ in $(seq 20); do
  headers=$(curl -s -D - -o /dev/null "$url/queues" | tr -d '\r')
  [[ $headers == "HTTP/1.1 429"* ]] && break
done
expect_match "a 429 says when to come back" "$headers" $'\nRetry-After: 1(\n|$)'
codes=""
for _ in $(seq 12); do codes+="$(curl -s -o /dev/null -w '%{http_code}' "$url/health") "; done
expect "GET /health is never limited" "$(grep -o 200 <<<"$codes" | wc -l)" 12

finish middleware
