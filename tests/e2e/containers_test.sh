#!/usr/bin/env bash
# End to end through the container runtime: `baton run standalone` with runtime.type = auto
# against Podman's Docker-compatible service (BATON_TEST_DOCKER_HOST, from
# scripts/test-services/podman.sh) and the locally built images; the job examples that
# name an image, then failures, and no container left behind by any job.
# Exits 77 (skipped) when no container engine is configured.
# Usage: containers_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
examples=$src/examples
source "$src/tests/e2e/lib.sh"

if [[ -z ${BATON_TEST_DOCKER_HOST:-} ]]; then
  echo "SKIPPED: BATON_TEST_DOCKER_HOST is not set (run under scripts/test-services/with-services.sh)"
  exit 77
fi
socket=${BATON_TEST_DOCKER_HOST#unix://}
docker_api() { curl -s --max-time 30 --unix-socket "$socket" "http://d/v1.41$1"; }
if [[ $(docker_api /_ping) != OK ]]; then
  echo "SKIPPED: no Docker API answers at $BATON_TEST_DOCKER_HOST"
  exit 77
fi

export BATON_RUNTIME_TYPE=auto
export BATON_RUNTIME_DOCKER_HOST=$BATON_TEST_DOCKER_HOST
export BATON_RUNTIME_DOCKER_IMAGE=localhost/busybox:latest
start_server

job_ids=()

# All the job's log text, oldest first.
job_log() {
  http GET "/jobs/$1/log?size=100"
  js "$body" '"".join(p["contents"] for p in reversed(j["items"]))'
}

case_auto_picks_docker() {
  grep -q "Runtime: docker" "$work_dir/server.log" && pass "auto: the Docker API was picked and said so" ||
    fail "auto: no 'Runtime: docker' line in the server log"
}

case_containers_example() {
  local id log
  id=$(submit "$examples/containers.yaml") && job_ids+=("$id") && wait_done "$id" 120
  expect "containers example: state" "$(js "$body" 'j["state"]')" COMPLETED
  [[ $(js "$body" 'j["state"]') == COMPLETED ]] ||
    echo "  error: $(js "$body" '[t.get("error") for t in j["execution"]]')"
  log=$(job_log "$id")
  [[ $log == *hello* ]] && pass "containers example: volume, tmpfs, network task ran" ||
    fail "containers example: no 'hello' in the log [$log]"
  [[ $log == *"from cmd"* ]] && pass "containers example: entrypoint + cmd" ||
    fail "containers example: no 'from cmd' in the log [$log]"
  [[ $log == *"sidecar-ready"* ]] && pass "containers example: the sidecar served the task" ||
    fail "containers example: no 'sidecar-ready' in the log [$log]"
}

case_missing_image() {
  local id error
  id=$(post_yaml <<<'
name: missing image
tasks:
  - name: nowhere
    image: localhost/baton-e2e-missing:latest
    run: echo never
' && js "$body" 'j["id"]') && job_ids+=("$id") && wait_done "$id" 60
  expect "missing image: state" "$(js "$body" 'j["state"]')" FAILED
  error=$(js "$body" 'j["execution"][0].get("error", "")')
  expect_match "missing image: error names the image" "$error" \
    'cannot pull image "localhost/baton-e2e-missing:latest"'
}

case_memory_limit() {
  local id error
  id=$(post_yaml <<<'
name: memory hog
tasks:
  - name: hog
    image: localhost/busybox:latest
    limits: { memory: 32m }
    run: awk "BEGIN { s = \"x\"; while (1) s = s s }"
' && js "$body" 'j["id"]') && job_ids+=("$id") && wait_done "$id" 60
  expect "memory limit: state" "$(js "$body" 'j["state"]')" FAILED
  error=$(js "$body" 'j["execution"][0].get("error", "")')
  expect_match "memory limit: error" "$error" 'out of memory: exceeded the memory limit of 32m'
}

case_cancel() {
  local id
  id=$(post_yaml <<<'
name: long container
tasks:
  - name: sleeper
    image: localhost/busybox:latest
    run: echo sleeping; sleep 120
' && js "$body" 'j["id"]') && job_ids+=("$id") && wait_state "$id" RUNNING 60
  # Until its container exists.
  local deadline=$((SECONDS + 30)) filter
  filter=$(python3 -c 'import json,sys,urllib.parse; print(urllib.parse.quote(json.dumps({"label": ["baton.job=" + sys.argv[1]]})))' "$id")
  until [[ $(docker_api "/containers/json?filters=$filter") == *'"Id"'* ]] || ((SECONDS > deadline)); do sleep 0.1; done
  http PUT "/jobs/$id/cancel"
  wait_done "$id" 30
  expect "cancel: state" "$(js "$body" 'j["state"]')" CANCELLED
}

case_nothing_left_behind() {
  local id filter out deadline
  for id in "${job_ids[@]}"; do
    filter=$(python3 -c 'import json,sys,urllib.parse; print(urllib.parse.quote(json.dumps({"label": ["baton.job=" + sys.argv[1]]})))' "$id")
    deadline=$((SECONDS + 15))
    while out=$(docker_api "/containers/json?all=1&filters=$filter"); [[ $out != "[]" ]] && ((SECONDS < deadline)); do
      sleep 0.2
    done
    expect "no container left behind by job $id" "$out" "[]"
  done
}

case_auto_falls_back_to_shell() {
  local port dir pid deadline
  port=$(free_port)
  dir=$(mktemp -d "${TMPDIR:-/tmp}/baton-e2e-auto.XXXXXX")
  BATON_RUNTIME_DOCKER_HOST=unix:///nonexistent/docker.sock \
    "$baton" run standalone --address "127.0.0.1:$port" --data-dir "$dir/data" >"$dir/log" 2>&1 &
  pid=$!
  deadline=$((SECONDS + 30))
  until curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1 || ((SECONDS > deadline)); do sleep 0.1; done
  grep -q "Runtime: shell" "$dir/log" && pass "auto: falls back to the shell runtime and says so" ||
    fail "auto: no 'Runtime: shell' line: $(cat "$dir/log")"
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  rm -rf "$dir"
}

for name in auto_picks_docker containers_example missing_image memory_limit cancel \
  nothing_left_behind auto_falls_back_to_shell; do
  "case_$name"
  check_server "after case $name"
done
finish containers-e2e
