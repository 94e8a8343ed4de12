#!/bin/sh
# SPDX-License-Identifier: MIT
# callgraph.sh [-v] OBJ.lo...: the file-level call graph of the runtime's
# objects (libmely-core's: `make -s -C build print-core-objects` lists them),
# and its cycles.
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
# Used by `make check` (tests/callgraph-check.sh) and doc/runtime.md.
set -eu
verbose=0
[ "${1:-}" = -v ] && { verbose=1; shift; }
[ $# -ge 1 ] || { echo "usage: $0 [-v] OBJ.lo..." >&2; exit 2; }

for lo in "$@"; do
    d=$(dirname "$lo"); n=$(basename "$lo" .lo)
    o=$d/$n.o # libtool: the non-PIC object, else the PIC one
    [ -f "$o" ] || o=$d/.libs/$n.o
    [ -f "$o" ] || { echo "callgraph: no object for $lo" >&2; exit 2; }
    n=${n##*libmely_core_la-}
    nm --defined-only -g "$o" | awk -v n="$n" 'NF == 3 { print "D", n, $3 }'
    nm -u "$o" | awk -v n="$n" '{ print "U", n, $2 }'
done | awk -v verbose="$verbose" '
$1 == "D" { def[$3] = $2; node[$2] = 1; next }
{ use[++nu] = $2 " " $3; node[$2] = 1 }
END {
    for (i = 1; i <= nu; i++) {
        split(use[i], p, " ")
        if ((p[2] in def) && def[p[2]] != p[1]) {
            if (!((p[1], def[p[2]]) in e) && verbose) printf "edge %s -> %s (%s)\n", p[1], def[p[2]], p[2]
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
}'
