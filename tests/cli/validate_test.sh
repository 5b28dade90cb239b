#!/usr/bin/env bash
# `baton validate` as a user runs it: exit codes and `file:line:column: message` output.
# Usage: validate_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Every example validates.
if ! out=$("$baton" validate "$src"/examples/* 2>&1); then
  fail "examples do not all validate:"; echo "$out"
fi
count=$(ls "$src"/examples | wc -l)
[[ $(grep -c ': ok$' <<<"$out") -eq $count ]] || fail "expected $count ok lines, got: $out"

# Three mistakes on three lines: three messages with the right lines, exit 1.
file="$src/tests/cli/testdata/three-mistakes.yaml"
out=$("$baton" validate "$file" 2>&1)
status=$?
[[ $status -eq 1 ]] || fail "three mistakes: exit $status, want 1"
expected="$file:6:14: tasks[0].retry.limit: must be between 1 and 10, got 20
$file:9:14: tasks[1].timeout: invalid duration \"ten seconds\": expected a number (use e.g. 500ms, 30s, 1m30s, 2h)
$file:12:15: tasks[2].priority: must be between 0 and 9, got 12"
[[ "$out" == "$expected" ]] || fail "three mistakes: got
$out
want
$expected"

# JSON from standard input, with a syntax error: its position, exit 1.
out=$(printf '{"name": "j",\n "tasks": [\n' | "$baton" validate - 2>&1)
status=$?
[[ $status -eq 1 ]] || fail "stdin syntax error: exit $status, want 1"
[[ "$out" == -:3:* && "$out" == *"JSON syntax error"* ]] || fail "stdin syntax error: got $out"

# A valid job from standard input.
out=$(printf 'name: j\ntasks:\n  - {name: t, run: echo}\n' | "$baton" validate - 2>&1)
[[ $? -eq 0 && "$out" == "-: ok" ]] || fail "valid stdin: got $out"

# Usage errors exit 2: no file, an unreadable file, an unknown command.
"$baton" validate >/dev/null 2>&1; status=$?
[[ $status -eq 2 ]] || fail "no file: exit $status, want 2"
"$baton" validate /nonexistent/job.yaml >/dev/null 2>&1; status=$?
[[ $status -eq 2 ]] || fail "missing file: exit $status, want 2"
"$baton" frobnicate >/dev/null 2>&1; status=$?
[[ $status -eq 2 ]] || fail "unknown command: exit $status, want 2"

# version prints the version.
out=$("$baton" version)
[[ "$out" =~ ^baton\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "version: got $out"

if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all validate checks passed"
