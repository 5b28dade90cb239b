#!/usr/bin/env bash
# End to end: webhooks through the outbox of `baton run standalone`, against a receiver on
# loopback (webhook_receiver.py). Job and task state changes call their webhooks with the
# summary as the body, templated headers, the `if` honoured, an idempotency id and an
# HMAC-SHA256 signature over the time, the id and the body (the webhook's key, else the
# key the first start made in the data directory), which webhook_verify.py (the
# receiver's check docs/webhooks.md shows) accepts once and refuses when replayed; 5xx is
# retried with backoff, a 410 and an unreachable host fail and show so in GET
# /jobs/{id}/webhooks; loopback, link-local and unspecified addresses not allowed by
# webhooks.allowed_networks are refused by policy, alike whether a port listens or not;
# an `if` in Tork's Go field names (job.State) works; job.Progress carries the job's
# summary as its progress moves; a job deleted while its
# receiver is down still has its call made when the receiver is back;
# after `kill -9` of the engine in the middle of a call, the call is made again with the
# same id once it restarts, and every event reaches the receiver (deduped by id) once.
# Usage: webhooks_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"

hooks=$(mktemp -d "${TMPDIR:-/tmp}/baton-e2e-hooks.XXXXXX")
python3 "$src/tests/e2e/webhook_receiver.py" "$hooks" &
receiver=$!
for _ in $(seq 100); do [[ -f $hooks/port ]] && break; sleep 0.05; done
hook=http://127.0.0.1:$(cat "$hooks/port")

export BATON_WEBHOOKS_BACKOFF=100ms BATON_WEBHOOKS_MAX_ATTEMPTS=3
# The receiver is on loopback: allowed explicitly (the one address), as a deployment
# with a receiver on its own host or network must.
export BATON_WEBHOOKS_ALLOWED_NETWORKS=127.0.0.1/32
export BATON_WEBHOOKS_ALLOWED_HOSTS="127.0.0.1, 0.0.0.0, 169.254.169.254, ::1"
unset BATON_WEBHOOKS_SECRET BATON_WEBHOOKS_ALLOW_PRIVATE
start_server
trap 'stop_server; kill $receiver 2>/dev/null; rm -rf "$hooks"' EXIT

# raw_calls PYTHON_EXPR: evaluates EXPR with `calls`, every call the receiver got in
# order, each {"path", "h": headers by lowercase name, "raw": the body as sent, "body":
# it parsed}; verified(call, key): webhook_verify.py accepts it (with its own memory of
# ids); check(call, key, seen, now): what webhook_verify.py says of it.
raw_calls() {
  python3 -c '
import json, sys
sys.path.insert(0, sys.argv[3])
from webhook_verify import verify
calls = []
for line in open(sys.argv[1]):
    c = json.loads(line)
    c["h"] = {k.lower(): v for k, v in c["headers"].items()}
    c["raw"] = c["body"]
    c["body"] = json.loads(c["body"])
    calls.append(c)
def check(c, key, seen, now=None):
    return verify(key.encode(), c["h"], c["raw"].encode(), seen, now)
def verified(c, key):
    return check(c, key, set()) == ""
v = eval(sys.argv[2])
print(v if isinstance(v, str) else json.dumps(v))
' "$hooks/calls.jsonl" "$1" "$src/tests/e2e"
}

# wait_delivered ID [SECONDS]: until none of job ID's deliveries is PENDING; leaves them in
# `body`.
wait_delivered() {
  local deadline=$((SECONDS + ${2:-30})) pending
  while true; do
    http GET "/jobs/$1/webhooks"
    pending=$(js "$body" 'len([d for d in j if d["state"] == "PENDING"])')
    [[ $pending == 0 ]] && return 0
    ((SECONDS > deadline)) && { echo "job $1: $pending deliveries still pending" >&2; return 1; }
    sleep 0.1
  done
}

# ---- a job's and its tasks' state changes
post_yaml <<EOF
name: hooked
secrets: {token: t0k3n-value, hook: per-job-key}
webhooks:
  - url: $hook/ok/job
    headers: {Authorization: "Bearer {{ secrets.token }}"}
    secret: "{{ secrets.hook }}"
  - url: $hook/ok/done
    if: "{{ job.state == 'COMPLETED' }}"
  - url: $hook/ok/tork
    if: "{{ job.State == 'COMPLETED' && job.ID != '' }}"
  - url: $hook/ok/task
    event: task.StateChange
tasks:
  - name: first
    run: echo one
  - name: second
    run: echo two
EOF
expect "a job with webhooks is accepted" "$status" 200
job=$(js "$body" 'j["id"]')
wait_done "$job" || fail "the hooked job did not finish"
wait_delivered "$job" || fail "its deliveries did not end"
api=$body
expect "every delivery is DELIVERED at the first attempt" \
  "$(js "$api" '[(d["state"], d["attempts"]) for d in j if d["state"] != "DELIVERED" or d["attempts"] != 1]')" "[]"
expect "GET /jobs/{id}/webhooks shows a 200 for each" \
  "$(js "$api" 'sorted({a["statusCode"] for d in j for a in d["history"]})')" "[200]"
# Deliveries are sent by several threads: in no fixed order (the body says when).
expect "the job's webhook got each state it was stored in, once" \
  "$(raw_calls 'sorted(c["body"]["state"] for c in calls if c["path"] == "/ok/job")')" '["COMPLETED", "RUNNING", "SCHEDULED"]'
expect "its header was evaluated against the secrets" \
  "$(raw_calls 'sorted({c["h"]["authorization"] for c in calls if c["path"] == "/ok/job"})')" '["Bearer t0k3n-value"]'
expect "its calls are signed with the webhook's own key" \
  "$(raw_calls 'all(verified(c, "per-job-key") for c in calls if c["path"] == "/ok/job")')" "true"
expect "the body is the job summary, no secret in it" \
  "$(raw_calls '[c["raw"].find("t0k3n") for c in calls if c["path"] == "/ok/job"] + [sorted(set(calls[0]["body"]) & {"context", "secrets", "tasks"})]')" '[-1, -1, -1, []]'
expect "the webhook with an if was called once, on COMPLETED" \
  "$(raw_calls '[c["body"]["state"] for c in calls if c["path"] == "/ok/done"]')" '["COMPLETED"]'
default_key=$(grep -v '^#' "$data_dir/webhooks.key" 2>/dev/null)
expect "the first start made the webhooks' key, readable by its owner only" \
  "$(stat -c %a "$data_dir/webhooks.key" 2>&1)" 600
expect "Tork's Go field names work in an if: called once, on COMPLETED" \
  "$(raw_calls '[c["body"]["state"] for c in calls if c["path"] == "/ok/tork"]')" '["COMPLETED"]'
expect "a webhook without a key of its own is signed with that key" \
  "$(raw_calls "[c['path'] for c in calls if not verified(c, '$default_key')]")" '["/ok/job", "/ok/job", "/ok/job"]'
expect "the receiver's check accepts a call once, and refuses it replayed, late or altered" \
  "$(raw_calls "(lambda c, seen: [check(c, '$default_key', seen), check(c, '$default_key', seen), check(c, '$default_key', set(), int(c['h']['x-baton-signature'][2:12]) + 301), check(dict(c, raw=c['raw'] + ' '), '$default_key', set()), check(c, 'another-key', set())])([c for c in calls if c['path'] == '/ok/done'][0], set())")" \
  '["", "already seen", "outside the replay window", "bad signature", "bad signature"]'
expect "the signature is t=<unix seconds>,v1=<64 hex digits>" \
  "$(raw_calls '[c["path"] for c in calls if not __import__("re").fullmatch(r"t=[0-9]{10},v1=[0-9a-f]{64}", c["h"].get("x-baton-signature", ""))]')" "[]"
expect "task.StateChange reached every task's end, with the task summary" \
  "$(raw_calls "sorted((c['body']['name'], c['body']['jobId'] == '$job') for c in calls if c['path'] == '/ok/task' and c['body']['state'] == 'COMPLETED')")" \
  '[["first", true], ["second", true]]'
expect "each call carries its delivery's id, the same as Idempotency-Key, all different" \
  "$(raw_calls 'len({c["h"]["x-baton-delivery"] for c in calls}) == len(calls) and all(c["h"]["x-baton-delivery"] == c["h"]["idempotency-key"] for c in calls)')" "true"
expect "the ids the receiver saw are the deliveries the API lists" \
  "$(raw_calls 'sorted(c["h"]["x-baton-delivery"] for c in calls)')" "$(js "$api" 'sorted(d["id"] for d in j)')"
expect "each call names its event" \
  "$(raw_calls 'sorted({(c["path"], c["h"]["x-baton-event"]) for c in calls})')" \
  '[["/ok/done", "job.StateChange"], ["/ok/job", "job.StateChange"], ["/ok/task", "task.StateChange"], ["/ok/tork", "job.StateChange"]]'
http GET "/jobs/$job/webhooks"
expect "the API shows neither headers nor keys" "$(js "$body" 'sorted({k for d in j for k in d} & {"headers", "secret", "body"})')" "[]"

# ---- job.Progress (Tork's event): the job's summary on each move of its progress
post_yaml <<EOF
name: progressing
webhooks:
  - {url: "$hook/ok/progress", event: job.Progress}
tasks:
  - name: half
    run: echo 50 > \$BATON_PROGRESS; sleep 1
  - name: whole
    run: "true"
EOF
progressing=$(js "$body" 'j["id"]')
wait_done "$progressing" || fail "the progressing job did not finish"
wait_delivered "$progressing" || fail "its deliveries did not end"
# As Tork: 50% of the first of two tasks is 25; the first done, the job is at 50.
expect "job.Progress was called with the job's summary on each move of its progress" \
  "$(raw_calls "sorted((c['body']['id'] == '$progressing', c['body']['state'], c['body']['progress'], c['h']['x-baton-event']) for c in calls if c['path'] == '/ok/progress')")" \
  '[[true, "RUNNING", 25.0, "job.Progress"], [true, "RUNNING", 50.0, "job.Progress"]]'

# ---- retries and failures
post_yaml <<EOF
name: flaky
webhooks:
  - {url: "$hook/flaky", if: "{{ job.state == 'COMPLETED' }}"}
  - {url: "$hook/gone", if: "{{ job.state == 'COMPLETED' }}"}
  - {url: "http://127.0.0.1:1/nothing-listens", if: "{{ job.state == 'COMPLETED' }}"}
  - {url: "http://localhost.invalid/x", if: "{{ job.state == 'COMPLETED' }}"}
  - {url: "http://0.0.0.0:${hook##*:}/refused-listening", if: "{{ job.state == 'COMPLETED' }}"}
  - {url: "http://0.0.0.0:1/refused-closed", if: "{{ job.state == 'COMPLETED' }}"}
  - {url: "http://169.254.169.254/latest/meta-data", if: "{{ job.state == 'COMPLETED' }}"}
  - {url: "http://[::1]:${hook##*:}/refused-v6", if: "{{ job.state == 'COMPLETED' }}"}
tasks:
  - {name: t, run: "true"}
EOF
flaky=$(js "$body" 'j["id"]')
wait_done "$flaky" || fail "the flaky job did not finish"
wait_delivered "$flaky" || fail "its deliveries did not end"
by_url() { js "$body" "[(d['state'], d['attempts'], [a['statusCode'] for a in d['history']], d.get('error', '')) for d in j if d['url'].endswith('$1')]"; }
expect "500, 500, then 200: delivered at the third attempt" "$(by_url /flaky)" '[["DELIVERED", 3, [500, 500, 200], ""]]'
expect "a 410 fails at once" "$(by_url /gone)" '[["FAILED", 1, [410], "the receiver answered 410"]]'
expect_match "a port where nothing listens is tried webhooks.max_attempts times, then FAILED" \
  "$(by_url /nothing-listens)" '^\[\["FAILED", 3, \[0, 0, 0\], "gave up after 3 attempts: .+"\]\]$'
expect "a host not in webhooks.allowed_hosts is never called" \
  "$(by_url /x)" '[["FAILED", 1, [0], "refused by policy: the host localhost.invalid is not in webhooks.allowed_hosts"]]'
refused='refused by policy: the address is %s (allowed only by webhooks.allow_private or webhooks.allowed_networks)'
# 0.0.0.0 reaches this host on Linux: the receiver listens behind it.
expect "an unspecified address is refused at once, though the receiver listens behind it" \
  "$(by_url /refused-listening)" "[[\"FAILED\", 1, [0], \"$(printf "$refused" unspecified)\"]]"
expect "a closed port behind a refused address says the same (no port scanner)" \
  "$(by_url /refused-closed)" "[[\"FAILED\", 1, [0], \"$(printf "$refused" unspecified)\"]]"
expect "the metadata address is refused as link-local" \
  "$(by_url /meta-data)" "[[\"FAILED\", 1, [0], \"$(printf "$refused" link-local)\"]]"
expect "IPv6 loopback is refused (only 127.0.0.1/32 is allowed)" \
  "$(by_url /refused-v6)" "[[\"FAILED\", 1, [0], \"$(printf "$refused" loopback)\"]]"
expect "no refused delivery reached the receiver" \
  "$(raw_calls '[c["path"] for c in calls if c["path"].startswith("/refused")]')" "[]"

# ---- refused at submission
post_yaml <<EOF
name: bad event
webhooks:
  - {url: "$hook/ok", event: job.Finished}
tasks:
  - {name: t, run: "true"}
EOF
expect "an unknown event is a 400" "$status" 400
expect_match "naming the field" "$body" 'webhooks\[0\]\.event: \\"job\.Finished\\" is not an event'

# ---- kill -9 in the middle of a call
post_yaml <<EOF
name: held
webhooks:
  - url: $hook/hold
tasks:
  - {name: t, run: "sleep 0.5"}
EOF
held=$(js "$body" 'j["id"]')
for _ in $(seq 200); do [[ -f $hooks/held ]] && break; sleep 0.05; done
[[ -f $hooks/held ]] && pass "the receiver holds the first call" || fail "no call reached /hold"
kill -9 "$server_pid"
wait "$server_pid" 2>/dev/null
"$baton" run standalone --address "${url#http://}" --data-dir "$data_dir" >>"$work_dir/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 600); do curl -sf "$url/health" >/dev/null 2>&1 && break; sleep 0.1; done
touch "$hooks/release"
wait_done "$held" || fail "the held job did not finish after the restart"
wait_delivered "$held" || fail "its deliveries did not end after the restart"
api=$body
expect "after the restart every delivery is DELIVERED" "$(js "$api" 'sorted({d["state"] for d in j})')" '["DELIVERED"]'
first_id=$(raw_calls '[c["h"]["x-baton-delivery"] for c in calls if c["path"] == "/hold"][0]')
expect "the call cut short was made again with the same id" \
  "$(raw_calls "len([c for c in calls if c['h']['x-baton-delivery'] == '$first_id'])")" 2
expect "deduped by id, the receiver got every delivery the API lists, once" \
  "$(raw_calls 'sorted({c["h"]["x-baton-delivery"] for c in calls if c["path"] == "/hold"})')" \
  "$(js "$api" 'sorted(d["id"] for d in j)')"
expect "deduped by id, each state the job was stored in arrived once" \
  "$(raw_calls 'sorted({c["h"]["x-baton-delivery"]: c["body"]["state"] for c in calls if c["path"] == "/hold"}.values())')" \
  '["COMPLETED", "RUNNING", "SCHEDULED"]'

# ---- deliveries outlive their job: deleted while its receiver is down, the call is
# still made once the receiver is back (with the job's secrets redacted)
stop_pids "$server_pid"
wait "$server_pid" 2>/dev/null
BATON_WEBHOOKS_MAX_ATTEMPTS=100 BATON_WEBHOOKS_BACKOFF=200ms BATON_WEBHOOKS_MAX_BACKOFF=200ms \
  "$baton" run standalone --address "${url#http://}" --data-dir "$data_dir" >>"$work_dir/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 600); do curl -sf "$url/health" >/dev/null 2>&1 && break; sleep 0.1; done
down_port=$(free_port)
post_yaml <<EOF
name: outlived
description: says outlived-s3cr3t
secrets: {k: outlived-s3cr3t}
webhooks:
  - {url: "http://127.0.0.1:$down_port/late", if: "{{ job.state == 'COMPLETED' }}"}
tasks:
  - {name: t, run: "true"}
EOF
gone=$(js "$body" 'j["id"]')
wait_done "$gone" || fail "the outlived job did not finish"
deadline=$((SECONDS + 30))
while http GET "/jobs/$gone/webhooks"; [[ $(js "$body" 'j[0]["attempts"] if j else 0') -lt 1 ]]; do
  ((SECONDS > deadline)) && break
  sleep 0.1
done
expect "its receiver down, the delivery is PENDING after a failed attempt" \
  "$(js "$body" '[d["state"] for d in j]')" '["PENDING"]'
http DELETE "/jobs/$gone"
expect "the job is deleted" "$status" 200
http GET "/jobs/$gone"
expect "the job is gone" "$status" 404
late=$(mktemp -d "${TMPDIR:-/tmp}/baton-e2e-late.XXXXXX")
python3 "$src/tests/e2e/webhook_receiver.py" "$late" "$down_port" &
late_receiver=$!
for _ in $(seq 300); do [[ -s $late/calls.jsonl ]] && break; sleep 0.05; done
# late_calls PYTHON_EXPR: EXPR over `calls`, what the late receiver got.
late_calls() {
  python3 -c '
import json, os, sys
calls = [json.loads(l) for l in open(sys.argv[1])] if os.path.exists(sys.argv[1]) else []
print(json.dumps(eval(sys.argv[2])))' "$late/calls.jsonl" "$1"
}
expect "the delivery came once the receiver was back, for the deleted job" \
  "$(late_calls '[(c["path"], json.loads(c["body"])["id"], json.loads(c["body"])["state"]) for c in calls]')" \
  "[[\"/late\", \"$gone\", \"COMPLETED\"]]"
expect "its body has the job's secret redacted" \
  "$(late_calls '[("outlived-s3cr3t" in c["body"], "[REDACTED]" in c["body"]) for c in calls]')" '[[false, true]]'
kill "$late_receiver" 2>/dev/null
wait "$late_receiver" 2>/dev/null
rm -rf "$late"

finish webhooks
