#!/usr/bin/env python3
# trace-summary.py TRACE: checks that TRACE is Trace Event JSON as mely writes
# it (json.load must accept it whole) and prints what tests/check_trace.c
# compares with the program it traced, one item a line:
#   D <dropped records>
#   W <tid> <thread name>
#   R <color> <tid> <handler name>   handler runs, ordered by timestamp
# Exits non-zero (with a message) on a malformed file.
import json
import sys

with open(sys.argv[1]) as f:
    doc = json.load(f)
events = doc["traceEvents"]
print("D", int(doc["otherData"]["dropped_records"]))
runs = []
for e in events:
    for key in ("ph", "pid", "tid", "ts"):
        if key not in e:
            sys.exit("event without %s: %r" % (key, e))
    if e["ph"] == "M" and e["name"] == "thread_name":
        print("W", e["tid"], e["args"]["name"])
    elif e["ph"] == "X" and e.get("cat") == "run":
        if e["dur"] < 0 or "cycles" not in e["args"]:
            sys.exit("bad run: %r" % e)
        runs.append((e["ts"], e["args"]["color"], e["tid"], e["name"]))
# sorted() is stable: runs of one worker with equal timestamps keep their
# order in the file, which is the order they ran.
for ts, color, tid, name in sorted(runs, key=lambda r: r[0]):
    print("R", color, tid, name)
