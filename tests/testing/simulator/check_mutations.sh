#!/usr/bin/env bash
# Puts back, one at a time, each bug in mutations/*.patch (earlier decision bugs, a
# too-narrow ReadsOf, a cancel that forgets its rows' webhooks, graphs' (a parallel's too), switches',
# loops', fallbacks' and a job's cleanup's rules, a pause that starts or leaves queued what it
# holds) into a scratch copy of the tree, builds
# the simulator there and runs it
# as `make test` does: each must fail. Not part of `make test` (each mutant is a build
# of flow and the simulator, minutes on a shared machine).
#   tests/testing/simulator/check_mutations.sh [PATCH...]
# Exits 0 when every mutant was caught; prints, per patch, the failing line and the time.
set -euo pipefail

root="$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
here="$root/tests/testing/simulator"
patches=("$@")
[ ${#patches[@]} -gt 0 ] || patches=("$here"/mutations/*.patch)
scratch="$(mktemp -d "${TMPDIR:-/tmp}/baton-mutants.XXXXXX")"
trap 'git -C "$root" worktree remove --force "$scratch/tree" >/dev/null 2>&1 || true; rm -rf "$scratch"' EXIT

git -C "$root" worktree add --detach "$scratch/tree" HEAD >/dev/null
tree="$scratch/tree"
# The working tree's simulator (it may be newer than HEAD's).
cp "$here"/*.cc "$here"/*.h "$here"/CMakeLists.txt "$tree/tests/testing/simulator/"
build="$tree/build/debug"
cmake --preset debug -S "$tree" >/dev/null

missed=0
for patch in "${patches[@]}"; do
  name="$(basename "$patch" .patch)"
  git -C "$tree" checkout -q -- src
  git -C "$tree" apply "$patch"
  cmake --build "$build" --target flow_simulator_test >"$scratch/$name.build" 2>&1 ||
    { echo "$name: does not build"; tail -20 "$scratch/$name.build"; missed=1; continue; }
  start=$(date +%s)
  if "$build/tests/testing/simulator/flow_simulator_test" >"$scratch/$name.log" 2>&1; then
    echo "$name: NOT CAUGHT ($(( $(date +%s) - start )) s)"
    grep ' jobs (' "$scratch/$name.log" || true
    missed=1
  else
    echo "$name: caught in $(( $(date +%s) - start )) s: $(grep -m1 '^seed ' "$scratch/$name.log")"
  fi
done
git -C "$tree" checkout -q -- src
exit $missed
