#!/bin/sh
# SPDX-License-Identifier: MIT
# run-io.sh: the I/O benchmarks in one command: bench/wakeup (wake-up latency of
# a parked worker next to the machine's floor), then bench/e2e/echo (echo over
# loopback, mely next to libevent). Builds nothing: run `make bench` first.
#
#   bench/run-io.sh [--quick]
#
# Run from the top of the source tree. The programs are looked for in
# $WAKEUP_BIN / $ECHO_BIN, then build/, then the source tree (an in-tree
# build). CSV files go to bench/results/. Exit status: 1 if either program
# failed or has rows without figures, 2 if a program is missing.
set -u
case "${1:-}" in
--quick | "") quick=${1:-} ;;
*) echo "usage: bench/run-io.sh [--quick]" >&2; exit 2 ;;
esac
find_bin() { # override, then path under build/ or the source tree
    [ -n "$1" ] && { echo "$1"; return; }
    for b in "build/$2" "$2"; do [ -x "$b" ] && { echo "$b"; return; }; done
}
wakeup=$(find_bin "${WAKEUP_BIN:-}" bench/wakeup)
echo_=$(find_bin "${ECHO_BIN:-}" bench/e2e/echo)
if [ ! -x "${wakeup:-/}" ] || [ ! -x "${echo_:-/}" ]; then
    echo "run-io.sh: bench/wakeup or bench/e2e/echo not built: run 'make bench' (in build/ or" \
        "the source tree), or set WAKEUP_BIN and ECHO_BIN" >&2
    exit 2
fi
status=0
"$wakeup" $quick --csv bench/results/wakeup.csv || status=1
echo
"$echo_" $quick --csv bench/results/echo.csv || status=1
exit "$status"
