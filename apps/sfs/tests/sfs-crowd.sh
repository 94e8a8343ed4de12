#!/bin/sh
# SPDX-License-Identifier: MIT
# sfs-crowd.sh: connections that never send a byte must not keep a real
# client out of apps/sfs/sfsd (doc/sfs.md, "Faults and hostile clients").
# apps/sfs/tests/sfscrowd opens
# the silent connections from 127.0.0.1, then times 5 real clients in turn
# (connect, key exchange, LOOKUP, a READ of 64 KB): each within 1 s.
#
#   apps/sfs/tests/sfs-crowd.sh          make check: two bounded runs,
#     64 silent, --max-conns 16      the table full: the oldest connection in
#                                    its handshake makes room, whatever its address
#     300 silent, the defaults       one address past --max-per-addr (256)
#   apps/sfs/tests/sfs-crowd.sh N [ARG...]   one run of N silent connections, sfsd's
#                                    defaults unless ARGs are given (the
#                                    figure doc/sfs.md reports: N = 1024)
#
# Descriptors: sfscrowd holds N sockets and sfsd as many, each process
# within its own RLIMIT_NOFILE; the soft limit is raised to the hard one
# here, and a hard limit too small for N is a failure (no skip). Run from
# the build directory; every run is bounded by `timeout`.
set -u
crowd=./apps/sfs/tests/sfscrowd
for p in ./apps/sfs/sfsd "$crowd"; do
    [ -x "$p" ] || { echo "FAIL: $p not built (run from the build directory)"; exit 1; }
done

# fit N: a soft descriptor limit that holds N connections and a margin.
fit() {
    need=$(($1 + 128))
    soft=$(ulimit -Sn)
    [ "$soft" = unlimited ] && return 0
    [ "$soft" -ge "$need" ] && return 0
    hard=$(ulimit -Hn)
    if [ "$hard" != unlimited ] && [ "$hard" -lt "$need" ]; then
        echo "FAIL: $1 connections need $need descriptors; the hard limit is $hard (ulimit -Hn)"
        exit 1
    fi
    ulimit -Sn "$need" || { echo "FAIL: ulimit -Sn $need"; exit 1; }
}

# run N [ARG...]: one bounded run; fails the script if sfscrowd does.
run() {
    n=$1
    shift
    fit "$n"
    echo "== $n silent connections, sfsd $*"
    timeout 120 "$crowd" "$n" "$@"
    rc=$?
    [ $rc -eq 124 ] && { echo "FAIL: sfscrowd still ran after 120 s"; exit 1; }
    [ $rc -eq 0 ] || { echo "FAIL: sfscrowd exited $rc"; exit 1; }
}

if [ $# -gt 0 ]; then
    run "$@"
else
    run 64 --max-conns 16
    run 300
fi
echo "PASS"
