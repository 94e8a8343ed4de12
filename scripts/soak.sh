#!/bin/sh
# SPDX-License-Identifier: MIT
# soak.sh: runs the ordering suites again and again beside CPU hogs, and
# keeps what a failing run left: its log and, for a disorder, the records of
# the events around it (check_deliver writes them to $MELY_SOAK_DIR: the
# worker that posted each event, the owner it saw, the worker that ran it,
# the times, and the mover's log over that span).
#
# usage: scripts/soak.sh [--runs N] [--hogs K] [--scale S] [--build DIR]
#                        [--out DIR] [--seconds T] [SUITE[:CASE]]...
#   --runs N     rounds (default 2000); each round runs every suite once
#   --seconds T  stop after T seconds even if rounds are left (default: none)
#   --hogs K     CPU-bound processes beside the suites (default 2)
#   --scale S    MELY_TEST_SCALE for the suites (default 0.25: short runs)
#   --build DIR  the build directory (default: build)
#   --out DIR    where failing runs' logs and records go (default:
#                soak-out/<date>)
#   SUITE[:CASE] a test program of DIR/tests and a Check case of it
#                (default: check_deliver:moves check_deliver:inbox check_order)
# Prints one line per 100 rounds and a summary; exits 1 if a run failed, 2
# on a usage error. Each run is bounded (timeout 300 s).
set -u

runs=2000
hogs=2
scale=0.25
build=build
out=
seconds=0
suites=

while [ $# -gt 0 ]; do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --hogs) hogs=$2; shift 2 ;;
    --scale) scale=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    -h|--help) sed -n '3,23p' "$0"; exit 0 ;;
    -*) echo "soak.sh: unknown option $1" >&2; exit 2 ;;
    *) suites="$suites $1"; shift ;;
    esac
done
[ -n "$suites" ] || suites="check_deliver:moves check_deliver:inbox check_order"
[ -n "$out" ] || out=soak-out/$(date +%Y%m%d-%H%M%S)
for s in $suites; do
    bin=$build/tests/${s%%:*}
    if [ ! -x "$bin" ]; then
        echo "soak.sh: $bin not found (build first: make -C $build check TESTS=)" >&2
        exit 2
    fi
done
mkdir -p "$out/records" || exit 2
out=$(cd "$out" && pwd)

pids=
stop_hogs() {
    for p in $pids; do kill "$p" 2>/dev/null; done
}
trap 'stop_hogs' EXIT
trap 'exit 1' HUP INT TERM
i=0
while [ "$i" -lt "$hogs" ]; do
    sh -c 'while :; do :; done' &
    pids="$pids $!"
    i=$((i + 1))
done

start=$(date +%s)
round=0
total=0
failed=0
disorders=0
while [ "$round" -lt "$runs" ]; do
    if [ "$seconds" -gt 0 ] && [ $(($(date +%s) - start)) -ge "$seconds" ]; then
        echo "soak.sh: $seconds s reached"
        break
    fi
    round=$((round + 1))
    for s in $suites; do
        name=${s%%:*}
        case $s in *:*) tcase=${s#*:} ;; *) tcase= ;; esac
        log=$out/current.log
        MELY_SOAK_DIR=$out/records MELY_TEST_SCALE=$scale CK_RUN_CASE=$tcase \
            timeout 300 "$build/tests/$name" >"$log" 2>&1
        rc=$?
        total=$((total + 1))
        if [ "$rc" -ne 0 ]; then
            failed=$((failed + 1))
            keep=$out/fail-$round-$name${tcase:+-$tcase}.log
            mv "$log" "$keep"
            if grep -q 'ran after\|out of order' "$keep"; then
                disorders=$((disorders + 1))
            fi
            echo "round $round: $s failed (exit $rc): $keep"
            grep -E ':[FE]:|records of' "$keep" | head -5 | sed 's/^/    /'
        fi
    done
    if [ $((round % 100)) -eq 0 ]; then
        echo "round $round: $total runs, $failed failed, $disorders disorders, $(($(date +%s) - start)) s"
    fi
done
rm -f "$out/current.log"
echo "soak: $round rounds, $total runs of [$suites ] with $hogs hogs at scale $scale:" \
    "$failed failed, $disorders disorders ($(($(date +%s) - start)) s; logs and records: $out)"
[ "$failed" -eq 0 ]
