#!/usr/bin/env bash
# Size limits on what clients send (issue 14, items 3 and 8), over the real binary:
# a YAML alias bomb is a quick 413 and stores nothing; a sub-job whose templates make it
# bigger than datastore.max_job_bytes fails its task with the reason; a search of too
# many words or bytes is a 400 stating the limit, never the database's 500.
# Usage: limits_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"
# Small, so that a sub-job can pass it while its parent stays under it.
export BATON_DATASTORE_MAX_JOB_BYTES=65536
start_server

# The issue's bomb: a 3 MB string aliased 100 times (300 MB once expanded).
bomb=$work_dir/bomb.yaml
python3 -c '
import sys
lines = ["name: bomb", "inputs:", "  a: &big " + "x" * (3 * 1000 * 1000)]
lines += ["  b%d: *big" % i for i in range(100)]
lines += ["tasks:", "  - {name: t, run: echo}"]
open(sys.argv[1], "w").write("\n".join(lines) + "\n")
' "$bomb"
start=$SECONDS
# Bounded, so that a server that builds the 300 MB job fails here instead of hanging.
http POST /jobs -H "Content-Type: text/yaml" --max-time 30 --data-binary "@$bomb"
took=$((SECONDS - start))
message=$(js "$body" 'j["message"]')
expect "alias bomb status" "$status" 413
expect_match "alias bomb message" "$message" \
  'expands to more than 8388608 bytes of text \(a YAML alias counts each time it is used\); the limit is api.max_document_bytes'
((took <= 5)) && pass "alias bomb answered in ${took}s" || fail "alias bomb answered in ${took}s"
http GET /jobs
expect "nothing stored" "$(js "$body" 'j["totalItems"]')" 0

# A sub-job built from templates: 4 inputs of 20 KB each, stored twice (its definition
# and its context), is over 64 KiB; the parent (20 KB, twice) is not. (Small, so that
# every response fits in one argument of js.)
python3 -c '
import json, sys
big = "y" * 20000
child = {"name": "child", "inputs": {k: "{{ inputs.big }}" for k in "abcd"},
         "tasks": [{"name": "w", "run": "echo"}]}
json.dump({"name": "parent", "inputs": {"big": big},
           "tasks": [{"name": "spawn", "subjob": child}]}, open(sys.argv[1], "w"))
' "$work_dir/parent.json"
id=$(submit "$work_dir/parent.json")
if [[ -z $id ]]; then
  fail "the parent job was refused: HTTP $status: ${body:0:200}"
else
  wait_done "$id" >/dev/null
  expect "parent of a too-big sub-job" "$(js "$body" 'j["state"]')" FAILED
  expect_match "sub-job size error" "$(js "$body" '[t["error"] for t in j["execution"]][0]')" \
    '^subjob: the job is [0-9]+ bytes as stored \(its definition, tags and context as JSON\); the limit is 65536 \(datastore.max_job_bytes\)$'
fi

# Searches: 1,100 words, 1,100 tag: words, 5,000 bytes; 100 words are fine.
words() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote_plus(" ".join([sys.argv[1]] * int(sys.argv[2])), safe=":"))' "$1" "$2"; }
http GET "/jobs?q=$(words w 1100)"
expect "1,100 words" "$status" 400
expect "1,100 words message" "$(js "$body" 'j["message"]')" "q has 1100 words; the limit is 100"
http GET "/jobs?q=$(words tag:x 1100)"
expect "1,100 tag: words" "$status" 400
http GET "/jobs?q=$(words wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww 100)"
expect "100 words of 50 bytes" "$status" 400
expect "bytes message" "$(js "$body" 'j["message"]')" "q is 5099 bytes; the limit is 4096"
http GET "/jobs?q=$(words parent 100)"
expect "100 words" "$status" 200
expect "100 words find the parent" "$(js "$body" 'j["totalItems"]')" 1
http GET "/jobs?q=%FF%FE"
expect "invalid UTF-8" "$status" 400

http GET /health
expect "still healthy" "$status" 200
finish limits
