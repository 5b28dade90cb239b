#!/usr/bin/env bash
# End to end: GET /metrics of `baton run standalone`, in Tork's JSON and in Prometheus'
# text format, the latter read by the Prometheus client library's own parser
# (python3-prometheus-client): after a completed job, a job whose task fails twice (one
# retry) and a job whose webhook is delivered, the counters say exactly that, every state
# has its gauge, and the node, queue and scheduler metrics are there.
# Usage: metrics_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"

# Debian's python3 holds the parser (a python3 earlier in PATH may not).
parser=/usr/bin/python3
if ! "$parser" -c 'import prometheus_client.parser' 2>/dev/null; then
  echo "FAIL: $parser cannot import prometheus_client (scripts/install-deps.sh installs python3-prometheus-client)"
  exit 1
fi

hooks=$(mktemp -d "${TMPDIR:-/tmp}/baton-e2e-metrics.XXXXXX")
python3 "$src/tests/e2e/webhook_receiver.py" "$hooks" &
receiver=$!
for _ in $(seq 100); do [[ -f $hooks/port ]] && break; sleep 0.05; done
hook=http://127.0.0.1:$(cat "$hooks/port")

# The receiver is on loopback, which webhooks may call only when allowed.
export BATON_WEBHOOKS_ALLOWED_HOSTS=127.0.0.1 BATON_WEBHOOKS_ALLOWED_NETWORKS=127.0.0.1/32
export BATON_WORKER_HEARTBEAT=200ms
start_server
trap 'stop_server; kill $receiver 2>/dev/null; rm -rf "$hooks"' EXIT

post_yaml <<'EOF2'
name: fine
tasks:
  - name: say
    run: echo fine
EOF2
fine=$(js "$body" 'j["id"]')
post_yaml <<'EOF2'
name: flaky
tasks:
  - name: fails
    run: exit 3
    retry: {limit: 1}
EOF2
flaky=$(js "$body" 'j["id"]')
post_yaml <<EOF2
name: hooked
webhooks:
  - url: $hook/ok
    if: "{{ job.state == 'COMPLETED' }}"
tasks:
  - name: say
    run: echo hooked
EOF2
hooked=$(js "$body" 'j["id"]')
wait_done "$fine" 30
wait_done "$flaky" 30
expect "the flaky job failed" "$(js "$body" 'j["state"]')" FAILED
wait_done "$hooked" 30
for _ in $(seq 100); do
  [[ -f $hooks/calls.jsonl ]] && break
  sleep 0.1
done

# scrape: the Prometheus text, parsed; prints {"name{labels}": value} as JSON and fails
# on anything the parser refuses.
scrape() {
  local text
  text=$(curl -s -H 'Accept: text/plain;version=0.0.4;q=0.5,*/*;q=0.1' "$url/metrics") || return 1
  printf '%s' "$text" | "$parser" -c '
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        labels = ",".join("%s=%s" % kv for kv in sorted(s.labels.items()))
        out["%s{%s}" % (s.name, labels)] = s.value
print(json.dumps(out))
'
}

# Wait for the delivery to be recorded and a heartbeat to carry the node's memory.
for _ in $(seq 100); do
  m=$(scrape)
  [[ $(js "$m" 'j.get("baton_webhook_deliveries_total{state=DELIVERED}", 0)') == 1.0 &&
     $(js "$m" 'any(v > 0 for k, v in j.items() if k.startswith("baton_node_memory_bytes{"))') == true ]] && break
  sleep 0.1
done
expect_match "the text parses" "$m" '^\{'
expect "jobs ended COMPLETED" "$(js "$m" 'j["baton_jobs_ended_total{state=COMPLETED}"]')" 2.0
expect "jobs ended FAILED" "$(js "$m" 'j["baton_jobs_ended_total{state=FAILED}"]')" 1.0
expect "attempts failed on default" "$(js "$m" 'j["baton_tasks_ended_total{queue=default,state=FAILED}"]')" 2.0
expect "attempts completed on default" "$(js "$m" 'j["baton_tasks_ended_total{queue=default,state=COMPLETED}"]')" 2.0
expect "one retry" "$(js "$m" 'j["baton_task_retries_total{queue=default}"]')" 1.0
expect "four durations observed" "$(js "$m" 'j["baton_task_duration_seconds_count{queue=default}"]')" 4.0
expect "every duration within the +Inf bucket" "$(js "$m" 'j["baton_task_duration_seconds_bucket{le=+Inf,queue=default}"]')" 4.0
expect "jobs COMPLETED now" "$(js "$m" 'j["baton_jobs{state=COMPLETED}"]')" 2.0
expect "jobs FAILED now" "$(js "$m" 'j["baton_jobs{state=FAILED}"]')" 1.0
expect "no job RUNNING now" "$(js "$m" 'j["baton_jobs{state=RUNNING}"]')" 0.0
expect "task rows FAILED now" "$(js "$m" 'j["baton_tasks{state=FAILED}"]')" 2.0
expect "the webhook delivered once" "$(js "$m" 'j["baton_webhook_deliveries_total{state=DELIVERED}"]')" 1.0
expect "one webhook attempt" "$(js "$m" 'j["baton_webhook_attempts_total{outcome=delivered}"]')" 1.0
expect "the default queue is consumed" "$(js "$m" 'j["baton_queue_consumers{queue=default}"] >= 1')" true
expect "the default queue is empty" "$(js "$m" 'j["baton_queue_messages{queue=default}"]')" 0.0
expect "the node's memory is reported" "$(js "$m" 'any(v > 1e6 for k, v in j.items() if k.startswith("baton_node_memory_bytes{"))')" true
expect "the node's CPU is there" "$(js "$m" 'any(k.startswith("baton_node_cpu_percent{") for k in j)')" true
expect "task completions were decided and timed" "$(js "$m" 'j["baton_scheduler_event_seconds_count{event=Completed}"] >= 2')" true

text_type=$(curl -s -o /dev/null -w '%{content_type}' -H 'Accept: application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5' "$url/metrics")
expect "a scraper's Accept gets the text format" "$text_type" "text/plain; version=0.0.4; charset=utf-8"
text_type=$(curl -s -o /dev/null -w '%{content_type}' "$url/metrics?format=prometheus")
expect "?format=prometheus gets it too" "$text_type" "text/plain; version=0.0.4; charset=utf-8"

# Tork's JSON for everyone else.
http GET /metrics
expect "JSON by default" "$status" 200
expect "no job running" "$(js "$body" 'j["jobs"]["running"]')" 0
expect "no task running" "$(js "$body" 'j["tasks"]["running"]')" 0
expect "the standalone node is online" "$(js "$body" 'j["nodes"]["online"] >= 1')" true
http GET /metrics -H 'Accept: application/json'
expect "JSON when asked" "$(js "$body" 'sorted(j)')" '["jobs", "nodes", "queues", "tasks"]'
# Beyond Tork, for the UI's cards: jobs ended in the last hour, messages waiting.
expect "jobs ended in the last hour, counted" "$(js "$body" 'sorted(j["jobs"])')" \
  '["endedLastHour", "failedLastHour", "running"]'
expect "messages waiting, counted" "$(js "$body" 'j["queues"]["size"] >= 0')" true
http GET '/metrics?format=xml'
expect "an unknown format is a 400" "$status" 400
expect_match "that names the choices" "$(js "$body" 'j["message"]')" 'prometheus or json'

finish 28
