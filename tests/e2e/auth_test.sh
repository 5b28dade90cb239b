#!/usr/bin/env bash
# End to end: authentication and job permissions over the real binary (docs/auth.md).
# A standalone server with api.auth.enabled and a bootstrap admin from the environment;
# users made with `baton users create`; examples/permissions.yaml submitted by ann; every
# job and task route asked with no credentials (401), as a user the job does not admit
# (404, as an unknown id), as one it admits (by name, by role) and as the admin, with
# curl -u and with a bearer key, which stops working once revoked; no password or key in
# the server's log; and a server on a non-loopback address without auth warns loudly.
# Usage: auth_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"

admin_pw='Adm1n-pw-e2e'
export BATON_API_AUTH_ENABLED=true BATON_API_AUTH_ADMIN_PASSWORD=$admin_pw
export BATON_API_AUTH_BCRYPT_COST=4
start_server
unset BATON_API_AUTH_ENABLED BATON_API_AUTH_ADMIN_PASSWORD
export BATON_URL=$url

# ---- open and closed
http GET /health
expect "GET /health needs no credentials" "$status" 200
http GET /jobs
expect "GET /jobs without credentials is 401" "$status" 401
expect "401 says why, with its code" "$(js "$body" '[j["code"], "authentication required" in j["message"]]')" '["UNAUTHENTICATED", true]'
hdr=$(curl -s -o /dev/null -D - "$url/jobs" | tr -d '\r' | grep -i '^www-authenticate:')
expect "401 carries WWW-Authenticate" "$hdr" 'WWW-Authenticate: Basic realm="baton", charset="UTF-8"'
http GET /jobs -u "admin:wrong"
expect "a wrong password is 401" "$status" 401

# ---- users, by the admin through the CLI
export BATON_USER=admin:$admin_pw
for u in ann:ann-pw-1: bob:bob-pw-2:dev carl:carl-pw-3: dora:dora-pw-4:ops; do
  IFS=: read -r name pw role <<<"$u"
  args=(users create "$name")
  [[ -n $role ]] && args+=(--role "$role")
  out=$(printf '%s\n' "$pw" | "$baton" "${args[@]}" --password-stdin 2>&1)
  expect "baton users create $name" "$?" 0
  expect_match "  prints the user" "$out" "^created user $name"
done
out=$(BATON_USER=ann:ann-pw-1 BATON_NEW_PASSWORD=x "$baton" users create eve 2>&1)
expect "a user who is not admin cannot create users (exit 1)" "$?" 1
expect_match "  403, naming the role" "$out" 'needs the admin role.*HTTP 403'
unset BATON_USER
# As Tork's documentation shows it: curl -d, whatever content type that sends.
http POST /users -u "admin:$admin_pw" -d '{"username":"frank","name":"Frank","password":"frank-pw-5"}'
expect "POST /users as Tork's curl example sends it" "$(js "$body" '[j["username"], j["name"], "password" in j]')" '["frank", "Frank", false]'
http GET /jobs -u frank:frank-pw-5
expect "the new user's password works" "$status" 200

# ---- ann submits the example; who sees it
id=$(BATON_USER=ann:ann-pw-1 "$baton" submit "$src/examples/permissions.yaml" 2>&1)
expect_match "ann submits examples/permissions.yaml" "$id" '^[0-9a-f]{32}$'
deadline=$((SECONDS + 30))
until http GET "/jobs/$id" -u ann:ann-pw-1; [[ $(js "$body" 'j["state"]') == COMPLETED ]]; do
  ((SECONDS > deadline)) && { fail "the job did not complete: $body"; break; }
  sleep 0.1
done
expect "its creator is ann, as Tork shows it" "$(js "$body" 'j["createdBy"]')" '{"username": "ann"}'
task=$(js "$body" 'j["execution"][0]["id"]')

check_routes() {  # WHO CURL_AUTH_ARGS... : GETs of every job and task route
  local who=$1 want=$2
  shift 2
  for path in "/jobs/$id" "/jobs/$id/log" "/jobs/$id/webhooks" "/tasks/$task" "/tasks/$task/log"; do
    http GET "$path" "$@"
    expect "GET $path as $who" "$status" "$want"
  done
}
check_routes "nobody" 401
check_routes "bob (not admitted)" 404 -u bob:bob-pw-2
check_routes "carl (named)" 200 -u carl:carl-pw-3
check_routes "dora (role ops)" 200 -u dora:dora-pw-4
check_routes "the admin" 200 -u "admin:$admin_pw"
http GET "/jobs/$id" -u bob:bob-pw-2
hidden=$body
http GET "/jobs/ffffffffffffffffffffffffffffffff" -u bob:bob-pw-2
expect "to bob the job reads as an unknown id" "${hidden//$id/ID}" "${body//ffffffffffffffffffffffffffffffff/ID}"
http PUT "/jobs/$id/restart" -u bob:bob-pw-2
expect "bob cannot restart it (404)" "$status" 404
http PUT "/jobs/$id/cancel" -u bob:bob-pw-2
expect "bob cannot cancel it (404)" "$status" 404
http DELETE "/jobs/$id" -u bob:bob-pw-2
expect "bob cannot delete it (404)" "$status" 404
http PUT "/jobs/$id/cancel" -u carl:carl-pw-3
expect "carl may cancel it: 400, it is COMPLETED" "$status" 400

list_ids() { http GET /jobs "$@"; js "$body" '[len(j["items"]), j["totalItems"]]'; }
expect "bob's list leaves it out (count too)" "$(list_ids -u bob:bob-pw-2)" '[0, 0]'
expect "carl's list has it" "$(list_ids -u carl:carl-pw-3)" '[1, 1]'
out=$(BATON_USER=bob:bob-pw-2 "$baton" jobs get "$id" 2>&1)
expect "baton jobs get as bob fails" "$?" 1
expect_match "  with the 404" "$out" 'HTTP 404'

# ---- a bearer key
key=$(BATON_USER=carl:carl-pw-3 "$baton" keys create --name e2e --json 2>/dev/null)
key_id=$(js "$key" 'j["id"]')
secret=$(js "$key" 'j["key"]')
expect_match "carl makes a key, shown once" "$secret" '^baton_[0-9a-f]{64}$'
http GET "/jobs/$id" -H "Authorization: Bearer $secret"
expect "the key reads the job as carl" "$status" 200
out=$(BATON_TOKEN=$secret "$baton" jobs get "$id" 2>&1)
expect "baton jobs get with BATON_TOKEN" "$?" 0
out=$(BATON_TOKEN=$secret "$baton" keys list 2>&1)
expect_match "baton keys list shows the key's id" "$out" "$key_id"
[[ $out == *"$secret"* ]] && fail "keys list shows the key itself" || pass "keys list never shows the key"
out=$(BATON_USER=bob:bob-pw-2 "$baton" keys revoke "$key_id" 2>&1)
expect "bob cannot revoke carl's key" "$?" 1
out=$(BATON_USER=carl:carl-pw-3 "$baton" keys revoke "$key_id" 2>&1)
expect "carl revokes it" "$?" 0
http GET "/jobs/$id" -H "Authorization: Bearer $secret"
expect "a revoked key is 401" "$status" 401

# ---- secrets stay out of the log
log=$(<"$work_dir/server.log")
for s in "$admin_pw" ann-pw-1 bob-pw-2 carl-pw-3 dora-pw-4 frank-pw-5 "$secret"; do
  [[ $log == *"$s"* ]] && fail "the server log holds a secret ($s)" || pass "no ${s:0:8}… in the server log"
done
expect_match "the admin was created at start" "$log" 'created the first admin user'
[[ $log == *"AUTHENTICATION IS OFF"* ]] && fail "warned with auth on" || pass "no warning with auth on"

# ---- auth off beyond loopback: one loud warning
scratch=$(mktemp -d "${TMPDIR:-/tmp}/baton-e2e-open.XXXXXX")
port=$(free_port)
"$baton" run standalone --address "0.0.0.0:$port" --data-dir "$scratch/data" >"$scratch/log" 2>&1 &
open_pid=$!
deadline=$((SECONDS + 30))
until curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 || ((SECONDS > deadline)); do sleep 0.1; done
stop_pids "$open_pid"
wait "$open_pid" 2>/dev/null
expect "auth off on 0.0.0.0 warns once" "$(grep -c 'AUTHENTICATION IS OFF' "$scratch/log")" 1
rm -rf "$scratch"

finish 71
