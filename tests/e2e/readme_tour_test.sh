#!/usr/bin/env bash
# The README is a test: its commands, read from README.md itself, run literally from a
# scratch copy of the repository as a new user runs them, and what the README says they
# show is checked.
#   1. "A short tour": `build/baton run standalone` with no flag but --address (so the
#      default relative data directory ./.baton), then every command of the tour's ```sh
#      block, localhost:8000 pointed at the server's port and the id placeholder
#      (3f0c...) replaced by the id the POST answered;
#   2. "Offline and administrative commands", in a fresh copy;
#   3. "Distributed mode on several machines": migrate, a coordinator and a worker, each
#      from a copy of its own ("machine"), configs/distributed.toml pointed at the
#      PostgreSQL and RabbitMQ that make test starts (BATON_TEST_POSTGRES_DSN,
#      BATON_TEST_RABBITMQ_URL, as BATON_* variables, as the README allows), then hello
#      submitted through the coordinator.
# A README command this script has no check for, or one it cannot run literally, FAILS,
# naming it: when the README changes, this test has to change with it.
# Without the test services the distributed section is not run and the suite exits 77
# (CTest: skipped, which `make test` does not accept).
# Usage: readme_tour_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$(realpath "$1")
src=$(cd "$2" && pwd)
# shellcheck source=lib.sh
. "$src/tests/e2e/lib.sh"

readme=$src/README.md
scratch=$(mktemp -d "${TMPDIR:-/tmp}/baton-readme.XXXXXX")
bg_pids=()
skipped_sections=()
stop_all() {
  local pid
  for pid in "${bg_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${bg_pids[@]}"; do
    local deadline=$((SECONDS + 40))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
  done
  if ((failures)); then
    for log in "$scratch"/*.log; do [[ -f $log ]] && { echo "--- $log"; tail -n 25 "$log"; }; done
  fi
  rm -rf "$scratch"
}
trap stop_all EXIT
trap "exit 143" TERM INT HUP

# readme_block ANCHOR: the first ```sh block after the line ANCHOR (a heading's text or
# a paragraph's), before the next heading; one line per command, "COMMAND<TAB>COMMENT",
# where COMMENT is its trailing `# ...` and the comment lines right under it (what the
# README shows it prints). Empty when there is no such block.
readme_block() {
  python3 - "$readme" "$1" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
anchor = sys.argv[2]
start = next((i for i, l in enumerate(lines) if re.sub(r"^#+\s*", "", l).strip() == anchor), None)
if start is None:
    sys.exit(0)
i = start + 1
while i < len(lines) and lines[i].strip() != "```sh":
    if lines[i].startswith("#"):
        sys.exit(0)  # the next heading came first
    i += 1
commands = []
for line in lines[i + 1:]:
    if line.strip() == "```":
        break
    text = line.strip()
    if not text:
        continue
    if text.startswith("#"):
        if commands:
            commands[-1][1] += " " + text.lstrip("# ")
        continue
    m = re.match(r"^(.*?)\s+#\s(.*)$", text)
    commands.append([m.group(1), m.group(2)] if m else [text, ""])
for command, comment in commands:
    print(command + "\t" + comment.strip())
PY
}

# make_copy DIR: a copy of the repository's files (tracked and new, not ignored: no
# build/, no .baton) at DIR, with the binary under test at DIR/build/baton.
make_copy() {
  mkdir -p "$1/build"
  if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    (cd "$src" && git ls-files -z --cached --others --exclude-standard |
      tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -C "$1" -xf -
  else
    tar -C "$src" --exclude=./build --exclude=./.git --exclude=./.baton -cf - . | tar -C "$1" -xf -
  fi
  ln -sf "$baton" "$1/build/baton"
  [[ -f $1/README.md && -d $1/examples ]] || { echo "FAIL: cannot copy $src to $1"; exit 1; }
}

# wait_health URL SECONDS PID LOG: until GET URL/health answers; fails the suite when the
# process exits or the time is up.
wait_health() {
  local deadline=$((SECONDS + $2))
  until curl -sf "$1/health" >/dev/null 2>&1; do
    if ! kill -0 "$3" 2>/dev/null; then
      echo "FAIL: the server exited at start-up:"; cat "$4"; exit 1
    fi
    ((SECONDS > deadline)) && { echo "FAIL: no answer from $1/health in $2 s:"; cat "$4"; exit 1; }
    sleep 0.1
  done
}

# stop_pid NAME PID: SIGTERM (what the README says stops it), then its exit status must
# be 0 within 40 s.
stop_pid() {
  local deadline=$((SECONDS + 40)) rc
  kill -TERM "$2" 2>/dev/null
  while kill -0 "$2" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
  if kill -0 "$2" 2>/dev/null; then
    fail "$1: still running 40 s after SIGTERM"
    kill -KILL "$2"
  fi
  wait "$2"
  rc=$?
  expect "$1: exit status after SIGTERM" "$rc" 0
}

# run_literal DIR COMMAND: runs COMMAND as the README writes it, in DIR, with
# localhost:8000 pointed at $port, the placeholder id replaced by $job_id and BATON_URL
# set; sets out, err, rc. False (and a failure) when COMMAND cannot be run literally.
run_literal() {
  local dir=$1 command=$2
  command=${command//localhost:8000/127.0.0.1:$port}
  command=${command//3f0c.../${job_id:-}}
  if [[ $command == *...* || $command == *"<"*">"* ]]; then
    fail "README command cannot be run literally (a placeholder this test does not know): $2"
    return 1
  fi
  out=$(cd "$dir" && BATON_URL=http://127.0.0.1:$port timeout 120 bash -c "$command" 2>"$scratch/stderr")
  rc=$?
  err=$(<"$scratch/stderr")
}

# shown KEY COMMENT: the value the README shows for "KEY":"value" or KEY ("value").
shown() {
  python3 - "$1" "$2" <<'PY'
import re, sys
key, text = sys.argv[1], sys.argv[2]
m = re.search(r'"%s"\s*:\s*"([^"]*)"' % re.escape(key), text) or \
    re.search(r'\b%s \("([^"]*)"\)' % re.escape(key), text)
print(m.group(1) if m else "")
PY
}

# ---------------------------------------------------------------------------------
# 1. A short tour.
tour=$(readme_block "A short tour")
[[ -n $tour ]] || { fail "README.md: no \`\`\`sh block under \"A short tour\""; finish readme_tour; }
copy=$scratch/tour
make_copy "$copy"
port=$(free_port)
url=http://127.0.0.1:$port
(cd "$copy" && exec build/baton run standalone --address "127.0.0.1:$port") >"$scratch/tour-server.log" 2>&1 &
server=$!
bg_pids+=("$server")
wait_health "$url" 60 "$server" "$scratch/tour-server.log"
pass "tour: build/baton run standalone --address 127.0.0.1:$port is up"
job_id=""
nl=$'\n'
while IFS=$'\t' read -r command comment; do
  case $command in
    "curl -X POST --data-binary @examples/hello.yaml "*"/jobs")
      run_literal "$copy" "$command" || continue
      expect "tour: [$command] exit" "$rc" 0
      job_id=$(js "$out" 'j["id"]')
      expect_match "tour: [$command] answers with an id" "$job_id" '^[0-9a-f]+$'
      expect "tour: [$command] name" "$(js "$out" 'j["name"]')" "$(shown name "$comment")"
      # The README shows the state a job is accepted in: PENDING, as Tork answers
      # (docs/api.md).
      expect "tour: [$command] state" "$(js "$out" 'j["state"]')" "$(shown state "$comment")"
      ;;
    "curl localhost:8000/jobs/3f0c...")
      # Run again until the job ends, as a user would.
      deadline=$((SECONDS + 30))
      while run_literal "$copy" "$command" &&
        [[ ! $(js "$out" 'j["state"]') =~ ^(COMPLETED|FAILED|CANCELLED)$ ]] && ((SECONDS < deadline)); do
        sleep 0.2
      done
      expect "tour: [$command] exit" "$rc" 0
      expect "tour: [$command] state" "$(js "$out" 'j["state"]')" COMPLETED
      [[ $(js "$out" 'j["state"]') == COMPLETED ]] ||
        echo "  errors: $(js "$out" '[t.get("error") for t in j.get("execution", [])] + [j.get("error")]')"
      expect "tour: [$command] result (README: \"$(shown result "$comment")\")" \
        "$(js "$out" 'j.get("result")')" "$(shown result "$comment")"
      for key in state result execution context; do
        [[ $comment == *"$key"* ]] || continue
        expect "tour: [$command] has $key" "$(js "$out" "'$key' in j")" true
      done
      ;;
    "curl localhost:8000/jobs/3f0c.../log")
      run_literal "$copy" "$command" || continue
      expect "tour: [$command] exit" "$rc" 0
      expect "tour: [$command] is a page of log parts" "$(js "$out" 'isinstance(j["items"], list)')" true
      ;;
    "build/baton submit examples/hello.yaml --wait")
      run_literal "$copy" "$command" || continue
      expect "tour: [$command] exit" "$rc" 0
      expect_match "tour: [$command] prints the result" "$out" "hello world"
      ;;
    "build/baton submit examples/parallel.yaml --follow")
      run_literal "$copy" "$command" || continue
      expect "tour: [$command] exit" "$rc" 0
      for line in starting one two three "done"; do
        expect_match "tour: [$command] streams the log: $line" "$out" "(^|$nl)$line($nl|\$)"
      done
      expect_match "tour: [$command] a progress line" "$err" '\[RUNNING[^]]*\]'
      ;;
    "build/baton jobs list")
      run_literal "$copy" "$command" || continue
      expect "tour: [$command] exit" "$rc" 0
      for name in "hello job" "parallel job"; do
        expect_match "tour: [$command] lists $name" "$out" "$name"
      done
      ;;
    "build/baton health")
      run_literal "$copy" "$command" || continue
      expect "tour: [$command] exit" "$rc" 0
      expect_match "tour: [$command] says UP" "$out" '^UP'
      ;;
    "curl -s localhost:8000/ | grep -o '<title>Baton</title>'")
      # The web UI is served by the binary itself, at / (tests/e2e/ui_test.sh drives it in
      # a browser).
      run_literal "$copy" "$command" || continue
      expect "tour: [$command] exit" "$rc" 0
      expect "tour: [$command] the UI's page" "$out" "<title>Baton</title>"
      ;;
    *)
      fail "README tour command has no check in readme_tour_test.sh: $command"
      ;;
  esac
done <<<"$tour"
[[ -n $job_id ]] || fail "tour: no command submitted examples/hello.yaml"
[[ -d $copy/.baton ]] && pass "tour: the default data directory is ./.baton" ||
  fail "tour: no ./.baton in the directory the server ran in"
stop_pid "tour: the server" "$server"

# ---------------------------------------------------------------------------------
# 2. Offline and administrative commands.
offline=$(readme_block "Offline and administrative commands:")
[[ -n $offline ]] || fail "README.md: no \`\`\`sh block after \"Offline and administrative commands:\""
copy=$scratch/offline
make_copy "$copy"
while IFS=$'\t' read -r command comment; do
  [[ -n $command ]] || continue
  case $command in
    "make build")
      echo "note: [$command] not run: it builds the release binary; the binary under test stands in for it"
      ;;
    "build/baton validate examples/*")
      run_literal "$copy" "$command" || continue
      expect "offline: [$command] exit" "$rc" 0
      ;;
    "build/baton version")
      run_literal "$copy" "$command" || continue
      expect "offline: [$command] exit" "$rc" 0
      expect_match "offline: [$command] prints a version" "$out" '[0-9]+\.[0-9]+'
      ;;
    "build/baton migrate --data-dir .baton")
      run_literal "$copy" "$command" || continue
      expect "offline: [$command] exit" "$rc" 0
      [[ -d $copy/.baton ]] && pass "offline: [$command] made .baton" || fail "offline: [$command] made no .baton"
      ;;
    "build/baton run standalone --data-dir .baton")
      # Literal, with the port as a BATON_* variable (README: every key can be one).
      port=$(free_port)
      url=http://127.0.0.1:$port
      (cd "$copy" && BATON_COORDINATOR_ADDRESS=127.0.0.1:$port exec bash -c "exec $command") \
        >"$scratch/offline-server.log" 2>&1 &
      server=$!
      bg_pids+=("$server")
      wait_health "$url" 60 "$server" "$scratch/offline-server.log"
      pass "offline: [$command] is up"
      run_literal "$copy" "build/baton submit examples/hello.yaml --wait"
      expect "offline: [$command] runs hello: exit" "$rc" 0
      expect_match "offline: [$command] runs hello: result" "$out" "hello world"
      stop_pid "offline: [$command]" "$server"
      ;;
    *)
      fail "README offline command has no check in readme_tour_test.sh: $command"
      ;;
  esac
done <<<"$offline"

# ---------------------------------------------------------------------------------
# 3. Distributed mode on several machines.
distributed=$(readme_block "Distributed mode on several machines")
[[ -n $distributed ]] || fail "README.md: no \`\`\`sh block under \"Distributed mode on several machines\""
if [[ -z ${BATON_TEST_RABBITMQ_URL:-} || -z ${BATON_TEST_POSTGRES_DSN:-} ]]; then
  echo "SKIPPED: the distributed section: RabbitMQ/PostgreSQL not configured (make test starts them)"
  skipped_sections+=(distributed)
else
  # Pointed at this run's own database and virtual host (the README: "or set the same
  # keys as BATON_* variables"). The file's data_dir (/var/lib/baton) is a real
  # machine's: here each machine keeps its directories in its own scratch copy.
  distributed_env baton_readme
  coordinator_copy=$scratch/coordinator
  worker_copy=$scratch/worker
  make_copy "$coordinator_copy"
  make_copy "$worker_copy"
  port=$(free_port)
  url=http://127.0.0.1:$port
  started_coordinator=false
  started_worker=false
  while IFS=$'\t' read -r command comment; do
    [[ -n $command ]] || continue
    case $command in
      "build/baton migrate --config configs/distributed.toml")
        BATON_DATA_DIR=$coordinator_copy/var run_literal "$coordinator_copy" "$command" || continue
        expect "distributed: [$command] exit" "$rc" 0
        ;;
      "build/baton run coordinator --config configs/distributed.toml --address 0.0.0.0:8000")
        literal=${command//0.0.0.0:8000/0.0.0.0:$port}
        (cd "$coordinator_copy" && BATON_DATA_DIR=$coordinator_copy/var exec bash -c "exec $literal") \
          >"$scratch/coordinator.log" 2>&1 &
        coordinator=$!
        bg_pids+=("$coordinator")
        wait_health "$url" 60 "$coordinator" "$scratch/coordinator.log"
        pass "distributed: [$command] is up on port $port"
        started_coordinator=true
        ;;
      "build/baton run worker --config configs/distributed.toml --queue default:8 --queue gpu:1")
        (cd "$worker_copy" && BATON_DATA_DIR=$worker_copy/var exec bash -c "exec $command") \
          >"$scratch/worker.log" 2>&1 &
        worker=$!
        bg_pids+=("$worker")
        started_worker=true
        ;;
      *)
        fail "README distributed command has no check in readme_tour_test.sh: $command"
        ;;
    esac
  done <<<"$distributed"
  if $started_coordinator && $started_worker; then
    deadline=$((SECONDS + 30))
    until [[ $(curl -s "$url/nodes" | python3 -c 'import json,sys; print(sum(1 for n in json.load(sys.stdin) if n["name"] == "worker" and n["status"] == "UP"))' 2>/dev/null) == 1 ]]; do
      if ! kill -0 "$worker" 2>/dev/null; then fail "distributed: the worker exited"; break; fi
      ((SECONDS > deadline)) && { fail "distributed: the worker did not register in GET /nodes"; break; }
      sleep 0.2
    done
    run_literal "$coordinator_copy" "build/baton submit examples/hello.yaml --wait"
    expect "distributed: hello through the coordinator: exit" "$rc" 0
    expect_match "distributed: hello through the coordinator: result" "$out" "hello world"
    # The README: a task with `queue: gpu` runs only on workers consuming `gpu`.
    http POST /jobs -H "Content-Type: text/yaml" --data-binary @- <<'JOB'
name: on gpu
output: "{{ tasks.where }}"
tasks:
  - {name: gpu task, queue: gpu, var: where, run: echo -n gpu > $TORK_OUTPUT}
JOB
    gpu_id=$(js "$body" 'j["id"]')
    wait_done "$gpu_id" 60
    expect "distributed: a gpu task runs on the worker taking gpu:1" \
      "$(js "$body" '[j["state"], j.get("result")]')" '["COMPLETED", "gpu"]'
    stop_pid "distributed: the worker" "$worker"
    stop_pid "distributed: the coordinator" "$coordinator"
  else
    $started_coordinator || fail "distributed: the README starts no coordinator"
    $started_worker || fail "distributed: the README starts no worker"
  fi
fi

if ((failures == 0 && ${#skipped_sections[@]})); then
  echo "the README sections ${skipped_sections[*]} did not run: reporting the suite skipped (77)"
  exit 77
fi
finish readme_tour
