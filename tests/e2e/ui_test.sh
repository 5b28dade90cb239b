#!/usr/bin/env bash
# The web UI in a real browser: web/e2e/*.test.mjs (node:test), each file against its own
# `baton run standalone`, Debian's Chromium driven by playwright-core. Screenshots of
# every page go to build/ui-screenshots/. Fails (never skips) without Chromium or Node.
# Usage: ui_test.sh BATON_BINARY REPO_ROOT
set -euo pipefail
baton="$1"
root="$2"
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
# Two files at a time: each starts its own server and browser; the machine has 2 cores.
exec node --test --test-concurrency=2 --test-reporter=spec e2e/
