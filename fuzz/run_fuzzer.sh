#!/usr/bin/env bash
# Runs a libFuzzer binary for a fixed time from a scratch copy of its seed corpora, so
# the inputs it discovers never land in the repository. Fails on any crash, leak or hang.
# Usage: run_fuzzer.sh FUZZER SECONDS "CORPUS_DIR[;CORPUS_DIR...]"
set -euo pipefail
fuzzer=$1 seconds=$2 corpora=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/corpus" "$work/artifacts"
IFS=';' read -ra dirs <<<"$corpora"
for d in "${dirs[@]}"; do
  cp -r "$d"/. "$work/corpus/" 2>/dev/null || true
done
"$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/" "$work/corpus" 2>&1 | tail -n 40
status=${PIPESTATUS[0]}
if compgen -G "$work/artifacts/*" >/dev/null; then
  echo "fuzzer found failing inputs:" >&2
  for f in "$work"/artifacts/*; do echo "--- $f" >&2; head -c 2000 "$f" | od -c | head -n 20 >&2; done
  exit 1
fi
exit "$status"
