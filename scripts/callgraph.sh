#!/bin/sh
# SPDX-License-Identifier: MIT
# callgraph.sh [-v] OBJ.lo...: the file-level call graph of the runtime's
# objects (libmely-core's: `make -s -C build print-core-objects` lists them),
# its cycles, and the rooms' rules.
#
# One node per .c file; an edge A -> B where A's object refers to a symbol
# that B's object defines (a call, or a read of a variable such as
# mely__self). Inline functions count where they are compiled in: a
# header's inline that calls park.c makes every file that uses it depend on
# park.c, which is what matters for layering. Prints each file with its
# level (0: calls no other file of the runtime; otherwise one more than the
# highest file it calls), every cycle (a set of files that reach each other),
# and with -v every edge. Exits 1 if there is a cycle.
#
# The rooms (mely/'s folders, doc/runtime.md's "Layers") have ranks, from
# the bottom: queue/ 0, core/ 1, topology/ 2, remote/ 3, steal/ 4,
# observe/ 5, sched/ 6, io/ 7, legacy/ 8, and mely/ itself (the runtime
# object and its life cycle) 9. A file calls, and includes, only files of
# its room or of a lower one; mely/runtime.h, the runtime object, may be
# included from any room but queue/. The exceptions, each with its reason,
# are in the lists below. Exits 1 if a rule is broken.
#
# Used by `make check` (tests/build/callgraph-check.sh) and doc/runtime.md.
set -eu
verbose=0
[ "${1:-}" = -v ] && { verbose=1; shift; }
[ $# -ge 1 ] || { echo "usage: $0 [-v] OBJ.lo..." >&2; exit 2; }
top=$(cd "$(dirname "$0")/.." && pwd)

# Calls across the ranks that the design allows: FROM-FILE TO-FILE.
#   The scheduler reaches the I/O layer only through io/poller.h: it polls
#   while idle and between batches, and sleeps in a blocking poll. Those
#   calls take the worker; the I/O state (io/iostate.h) stays the I/O layer's.
call_exceptions='
idle poller
worker poller
'
# Includes across the ranks that the design allows: FROM-FILE TO-HEADER.
include_exceptions='
mely/queue/freelist.c mely/runtime.h the depot and the event budget live in the runtime object
mely/steal/steal.c mely/observe/trace.h a steal is traced: inline records, no call
mely/sched/idle.c mely/io/poller.h the scheduler reaches the I/O layer through io/poller.h
mely/sched/worker.c mely/io/poller.h the scheduler reaches the I/O layer through io/poller.h
mely/remote/enqueue.h mely/steal/cost.h a post joins the stealing-queue by its expected cost (the enqueue is compiled with or without it per policy: enqueue.h)
mely/remote/enqueue.h mely/steal/steal.h a post joins the stealing-queue by its expected cost (the enqueue is compiled with or without it per policy: enqueue.h)
'

rank_of_room() {
    case $1 in
    queue) echo 0 ;; core) echo 1 ;; topology) echo 2 ;; remote) echo 3 ;; steal) echo 4 ;;
    observe) echo 5 ;; sched) echo 6 ;; io) echo 7 ;; legacy) echo 8 ;; top) echo 9 ;;
    *) echo "callgraph: unknown room $1 (give it a rank in scripts/callgraph.sh)" >&2; exit 2 ;;
    esac
}
room_of_path() { # mely/ROOM/x.c -> ROOM; mely/x.c -> top
    p=${1#*mely/}
    case $p in */*) echo "${p%%/*}" ;; *) echo top ;; esac
}

status=0
# Includes: every file of the rooms, from the source tree.
for f in $(cd "$top" && find mely -name '*.[ch]' | sort); do
    fr=$(rank_of_room "$(room_of_path "$f")")
    for h in $(sed -n 's|^#[ ]*include "\(mely/[^"]*\)".*|\1|p' "$top/$f"); do
        hr=$(rank_of_room "$(room_of_path "$h")")
        [ "$hr" -le "$fr" ] && continue
        [ "$h" = mely/runtime.h ] && [ "$fr" -gt 0 ] && continue
        echo "$include_exceptions" | grep -q "^$f $h " && continue
        echo "rule: $f includes $h, a higher room's"
        status=1
    done
done

for lo in "$@"; do
    d=$(dirname "$lo"); n=$(basename "$lo" .lo)
    o=$d/$n.o # libtool: the non-PIC object, else the PIC one
    [ -f "$o" ] || o=$d/.libs/$n.o
    [ -f "$o" ] || { echo "callgraph: no object for $lo" >&2; exit 2; }
    n=${n##*libmely_core_la-}
    r=$(rank_of_room "$(room_of_path "$d/x")")
    echo "R $n $r"
    nm --defined-only -g "$o" | awk -v n="$n" 'NF == 3 { print "D", n, $3 }'
    nm -u "$o" | awk -v n="$n" '{ print "U", n, $2 }'
done | awk -v verbose="$verbose" -v exc="$call_exceptions" '
BEGIN { m = split(exc, x, "\n"); for (i = 1; i <= m; i++) if (x[i] != "") allowed[x[i]] = 1 }
$1 == "R" { rank[$2] = $3; next }
$1 == "D" { def[$3] = $2; node[$2] = 1; next }
{ use[++nu] = $2 " " $3; node[$2] = 1 }
END {
    bad = 0
    for (i = 1; i <= nu; i++) {
        split(use[i], p, " ")
        if ((p[2] in def) && def[p[2]] != p[1]) {
            if (!((p[1], def[p[2]]) in e) && verbose) printf "edge %s -> %s (%s)\n", p[1], def[p[2]], p[2]
            if (!((p[1], def[p[2]]) in e) && rank[def[p[2]]] > rank[p[1]] && !((p[1] " " def[p[2]]) in allowed)) {
                printf "rule: %s (rank %d) calls %s (rank %d): %s\n", p[1], rank[p[1]], def[p[2]], rank[def[p[2]]], p[2]
                bad = 1
            }
            e[p[1], def[p[2]]] = 1
        }
    }
    for (a in node) for (b in node) r[a, b] = ((a, b) in e)
    for (k in node) for (a in node) if (r[a, k]) for (b in node) if (r[k, b]) r[a, b] = 1
    ncyc = 0
    for (a in node) {
        if (a in seen) continue
        s = a; seen[a] = 1
        for (b in node) if (b != a && r[a, b] && r[b, a]) { s = s " " b; seen[b] = 1 }
        if (s != a) { printf "cycle: %s\n", s; ncyc++ }
    }
    if (ncyc) { printf "%d cycle(s)\n", ncyc; exit 1 }
    # Levels by longest path; at most one pass per node, since there is no cycle.
    for (a in node) lvl[a] = 0
    for (pass = 0; pass < length(node); pass++)
        for (a in node) for (b in node) if (((a, b) in e) && lvl[a] <= lvl[b]) lvl[a] = lvl[b] + 1
    for (a in node) printf "level %2d  %s\n", lvl[a], a | "sort -n -k2"
    close("sort -n -k2")
    print "0 cycles"
    if (bad) { print "a room calls a higher one (scripts/callgraph.sh, the rules)"; exit 1 }
    print "0 rule broken"
}' || status=1
exit $status
