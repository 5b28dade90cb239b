#!/usr/bin/env bash
# End to end: secrets encrypted at rest (docs/security.md#secrets-at-rest). A job whose
# secrets reach a task through secret-looking env keys, a registry password and a webhook
# secret, submitted to the real binary, runs with the plain values, and none of them is in
# the SQLite file or its WAL; the first start made <data_dir>/secrets.key (0600). Then
# `baton secrets rotate` moves everything to a new key, and a server with only the new key
# reads the job back.
# Usage: secrets_at_rest_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"
start_server

job_secret=e2e-rest-job-5d1e9a3b77
task_secret=e2e-rest-task-0c8f2e61d4
hook_secret=e2e-rest-hook-b94a17c3e2
hook_port=$(free_port)
post_yaml <<EOF
name: secrets at rest
secrets: {db: $job_secret, api: $task_secret, hook: $hook_secret}
webhooks:
  - url: http://127.0.0.1:$hook_port/hook
    secret: "{{ secrets.hook }}"
tasks:
  - name: use them
    env:
      DB_PASSWORD: "{{ secrets.db }}"
      API_TOKEN: "{{ secrets.api }}"
    # Not the values themselves in the script (the script is stored as written): their
    # digest, which the test compares.
    run: printf '%s:%s' "\$DB_PASSWORD" "\$API_TOKEN" | sha256sum | cut -c1-64 > \$BATON_OUTPUT
EOF
expect "submitted" "$status" 200
id=$(js "$body" 'j["id"]')
wait_done "$id" 60
expect "the job completed" "$(js "$body" 'j["state"]')" COMPLETED
digest=$(printf '%s:%s' "$job_secret" "$task_secret" | sha256sum | cut -c1-64)
expect "the task saw the plain values" "$(js "$body" 'j["execution"][0]["result"]' | tr -d '\n')" "$digest"

key_file=$data_dir/secrets.key
if [[ -f $key_file ]]; then pass "the first start made $key_file"; else fail "no $key_file"; fi
expect "the key file is its owner's only" "$(stat -c %a "$key_file")" 600
old_id=$(python3 -c 'import base64, hashlib, sys
k = [l.strip() for l in open(sys.argv[1]) if l.strip() and not l.startswith("#")][0]
print(hashlib.sha256(base64.b64decode(k)).hexdigest()[:8])' "$key_file")

# raw_has TEXT: true when TEXT is in the database file or its WAL, as bytes.
raw_has() {
  local f
  for f in "$data_dir/baton.db" "$data_dir/baton.db-wal"; do
    [[ -f $f ]] && grep -qaF -- "$1" "$f" && return 0
  done
  return 1
}
check_raw() {  # check_raw WHEN
  for s in "$job_secret" "$task_secret" "$hook_secret"; do
    if raw_has "$s"; then fail "$1: $s is in the SQLite file or its WAL"; else pass "$1: $s is not stored in plain"; fi
  done
}
if raw_has "$digest"; then pass "the database is readable as bytes (the job's result is in it)"; else fail "the job's result is not in the raw bytes: the check would prove nothing"; fi
check_raw "running"
if raw_has "baton:aes256gcm:$old_id:"; then pass "secrets are sealed under key $old_id"; else fail "no envelope under key $old_id"; fi

# Rotation: a new primary key on the first line of the key file, the old one below it.
stop_pids "$server_pid"
wait "$server_pid" 2>/dev/null
check_raw "stopped"
new_key=$(python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())')
new_id=$(python3 -c 'import base64, hashlib, sys; print(hashlib.sha256(base64.b64decode(sys.argv[1])).hexdigest()[:8])' "$new_key")
{ echo "$new_key"; grep -v '^#' "$key_file"; } >"$key_file.new" && mv "$key_file.new" "$key_file"
out=$("$baton" secrets rotate --data-dir "$data_dir" --batch 1 2>&1)
expect "rotate succeeds" "$?" 0
expect_match "rotate re-encrypted the job, its task and its deliveries" "$out" 'done: [0-9]+ rows read, ([3-9]|[1-9][0-9]+) re-encrypted'
out=$("$baton" secrets rotate --data-dir "$data_dir" 2>&1)
expect_match "a second run has nothing left to do" "$out" 'done: [0-9]+ rows read, 0 re-encrypted'
check_raw "rotated"
if raw_has "baton:aes256gcm:$old_id:"; then fail "a secret is still under the old key $old_id"; else pass "nothing is under the old key"; fi
if raw_has "baton:aes256gcm:$new_id:"; then pass "secrets are sealed under the new key $new_id"; else fail "no envelope under $new_id"; fi

# The old key goes; the server reads everything with the new one alone.
echo "$new_key" >"$key_file"
port=$(free_port)
url=http://127.0.0.1:$port
"$baton" run standalone --address "127.0.0.1:$port" --data-dir "$data_dir" \
  >>"$work_dir/server.log" 2>&1 &
server_pid=$!
deadline=$((SECONDS + 60))
until curl -sf "$url/health" >/dev/null 2>&1 || ((SECONDS > deadline)); do sleep 0.1; done
http GET "/jobs/$id"
expect "the job reads back with the new key alone" "$status" 200
expect "its secrets are still redacted in the API" "$(js "$body" 'j["secrets"]["db"]')" "[REDACTED]"

# A wrong key: rotation refuses, naming the key, never a secret.
python3 -c 'import base64, os; print(base64.b64encode(os.urandom(32)).decode())' >"$work_dir/wrong.key"
out=$(BATON_DATASTORE_ENCRYPTION_KEY_FILE=$work_dir/wrong.key "$baton" secrets rotate --data-dir "$data_dir" 2>&1)
expect "rotation with a wrong key fails" "$?" 1
expect_match "and names the key the data is under" "$out" "$new_id"
for s in "$job_secret" "$task_secret" "$hook_secret"; do
  [[ $out == *"$s"* ]] && fail "the error quotes a secret: $out"
done
if grep -qF -e "$job_secret" -e "$task_secret" -e "$hook_secret" "$work_dir/server.log"; then
  fail "a secret is in the server log"
else
  pass "no secret in the server log"
fi

finish "secrets at rest"
