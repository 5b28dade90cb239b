#!/usr/bin/env bash
# scripts/check-format.sh on a scratch tree: it lists exactly the files clang-format would
# change and exits 1, and exits 0 once they are formatted.
# Usage: tests/scripts/check_format_test.sh REPO_ROOT
set -euo pipefail

repo="$1"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
cp "$repo/.clang-format" "$scratch/"
mkdir -p "$scratch/src/a" "$scratch/tests" "$scratch/docs"
printf 'int Clean() { return 1; }\n' >"$scratch/src/a/clean.cc"
printf 'int  Messy( ){return 1;}\n' >"$scratch/src/a/messy.cc"
printf '#pragma once\nint   Messy2();\n' >"$scratch/tests/messy.h"
printf 'int  NotChecked( ){return 1;}\n' >"$scratch/docs/outside.cc"  # not under a checked dir

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

set +e
out="$("$repo/scripts/check-format.sh" "$scratch" 2>/dev/null)"
rc=$?
set -e
[[ $rc -eq 1 ]] || fail "expected exit 1 with unformatted files, got $rc"
expected=$'src/a/messy.cc\ntests/messy.h'
[[ "$out" == "$expected" ]] || fail "expected the two unformatted files listed, got: $out"

clang-format -i --style=file "$scratch/src/a/messy.cc" "$scratch/tests/messy.h"
set +e
out="$("$repo/scripts/check-format.sh" "$scratch" 2>/dev/null)"
rc=$?
set -e
[[ $rc -eq 0 ]] || fail "expected exit 0 once formatted, got $rc: $out"
[[ -z "$out" ]] || fail "expected nothing listed once formatted, got: $out"
echo "check_format_test: ok"
