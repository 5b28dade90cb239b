#!/usr/bin/env bash
# The standing hostile-input suite over the real binary (tests/e2e/hostile.py says what it
# covers), while a client polls GET /health every 100 ms and must always be answered
# within a second.
# Usage: hostile_test.sh BATON SOURCE_DIR
set -uo pipefail
baton=$1 src=$2
source "$src/tests/e2e/lib.sh"
export BATON_WORKER_QUEUES=default:8
start_server
python3 "$src/tests/e2e/hostile.py" "$url" "$data_dir" "$server_pid" "$work_dir/server.log"
code=$?
((code == 0)) || failures=1
check_server "after the hostile suite"
((failures)) && exit 1
exit 0
