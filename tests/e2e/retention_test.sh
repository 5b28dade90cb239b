#!/usr/bin/env bash
# End to end: retention and durability settings of `baton run standalone`. A job with
# `autoDelete: {after: 1s}` is there once it completes and gone (job, tasks, logs: 404,
# and no row in the database) after its time, swept every 200 ms; meanwhile a job due in
# an hour and a job without autoDelete stay whole; an unknown datastore.sqlite.synchronous
# stops start-up naming the key.
# Usage: retention_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"

# ---- datastore.sqlite.synchronous: checked before anything starts
scratch=$(mktemp -d "${TMPDIR:-/tmp}/baton-e2e-sync.XXXXXX")
out=$(BATON_DATASTORE_SQLITE_SYNCHRONOUS=sometimes timeout 30 "$baton" run standalone \
  --address "127.0.0.1:$(free_port)" --data-dir "$scratch/data" 2>&1)
code=$?
rm -rf "$scratch"
expect "a bad synchronous value stops start-up with exit 2" "$code" 2
expect_match "the error names the key" "$out" 'datastore\.sqlite\.synchronous: "sometimes" is not one of full, normal, off'

# ---- autoDelete
export BATON_COORDINATOR_AUTO_DELETE_INTERVAL=200ms
start_server

post_yaml <<'EOF'
name: kept
tasks:
  - name: stays
    run: echo kept-line
EOF
kept=$(js "$body" 'j["id"]')

# Due in an hour: the sweeps that delete the short-lived job leave all of this one.
post_yaml <<'EOF'
name: later
autoDelete: {after: 1h}
tasks:
  - name: say
    run: echo later-line
EOF
later=$(js "$body" 'j["id"]')

post_yaml <<'EOF'
name: short-lived
autoDelete: {after: 1s}
tasks:
  - name: say
    run: echo short-lived-line
EOF
expect "autoDelete job accepted" "$status" 200
id=$(js "$body" 'j["id"]')
wait_done "$id" 30
expect "completed (and there, just after)" "$(js "$body" 'j["state"]')" COMPLETED
expect_match "deleteAt is set" "$(js "$body" 'j["deleteAt"]')" '^20[0-9-]+T[0-9:.]+Z$'
expect "deleteAt is completedAt + 1s" \
  "$(js "$body" 'round(__import__("datetime").datetime.fromisoformat(j["deleteAt"].replace("Z", "+00:00")).timestamp() - __import__("datetime").datetime.fromisoformat(j["completedAt"].replace("Z", "+00:00")).timestamp(), 3)')" \
  1.0
task=$(js "$body" 'j["execution"][0]["id"]')
wait_done "$later" 30
later_task=$(js "$body" 'j["execution"][0]["id"]')

# Gone once its time has come (1 s after completing, within a sweep of 200 ms).
deadline=$((SECONDS + 15))
while http GET "/jobs/$id"; [[ $status == 200 ]] && ((SECONDS <= deadline)); do sleep 0.1; done
expect "GET /jobs/{id} after its time" "$status" 404
http GET "/jobs/$id/log"
expect "GET /jobs/{id}/log after its time" "$status" 404
http GET "/tasks/$task"
expect "GET /tasks/{id} after its time" "$status" 404
http GET "/tasks/$task/log"
expect "GET /tasks/{id}/log after its time" "$status" 404
http GET "/jobs?q=short-lived"
expect "not listed any more" "$(js "$body" 'j["totalItems"]')" 0
http GET "/jobs/$kept"
expect "a job without autoDelete stays" "$(js "$body" 'j["state"]')" COMPLETED
http GET "/jobs/$later"
expect "a job due later stays" "$(js "$body" 'j["state"]')" COMPLETED
http GET "/tasks/$later_task"
expect "its task stays" "$status" 200
http GET "/jobs/$later/log"
expect "its log stays" "$(js "$body" 'j["items"][0]["contents"].strip()')" later-line
# Its rows are gone from the database file too, not only from the API's view.
rows=$(python3 - "$data_dir/baton.db" "$id" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
n = sum(db.execute(q, (sys.argv[2],)).fetchone()[0] for q in (
    "SELECT count(*) FROM jobs WHERE id = ?", "SELECT count(*) FROM tasks WHERE job_id = ?",
    "SELECT count(*) FROM log_parts WHERE job_id = ?"))
print(n)
EOF
)
expect "no row of it is left in the database" "$rows" 0
expect_match "the server says it deleted it" "$(cat "$work_dir/server.log")" 'deleted jobs whose autoDelete time had come'

finish "retention"
