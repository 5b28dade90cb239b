#!/usr/bin/env bash
# Tork's web UI's own requests against the binary (tests/e2e/tork_web.py says which).
# Usage: tork_web_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"
start_server
python3 "$src/tests/e2e/tork_web.py" "$url" || failures=1
check_server "after tork-web's requests"
((failures)) && { tail -n 30 "$work_dir/server.log"; exit 1; }
exit 0
