#!/bin/sh
# SPDX-License-Identifier: MIT
# sws-torn.sh: issue 26, "SWS serves a torn small file as if whole". An 8 KB
# file is rewritten in place, one pwrite of the whole file every 30 ms, turn
# by turn two versions whose every page differs, while 4 keep-alive clients
# fetch it from the sws binary on loopback (--cache-valid-ms 0, so that every
# request checks the file and a change is loaded at once, while the write
# may still be copying). apps/sws/tests/swstorn counts the responses: torn (a body
# that is neither version), mismatched (an ETag that came with both), fresh
# (no ETag: the file had not settled; these must say no-store), 304s; then,
# the writes over and the file settled, one GET must carry the last version
# with an ETag that gets 304.
#
# Each run is one SWS, named by its --cache-settle-ms: "default" (SWS's own,
# 1 s: longer than the 30 ms between writes, so every response is a fresh
# read, served without ETag), "N" (N ms), or "N:bursts" (N ms, and the writer
# writes 10 times, then keeps quiet for N + 200 ms, so that the file settles
# and is cached between bursts: some responses must then carry an ETag). The
# runs are by default "default 100:bursts". The test fails on any torn or
# mismatched response, any error, no response, or a bursts run without a
# cached response. ("0": only the clock's tick; on a loaded machine a writer
# preempted mid-write for longer than that tears, which is what the settle
# period is for: a measure, not a test.)
#
#   apps/sws/tests/sws-torn.sh [--seconds S] [--clients N] [--runs "default 100:bursts"] [--sws PATH]
#
# --seconds: each run's length (3 in make check; --seconds 60 for a long run);
# --sws: another binary (the one before the fix tears, and fails; it knows
# only the run "default"). Run from the build directory.
set -u
# shellcheck source=apps/sws/tests/sws-lib.sh
. "$(dirname "$0")/sws-lib.sh"
sws_script_init timeout
seconds=3
clients=4
runs="default 100:bursts"
usage() {
    echo "usage: $0 [--seconds S] [--clients N] [--runs \"default 100:bursts\"] [--sws PATH]"
    exit 2
}
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    case $1 in
    --seconds) seconds=$2 ;;
    --clients) clients=$2 ;;
    --runs) runs=$2 ;;
    --sws) sws=$2 ;;
    *) usage ;;
    esac
    shift 2
done
client=./apps/sws/tests/swstorn
[ -x "$client" ] || { echo "FAIL: $client not built (make check builds it)"; exit 1; }
test_tmpdir sws-torn
mkdir "$tmp/root" || exit 1
: >"$tmp/root/t.bin"

failed=0
for run in $runs; do
    settle=${run%:bursts}
    if [ "$settle" = default ]; then
        opt=
        ms=1000 # SWS's default (doc/sws.md)
    else
        opt="--cache-settle-ms $settle"
        ms=$settle
    fi
    bursts=
    [ "$run" = "$settle" ] || bursts="--burst 10 --quiet-ms $((ms + 200))"
    : >"$tmp/sws.out" # (sws_port may read it before the shell below opens it)
    # shellcheck disable=SC2086
    "$sws" --root "$tmp/root" --port 0 --workers 2 --no-pin --cache-valid-ms 0 $opt \
        >"$tmp/sws.out" 2>"$tmp/sws.err" &
    pid=$!
    port=$(sws_port "$tmp/sws.out" "$pid" 200) || fail "sws exited, or did not print its port in 20 s"
    # (bounded: the run, a quiet period, the settle wait and 60 s)
    # shellcheck disable=SC2086
    line=$(timeout $((${seconds%.*} + 2 * ms / 1000 + 60)) "$client" --port "$port" \
        --file "$tmp/root/t.bin" --seconds "$seconds" --clients "$clients" --settle-ms "$ms" \
        $bursts 2>"$tmp/client.err")
    rc=$?
    echo "$run: $line"
    [ -s "$tmp/client.err" ] && sed 's/^/  /' "$tmp/client.err"
    sws_stop "$pid" 100
    src=$?
    pid=
    [ $rc -eq 0 ] || { echo "FAIL: run $run: swstorn exited $rc"; failed=1; }
    [ $src -eq 0 ] || { echo "FAIL: run $run: sws exited $src after SIGTERM"; failed=1; }
    tagged=$(echo "$line" | awk '{ for (i = 1; i < NF; i++) if ($i == "tagged") print $(i + 1) }')
    if [ -n "$bursts" ] && [ "${tagged:-0}" -eq 0 ]; then
        echo "FAIL: run $run: no response from the cache (with an ETag) between the bursts"
        failed=1
    fi
done
[ $failed -eq 0 ] || exit 1
echo PASS
