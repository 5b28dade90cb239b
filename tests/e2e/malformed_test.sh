#!/usr/bin/env bash
# Malformed requests get a 4xx with a JSON `message`, never a 5xx: bad JSON and YAML, wrong
# types, an oversized body, an unsupported content type, unknown ids, bad page numbers.
# Usage: malformed_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"
start_server

# expect_error NAME STATUS [MESSAGE_REGEX]: the last response is STATUS with a message.
expect_error() {
  local message
  message=$(js "$body" 'j["message"]')
  if [[ $status != "$2" ]]; then
    fail "$1: HTTP $status, want $2 (body: ${body:0:200})"
  elif [[ -z $message || $message == \<error* ]]; then
    fail "$1: HTTP $status without a JSON message (body: ${body:0:200})"
  elif [[ -n ${3:-} && ! $message =~ $3 ]]; then
    fail "$1: message [$message] does not match /$3/"
  else
    pass "$1 ($status: ${message:0:80})"
  fi
}

post_json() { http POST /jobs -H "Content-Type: application/json" --data-binary "$1"; }

# Bodies that are not a job.
post_json '{"name": "j", "tasks": ['
expect_error "truncated JSON" 400
post_json 'not json at all'
expect_error "not JSON" 400
post_json '[1, 2, 3]'
expect_error "a JSON array" 400
post_json '{"name": 5, "tasks": "x"}'
expect_error "wrong types" 400 'tasks'
post_json '{"name": "j", "tasks": [{"name": "t", "run": "echo", "retry": {"limit": "two"}}]}'
expect_error "a string for a number" 400 'retry\.limit'
post_json '{"name": "j", "tasks": [{"name": "t", "run": ["echo"]}]}'
expect_error "a list for a string" 400 'run'
post_json ''
expect_error "an empty body" 400
http POST /jobs -H "Content-Type: text/yaml" --data-binary $'name: j\ntasks:\n  - name: [unclosed\n'
expect_error "YAML syntax error" 400
http POST /jobs -H "Content-Type: application/x-yaml" --data-binary $'name: j\ntasks:\n  - {name: t, run: echo, timeout: forever}\n'
expect_error "a bad duration" 400 'timeout'

# Transport-level problems.
big=$work_dir/big.json
python3 -c '
import json, sys
run = "echo " + "x" * (5 * 1024 * 1024)
json.dump({"name": "big", "tasks": [{"name": "t", "run": run}]}, open(sys.argv[1], "w"))
' "$big"
http POST /jobs -H "Content-Type: application/json" --data-binary "@$big"
expect_error "a body over 4 MiB" 413
http POST /jobs -H "Content-Type: text/plain" --data-binary $'name: j\ntasks:\n  - {name: t, run: echo}\n'
expect_error "an unsupported content type" 415
http POST /jobs -H "Content-Type: application/xml" --data-binary '<job/>'
expect_error "XML" 415

# Unknown ids and paths.
unknown=0123456789abcdef0123456789abcdef
http GET "/jobs/$unknown"
expect_error "an unknown job" 404
http GET /jobs/not-an-id
expect_error "a malformed job id" 404
http GET "/jobs/$unknown/log"
expect_error "the log of an unknown job" 404
http PUT "/jobs/$unknown/cancel" --data ""
expect_error "cancel an unknown job" 404
http PUT "/jobs/$unknown/restart" --data ""
expect_error "restart an unknown job" 404
http GET "/tasks/$unknown"
expect_error "an unknown task" 404
http GET "/tasks/$unknown/log"
expect_error "the log of an unknown task" 404

# Bad page numbers and sizes.
for query in 'page=0' 'page=-1' 'page=abc' 'size=0' 'size=101' 'size=abc' 'page=99999999999999999999'; do
  http GET "/jobs?$query"
  expect_error "GET /jobs?$query" 400
done
id=$(submit "$src/examples/hello.yaml")
for query in 'page=0' 'size=101' 'size=x'; do
  http GET "/jobs/$id/log?$query"
  expect_error "GET /jobs/ID/log?$query" 400
done

# A PUT with no body at all, as `curl -X PUT` sends it, is answered at once.
wait_done "$id" >/dev/null
start=$SECONDS
http PUT "/jobs/$id/cancel"
if ((SECONDS - start > 2)); then
  fail "PUT without Content-Length: answered after $((SECONDS - start))s (HTTP $status: $body)"
else
  expect_error "PUT without Content-Length on a COMPLETED job" 400 'COMPLETED'
fi

# Nothing above took the server down.
http GET /health
expect "still healthy" "$status" 200

finish malformed-request
