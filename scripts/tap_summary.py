#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Count test cases (TAP lines) across meson's test log; print one line.

Usage: tap_summary.py build/meson-logs/testlog.json [fuzz_rc]
A test binary that produced no TAP lines counts as one case by its result.
"""
import json
import re
import sys

passed = failed = skipped = 0
try:
    lines = open(sys.argv[1]).read().splitlines()
except FileNotFoundError:
    lines = []
if True:
    for line in lines:
        t = json.loads(line)
        out = t.get("stdout") or ""
        cases = 0
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
        if cases == 0:
            r = t.get("result", "")
            if r in ("OK", "EXPECTEDFAIL"):
                passed += 1
            elif r == "SKIP":
                skipped += 1
            else:
                failed += 1
        elif t.get("result") not in ("OK", "SKIP", "EXPECTEDFAIL") and failed == 0:
            failed += 1  # crashed or timed out after its last TAP line
if len(sys.argv) > 2 and sys.argv[2] not in ("", "0"):
    failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
