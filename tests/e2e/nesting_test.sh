#!/usr/bin/env bash
# Every nesting runs: each pair of composite kinds (parallel, each, each with concurrency
# 1, subjob) one inside the other, and a few three deep, run by `baton run standalone`
# with inner tasks that leave marks. Every inner task must run exactly once, with the
# loop variables of the loops around it, and the job must complete.
# Usage: nesting_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1
src=$2
# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

start_server
marks=$work_dir/marks

# gen KINDS... : prints the job (YAML flow style) for the nesting, then a line "---",
# then the marks its inner tasks must leave, one a line.
gen() {
  python3 - "$marks" "$@" <<'EOF'
import sys
marks, kinds = sys.argv[1], sys.argv[2:]

def task(level, name):
    if level == len(kinds):
        # `run` is not templated: the name reaches the script through env.
        return ('{name: "%s", env: {P: "%s"}, run: \'echo ran >> "%s/$(echo "$P" | tr / _)"\'}'
                % (name, name, marks))
    k, n = kinds[level], str(level)
    if k == "parallel":
        return "{name: p%s, parallel: {tasks: [%s, %s]}}" % (
            n, task(level + 1, name + "/a"), task(level + 1, name + "/b"))
    if k in ("each", "each1"):
        c = "1" if k == "each1" else "0"
        return ('{name: e%s, each: {list: "{{ [1, 2] }}", var: v%s, concurrency: %s, task: %s}}'
                % (n, n, c, task(level + 1, name + "/{{ v%s.value }}" % n)))
    if k == "subjob":
        return '{name: s%s, subjob: {name: sub%s, inputs: {p: "%s"}, tasks: [%s]}}' % (
            n, n, name, task(level + 1, "{{ inputs.p }}/s"))
    raise SystemExit("unknown kind " + k)

def names(level, name):
    if level == len(kinds):
        return [name]
    k = kinds[level]
    if k == "parallel":
        return names(level + 1, name + "/a") + names(level + 1, name + "/b")
    if k in ("each", "each1"):
        return names(level + 1, name + "/1") + names(level + 1, name + "/2")
    return names(level + 1, name + "/s")

print("name: nesting %s\ntasks:\n  - %s" % (" in ".join(kinds), task(0, "r")))
print("---")
for n in names(0, "r"):
    print(n.replace("/", "_"))
EOF
}

check_nesting() {
  local label="$*" out job expected id
  rm -rf "$marks" && mkdir -p "$marks"
  out=$(gen "$@")
  job=${out%%$'\n'---*}
  expected=${out#*---$'\n'}
  post_yaml <<<"$job"
  id=$(js "$body" 'j["id"]')
  if [[ $status != 200 ]]; then
    fail "$label: not accepted: $body"
    return
  fi
  wait_done "$id" 60
  expect "$label: job state" "$(js "$body" 'j["state"] + " " + (j.get("error") or "")')" "COMPLETED "
  local want got
  want=$(sort <<<"$expected" | tr '\n' ' ')
  got=$(cd "$marks" && ls | sort | tr '\n' ' ')
  expect "$label: every inner task ran" "$got" "$want"
  local twice
  twice=$(cd "$marks" && shopt -s nullglob && for f in *; do [[ $(wc -l <"$f") == 1 ]] || echo "$f"; done)
  expect "$label: no inner task ran twice" "$twice" ""
}

kinds=(parallel each each1 subjob)
for outer in "${kinds[@]}"; do
  for inner in "${kinds[@]}"; do
    check_nesting "$outer" "$inner"
  done
done
check_nesting each1 parallel each
check_nesting each subjob each1
check_nesting subjob each1 subjob
check_nesting parallel each1 each1
finish nesting
