#!/usr/bin/env bash
# End to end: no task can read Baton's data directory (docs/security.md, "What a task can
# reach"). A standalone server with authentication on; a job of the admin's writes a file
# in its task directory and waits; ann, who is not an admin, submits a job whose task tries
# to read the key (by absolute path and as ../../secrets.key), the database, the other
# job's file, the list of task directories, and Baton's files through Baton's own /proc
# entries, and writes its own directory, /tmp, and reads a file of the repository. Every
# attempt on the data directory is refused, the rest works, the task ran as nobody, and
# the data directory is 0700 with its files 0600. Then the same job on a server with
# authentication off (the single-user default, tasks as Baton's own user) is refused too.
# Usage: isolation_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$(cd "$2" && pwd)
source "$src/tests/e2e/lib.sh"

snoop_job() {  # the job ann submits; $1: the data directory, $2: the server's pid
  cat <<YAML
name: snoop
tasks:
  - name: snoop
    env: {DATA: "$1", BATON_PID: "$2", SRC: "$src"}
    run: |
      check() {
        name=\$1; shift
        if out=\$("\$@" 2>/dev/null) && [ -n "\$out" ]; then echo "\$name: read"; else echo "\$name: refused"; fi
      }
      {
        check key cat "\$DATA/secrets.key"
        check key-relative cat ../../secrets.key
        check database cat "\$DATA/baton.db"
        check other-job sh -c 'cat "\$DATA"/tasks/*/other-job-secret'
        check task-list sh -c 'ls -a "\$DATA/tasks" | grep -vx -e . -e .. -e "\$(basename "\$PWD")"'
        check via-proc-root cat "/proc/\$BATON_PID/root\$DATA/secrets.key"
        check via-proc-fd sh -c 'for f in /proc/\$BATON_PID/fd/*; do
          [ "\$(readlink "\$f")" = "\$DATA/baton.db" ] && cat "\$f"; done; true'
        echo mine > own
        check own-dir cat own
        check tmp sh -c 'f=\$(mktemp) && echo x > "\$f" && cat "\$f" && rm "\$f"'
        check repo-file head -c 5 "\$SRC/README.md"
        echo "uid: \$(id -u)"
      } > "\$BATON_OUTPUT"
YAML
}

want_refused='key: refused
key-relative: refused
database: refused
other-job: refused
task-list: refused
via-proc-root: refused
via-proc-fd: refused
own-dir: read
tmp: read
repo-file: read'

# wait_for_state ID STATES CURL_ARGS...: like lib.sh's wait_state, with credentials.
wait_for_state() {
  local id=$1 want=$2 deadline=$((SECONDS + 60)) state
  shift 2
  while true; do
    http GET "/jobs/$id" "$@"
    state=$(js "$body" 'j["state"]')
    [[ $state =~ ^($want)$ ]] && return 0
    ((SECONDS > deadline)) && { fail "job $id: state $state, waited for $want"; return 1; }
    sleep 0.1
  done
}

# ---- authentication on: tasks run as nobody, sandboxed
admin_pw='Adm1n-pw-iso'
export BATON_API_AUTH_ENABLED=true BATON_API_AUTH_ADMIN_PASSWORD=$admin_pw
export BATON_API_AUTH_BCRYPT_COST=4
start_server
unset BATON_API_AUTH_ENABLED BATON_API_AUTH_ADMIN_PASSWORD
admin=(-u "admin:$admin_pw")
expect_match "the start-up log says tasks cannot see the data directory" \
  "$(cat "$work_dir/server.log")" 'Tasks cannot see the data directory'
printf '%s\n' ann-pw-1 | BATON_URL=$url BATON_USER="admin:$admin_pw" \
  "$baton" users create ann --password-stdin >/dev/null 2>&1
expect "the admin creates ann (no role)" "$?" 0

http POST /jobs "${admin[@]}" -H 'Content-Type: text/yaml' --data-binary @- <<'YAML'
name: other
tasks:
  - name: keeps a file
    run: echo other-job-secret > other-job-secret; sleep 60
YAML
other=$(js "$body" 'j["id"]')
deadline=$((SECONDS + 30))
until compgen -G "$data_dir/tasks/*/other-job-secret" >/dev/null; do
  ((SECONDS > deadline)) && { fail "the other job's file never appeared"; break; }
  sleep 0.1
done

http POST /jobs -u ann:ann-pw-1 -H 'Content-Type: text/yaml' --data-binary @- \
  < <(snoop_job "$data_dir" "$server_pid")
expect "ann submits the snooping job" "$status" 200
snoop=$(js "$body" 'j["id"]')
wait_for_state "$snoop" 'COMPLETED|FAILED' -u ann:ann-pw-1
expect "the snooping job completes" "$(js "$body" 'j["state"]')" COMPLETED
result=$(js "$body" 'j["execution"][0]["result"]')
expect "as ann, every way into the data directory is refused; its own dir, /tmp and the repo work" \
  "$(grep -v '^uid' <<<"$result")" "$want_refused"
expect "ann's task ran as nobody" "$(grep '^uid' <<<"$result")" "uid: $(id -u nobody)"
expect "the data directory is 0700" "$(stat -c %a "$data_dir")" 700
for f in baton.db baton.db-wal baton.db-shm secrets.key; do
  expect "  $f is 0600" "$(stat -c %a "$data_dir/$f")" 600
done
http PUT "/jobs/$other/cancel" "${admin[@]}"
wait_for_state "$other" CANCELLED "${admin[@]}"
stop_server
server_pid=

# ---- the single-user default (no authentication): Baton's own user, sandboxed
start_server
http POST /jobs -H 'Content-Type: text/yaml' --data-binary @- < <(snoop_job "$data_dir" "$server_pid")
snoop=$(js "$body" 'j["id"]')
wait_for_state "$snoop" 'COMPLETED|FAILED'
result=$(js "$body" 'j["execution"][0]["result"]')
expect "as Baton's own user, every way into the data directory is refused too" \
  "$(grep -v '^uid' <<<"$result")" "$want_refused"
expect "  and the task ran as Baton's user" "$(grep '^uid' <<<"$result")" "uid: $(id -u)"

finish isolation
