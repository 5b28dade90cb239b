#!/usr/bin/env bash
# Fails when a CTest run skipped a test: a test that did not run is not a test that
# passed. Reads the JUnit file of `ctest --output-junit FILE` (CTest marks skipped both a
# gtest's GTEST_SKIP, through the "[  SKIPPED ]" line gtest_discover_tests matches, and a
# script's exit 77, SKIP_RETURN_CODE) and lists every skipped test with CTest's reason.
# With BATON_TEST_ALLOW_SKIP=1 (a local opt-out, README "The two commands") skips are listed, not
# fatal. --require REGEX (repeatable): at least one test whose name matches REGEX must
# have run and passed, whatever the opt-out (a regex matching nothing is not a pass).
# Usage: check-junit.sh JUNIT_FILE [--require REGEX]...
set -uo pipefail
[[ $# -ge 1 && -f $1 ]] || { echo "check-junit: no JUnit file ${1:-} (ctest --output-junit FILE)"; exit 2; }
python3 - "$@" <<'PY'
import os, re, sys
import xml.etree.ElementTree as ET

path, args = sys.argv[1], sys.argv[2:]
required = []
while args:
    if args[0] == "--require" and len(args) > 1:
        required.append(args[1])
        args = args[2:]
    else:
        sys.exit("check-junit: unknown argument %r" % args[0])
cases = ET.parse(path).getroot().iter("testcase")
ran, skipped = [], []
for case in cases:
    name, status = case.get("name", ""), case.get("status", "")
    skip = case.find("skipped")
    if skip is not None or status in ("notrun", "disabled"):
        out = case.findtext("system-out") or ""
        why = [l.strip() for l in out.splitlines() if "SKIPPED" in l or "skip" in l.lower()]
        reason = skip.get("message", status) if skip is not None else status
        skipped.append((name, reason, why[-1] if why else ""))
    elif status == "run" and case.find("failure") is None:
        ran.append(name)
bad = False
for regex in required:
    if not any(re.search(regex, n) for n in ran):
        print("check-junit: FAILED: no test matching /%s/ ran and passed" % regex)
        bad = True
if skipped:
    allow = os.environ.get("BATON_TEST_ALLOW_SKIP") == "1"
    print("check-junit: %d test(s) skipped%s:" % (len(skipped),
          " (allowed: BATON_TEST_ALLOW_SKIP=1)" if allow else ""))
    for name, reason, why in skipped:
        print("  %s  [%s] %s" % (name, reason, why))
    if not allow:
        print("check-junit: FAILED: a skipped test is not a pass (start what it needs, or "
              "set BATON_TEST_ALLOW_SKIP=1 to allow skips locally)")
        bad = True
if not bad:
    print("check-junit: %d test(s) ran, none skipped" % len(ran) if not skipped else
          "check-junit: %d test(s) ran" % len(ran))
sys.exit(1 if bad else 0)
PY
