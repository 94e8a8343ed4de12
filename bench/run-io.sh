#!/bin/sh
# run-io.sh: the I/O benchmarks in one command: bench/wakeup (wake-up latency of
# a parked worker next to the machine's floor), then bench/echo (echo over
# loopback, mely next to libevent). Builds nothing: run `make bench` first.
#
#   bench/run-io.sh [--quick]
#
# Run from the top of the source tree. The programs are looked for in
# $WAKEUP_BIN / $ECHO_BIN, then build/bench/, then bench/ (an in-tree build).
# CSV files go to bench/results/ (wakeup.csv, echo.csv, echo-targets.csv).
# Takes about 2.5 minutes (--quick: about 10 s). Exit status: 1 if either
# program failed or has rows without figures (targets that are missed do not
# change it: read the tables), 2 if a program is missing.
set -u

quick=
case "${1:-}" in
--quick) quick=--quick ;;
"") ;;
*)
    echo "usage: bench/run-io.sh [--quick]" >&2
    exit 2
    ;;
esac

find_bin() { # name, override
    if [ -n "$2" ]; then
        echo "$2"
        return
    fi
    for b in "build/bench/$1" "bench/$1"; do
        if [ -x "$b" ]; then
            echo "$b"
            return
        fi
    done
}

wakeup=$(find_bin wakeup "${WAKEUP_BIN:-}")
echo_=$(find_bin echo "${ECHO_BIN:-}")
for b in "$wakeup" "$echo_"; do
    if [ -z "$b" ] || [ ! -x "$b" ]; then
        echo "run-io.sh: bench/wakeup or bench/echo not built: run 'make bench' (in build/ or" \
            "the source tree), or set WAKEUP_BIN and ECHO_BIN" >&2
        exit 2
    fi
done

status=0
"$wakeup" $quick --csv bench/results/wakeup.csv || status=1
echo
"$echo_" $quick --csv bench/results/echo.csv || status=1
exit "$status"
