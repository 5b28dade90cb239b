#!/usr/bin/env bash
# The web UI in a real browser: web/e2e/*.test.mjs (node:test), each file against its own
# `baton run standalone`, Debian's Chromium driven by playwright-core. Screenshots of
# every page go to build/ui-screenshots/. Fails (never skips) without Chromium or Node.
# Usage: ui_test.sh BATON_BINARY REPO_ROOT
set -euo pipefail
baton=$(realpath "$1")
root=$(cd "$2" && pwd)
chromium="${BATON_CHROMIUM:-/usr/bin/chromium}"
if [[ ! -x "$chromium" ]]; then
  echo "ui_test: no browser at $chromium (scripts/install-deps.sh test installs chromium)" >&2
  exit 1
fi
if [[ ! -d "$root/web/node_modules/playwright-core" ]]; then
  echo "ui_test: web/node_modules is missing playwright-core: run scripts/build-web.sh first" >&2
  exit 1
fi
export BATON_BIN="$baton"
export BATON_SCREENSHOTS="${BATON_SCREENSHOTS:-$root/build/ui-screenshots}"
cd "$root/web"
shopt -s nullglob
files=(e2e/*.test.mjs)
if ((${#files[@]} == 0)); then
  echo "ui_test: no browser tests in web/e2e/" >&2
  exit 1
fi
tap=$(mktemp)
trap 'rm -f "$tap"' EXIT
# Two files at a time: each starts its own server and browser; the machine has 2 cores.
# The spec report for the log; the TAP one to check that tests ran and none was skipped
# (a skip is a failure here, as everywhere in `make test`).
rc=0
node --test --test-concurrency=2 --test-reporter=spec --test-reporter-destination=stdout \
  --test-reporter=tap --test-reporter-destination="$tap" "${files[@]}" || rc=$?
pass=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$tap")
skip=$(sed -n 's/^# skip \([0-9]*\)$/\1/p' "$tap")
todo=$(sed -n 's/^# todo \([0-9]*\)$/\1/p' "$tap")
echo "ui_test: ${pass:-0} passed, ${skip:-0} skipped, ${todo:-0} todo, exit $rc"
if ((rc != 0)); then exit "$rc"; fi
if [[ -z $pass || $pass -eq 0 ]]; then
  echo "ui_test: no test passed" >&2
  exit 1
fi
if [[ ${skip:-0} -ne 0 || ${todo:-0} -ne 0 ]]; then
  echo "ui_test: a skipped or todo test is a failure" >&2
  exit 1
fi
