#!/usr/bin/env bash
# End to end: a value that reaches a task through a secret-looking env key written as a
# template (`API_TOKEN: "{{ inputs.token }}"`) appears in no answer of the API (job,
# list, tasks, both log endpoints, the POST answer), in no stored log part, and nowhere
# in the server's own log (at debug level), while the task did see it.
# Usage: secrets_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"
export BATON_LOGGING_LEVEL=debug
start_server

token=e2e-tok-8c1f04d2a7
# The failing task's error carries the last lines of its output, and so the value.
post_yaml <<EOF
name: templated token
inputs: {token: $token}
tasks:
  - name: echo it
    env: {API_TOKEN: "{{ inputs.token }}"}
    run: |
      echo "token is \$API_TOKEN"
      [ "\$API_TOKEN" = "$token" ] && echo "the task saw the value" >&2
      echo -n "got \$API_TOKEN" > \$BATON_OUTPUT
  - name: fail with it
    env: {DB_PASSWORD: "{{ inputs.token }}"}
    run: |
      echo "password \$DB_PASSWORD"
      exit 3
EOF
expect "submitted" "$status" 200
answers=("POST /jobs: $body")
id=$(js "$body" 'j["id"]')
wait_done "$id" 60
expect "the job failed at its second task" "$(js "$body" 'j["state"]')" FAILED
expect "the first task's result" "$(js "$body" 'j["execution"][0]["result"]')" "got [REDACTED]"
expect_match "the second task's error" "$(js "$body" 'j["execution"][1]["error"]')" 'exit code 3.*password \[REDACTED\]'
tasks=$(js "$body" '" ".join(t["id"] for t in j["execution"])')

# Both tasks' logs are stored (the second's may trail its outcome).
deadline=$((SECONDS + 15))
until http GET "/jobs/$id/log"; (($(js "$body" 'j["totalItems"]') >= 3)) || ((SECONDS > deadline)); do
  sleep 0.1
done
log=$(js "$body" '"".join(p["contents"] for p in reversed(j["items"]))')
expect_match "the log shows the line, redacted" "$log" 'token is \[REDACTED\]'
expect_match "the task saw the real value" "$log" 'the task saw the value'

paths=("/jobs/$id" "/jobs/$id/log" "/jobs" "/jobs?q=templated")
for task in $tasks; do paths+=("/tasks/$task" "/tasks/$task/log"); done
for path in "${paths[@]}"; do
  http GET "$path"
  [[ $status == 200 ]] || fail "GET $path: HTTP $status"
  answers+=("GET $path: $body")
done
for answer in "${answers[@]}"; do
  if [[ $answer == *"$token"* ]]; then fail "the value leaks in ${answer%%: *}: ${answer#*: }"; else pass "not in ${answer%%: *}"; fi
done

# The stored log parts themselves (not only what the API shows of them).
stored=$(python3 - "$data_dir/baton.db" "$id" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
print("".join(r[0] for r in db.execute("SELECT contents FROM log_parts WHERE job_id = ?", (sys.argv[2],))))
EOF
)
expect_match "stored log parts are there" "$stored" 'token is \[REDACTED\]'
if [[ $stored == *"$token"* ]]; then fail "the value is in a stored log part"; else pass "not in a stored log part"; fi

# The server's own log, at debug level.
if grep -qF -- "$token" "$work_dir/server.log"; then
  fail "the value is in the server log: $(grep -F -- "$token" "$work_dir/server.log" | head -3)"
else
  pass "not in the server log"
fi

finish "secrets"
