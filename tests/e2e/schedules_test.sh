#!/usr/bin/env bash
# Scheduled jobs end to end on `baton run standalone`: a real `* * * * *` scheduled job
# (made with `baton submit --schedule`) fires within ~65 s a job that carries
# `schedule: {id, cron}` and completes, once per tick; Tork's JSON body is accepted;
# pause/resume answer 400 from the wrong state; a paused one fires nothing; the CLI's
# `baton schedules list|get|pause|resume|delete` drive it; delete answers 404 after; a bad
# zone or cron is a 400 naming its field.
# Usage: schedules_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"

start_server
cli() { "$baton" "$@" --url "$url"; }

# ---- baton submit --schedule
sid=$(cli submit "$src/examples/hello.yaml" --schedule "* * * * *" --timezone Europe/Paris)
expect "submit --schedule exits 0" "$?" 0
expect_match "submit --schedule prints the scheduled job's id" "$sid" '^[0-9a-f]{32}$'
created_at=$(date +%s)

list=$(cli schedules list)
expect_match "schedules list shows it ACTIVE with its cron and zone" "$list" "$sid +hello job +ACTIVE +\* \* \* \* \* +Europe/Paris"
get=$(cli schedules get "$sid")
expect_match "schedules get shows the overlap policy" "$get" 'Overlap: +allow'

# ---- Tork's own body; paused at once, it never fires
http POST /scheduled-jobs -H 'Content-Type: application/json' --data-binary @- <<'JSON'
{"name": "tork style", "schedule": {"cron": "* * * * *"},
 "tasks": [{"name": "t", "image": "alpine", "run": "echo tork"}]}
JSON
expect "Tork's body is accepted" "$status" 200
paused=$(js "$body" 'j["id"]')
expect "Tork's fields" "$(js "$body" '[j["state"], j["cron"]]')" '["ACTIVE", "* * * * *"]'
http PUT "/scheduled-jobs/$paused/pause"
expect "pause: 200" "$status" 200
expect "pause: Tork's answer" "$body" '{"status":"OK"}'
http PUT "/scheduled-jobs/$paused/pause"
expect "pause of a PAUSED one: 400" "$status" 400
expect_match "pause of a PAUSED one: says why" "$(js "$body" 'j["message"]')" 'is PAUSED: only an ACTIVE one can be paused'
http GET "/scheduled-jobs/$paused"
expect "GET shows PAUSED" "$(js "$body" 'j["state"]')" PAUSED

# ---- the first tick of the real schedule
deadline=$((SECONDS + 70))
fired=()
while ((SECONDS < deadline)); do
  http GET "/jobs?size=100"
  mapfile -t fired < <(js "$body" '"\n".join(x["id"] for x in j["items"] if x.get("schedule", {}).get("id") == "'"$sid"'")' | grep .)
  ((${#fired[@]})) && break
  sleep 0.5
done
if ((${#fired[@]} == 0)); then
  fail "no job fired within 70 s of creating a * * * * * scheduled job"
else
  expect "the first tick fired within ~65 s" "$(( $(date +%s) - created_at <= 66 ))" 1
  expect "one job for the first tick" "${#fired[@]}" 1
  wait_done "${fired[0]}" 30
  expect "the fired job completed" "$(js "$body" 'j["state"]')" COMPLETED
  expect "the fired job carries {id, cron}" \
    "$(js "$body" 'j["schedule"] == {"id": "'"$sid"'", "cron": "* * * * *"}')" true
  expect "the fired job ran the definition" "$(js "$body" 'j["result"]')" "hello world"
fi
http GET "/scheduled-jobs/$sid"
expect "lastJobId is the fired job" "$(js "$body" 'j.get("lastJobId")')" "${fired[0]:-}"

# ---- CLI pause / resume; HTTP resume of an ACTIVE one is 400
out=$(cli schedules pause "$sid")
expect "schedules pause" "$out" "scheduled job $sid paused"
http GET "/scheduled-jobs/$sid"
expect "paused over the CLI" "$(js "$body" 'j["state"]')" PAUSED
http PUT "/scheduled-jobs/$sid/resume"
expect "resume: 200" "$status" 200
http PUT "/scheduled-jobs/$sid/resume"
expect "resume of an ACTIVE one: 400" "$status" 400
out=$(cli schedules resume "$sid" 2>&1)
expect "schedules resume of an ACTIVE one exits 1" "$?" 1
expect_match "and prints the server's reason" "$out" 'only a PAUSED one can be resumed \(HTTP 400\)'

# ---- PUT /scheduled-jobs/{id} (beyond Tork)
http PUT "/scheduled-jobs/$sid" -H 'Content-Type: text/yaml' --data-binary @- <<'YAML'
name: hello job
schedule: {cron: "0 0 1 1 *", overlap: skip}
tasks:
  - name: t
    run: echo updated
YAML
expect "update: 200" "$status" 200
expect "update: the new cron" "$(js "$body" '[j["cron"], j["schedule"]["overlap"]]')" '["0 0 1 1 *", "skip"]'

# ---- bad bodies
http POST /scheduled-jobs -H 'Content-Type: application/json' \
  --data-binary '{"name": "n", "schedule": {"cron": "* * * * *", "timezone": "Mars/Olympus"}, "tasks": [{"name": "t", "run": "true"}]}'
expect "an unknown zone: 400" "$status" 400
expect "an unknown zone: names the field" "$(js "$body" 'j["errors"][0]["path"]')" schedule.timezone
http POST /scheduled-jobs -H 'Content-Type: application/json' \
  --data-binary '{"name": "n", "schedule": {"cron": "61 * * * *"}, "tasks": [{"name": "t", "run": "true"}]}'
expect "a bad cron: 400" "$status" 400
expect_match "a bad cron: says what" "$(js "$body" 'j["message"]')" 'schedule.cron: cron: minute: 61 is out of range 0-59'

# ---- the paused one fired nothing; delete both
http GET "/jobs?size=100"
expect "a paused scheduled job fires nothing" \
  "$(js "$body" 'len([x for x in j["items"] if x.get("schedule", {}).get("id") == "'"$paused"'"])')" 0
out=$(cli schedules delete "$sid")
expect "schedules delete" "$out" "scheduled job $sid deleted"
http GET "/scheduled-jobs/$sid"
expect "deleted: 404" "$status" 404
http DELETE "/scheduled-jobs/$paused"
expect "DELETE over HTTP" "$body" '{"status":"OK"}'
http DELETE "/scheduled-jobs/$paused"
expect "DELETE again: 404" "$status" 404
if ((${#fired[@]})); then
  http GET "/jobs/${fired[0]}"
  expect "the fired job stays" "$status" 200
fi
list=$(cli schedules list)
expect_match "schedules list is empty" "$list" 'page 1 of 0, 0 scheduled jobs'

finish schedules
