#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Rerun bookkeeping for scripts/test (a suite that failed under parallel load).

  test_rerun.py failed LOG.json        names of the suites that did not pass,
                                       one per line, and to stderr each one's
                                       failing cases ("not ok" lines and
                                       check's file:line:F: messages)
  test_rerun.py merge FIRST RERUN OUT  FIRST with each suite RERUN ran
                                       replaced by its rerun; prints the
                                       names whose rerun passed (flaky)

The relay suites start relays, load generators and browsers on two shared
cores beside each other; a case that loses a timing race under that load is
run once more alone. Its first failure is still printed (to find the race);
a suite that fails alone too stays failed.
"""
import json
import re
import sys

PASS = ("OK", "SKIP", "EXPECTEDFAIL")


def load(path):
    with open(path) as f:
        return [json.loads(l) for l in f if l.strip()]


def short(name):
    return name.split(" / ", 1)[-1]


def failed(path):
    for t in load(path):
        if t.get("result") in PASS:
            continue
        print(short(t["name"]))
        text = (t.get("stdout") or "") + "\n" + (t.get("stderr") or "")
        why = [l for l in text.splitlines()
               if l.startswith("not ok") or re.search(r":[FE]:", l)]
        print(f"scripts/test: {short(t['name'])}: {t.get('result')}", file=sys.stderr)
        for l in why[:20]:
            print(f"scripts/test:   {l[:300]}", file=sys.stderr)


def merge(first, rerun, out):
    again = {t["name"]: t for t in load(rerun)}
    with open(out, "w") as f:
        for t in load(first):
            r = again.get(t["name"])
            if r is not None:
                if r.get("result") in PASS:
                    print(short(t["name"]))
                t = r
            f.write(json.dumps(t) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["failed"] and len(sys.argv) == 3:
        failed(sys.argv[2])
    elif sys.argv[1:2] == ["merge"] and len(sys.argv) == 5:
        merge(*sys.argv[2:])
    else:
        sys.exit(__doc__)
