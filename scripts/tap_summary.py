#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Count test cases (TAP lines) across meson's test logs; print one line.

Usage: tap_summary.py LOG.json... [N...]
Each LOG.json is a build's meson-logs/testlog.json (the normal build, then
build-asan in CI); each bare number N that is not 0 counts one more failure
(the fuzz run's exit status, sanitizer reports outside any test's TAP).
A test binary that produced no TAP lines counts as one case by its result.
"""
import json
import re
import sys

passed = failed = skipped = 0
logs = [a for a in sys.argv[1:] if not re.fullmatch(r"-?[0-9]*", a)]
extra = [a for a in sys.argv[1:] if re.fullmatch(r"-?[0-9]*", a)]
for path in logs:
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        failed += 1  # a build that never ran its tests
        continue
    for line in lines:
        t = json.loads(line)
        out = t.get("stdout") or ""
        cases = failed_here = 0
        for l in out.splitlines():
            m = re.match(r"^(not ok|ok)\b(.*)$", l)
            if not m:
                continue
            cases += 1
            if re.search(r"#\s*skip", m.group(2), re.I):
                skipped += 1
            elif m.group(1) == "ok":
                passed += 1
            else:
                failed += 1
                failed_here += 1
        if cases == 0:
            r = t.get("result", "")
            if r in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif r == "SKIP":
                skipped += 1
            else:
                failed += 1
        elif t.get("result") not in ("OK", "SKIP", "EXPECTEDFAIL") and failed_here == 0:
            failed += 1  # crashed or timed out after its last TAP line
for n in extra:
    if n not in ("", "0"):
        failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
