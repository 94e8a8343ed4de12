#!/bin/bash
# SPDX-License-Identifier: MIT
# sws-memory.sh: what an idle keep-alive connection costs SWS in memory.
#
#   bench/e2e/sws-memory.sh [N]      (default N = 5000)
#
# Starts apps/sws/sws (2 workers, the built-in sample site, a free port),
# makes one request on a warm-up connection, reads the server's VmRSS
# (/proc/PID/status), then bench/e2e/idle_conns opens N connections, each served
# one request and then left idle, and VmRSS is read again. Prints the growth
# per connection (user-space memory of the server: struct conn, the runtime's
# watch and timer, allocator overhead; the kernel's socket memory is not in
# RSS). Run from the top of the source tree after `make bench` in build/.
# Exit status 0, 1 if a step failed, 2 if a binary is missing.
set -u
# shellcheck source=apps/sws/tests/sws-lib.sh
. "$(dirname "$0")/../../apps/sws/tests/sws-lib.sh"
n=${1:-5000}
case "$n" in '' | *[!0-9]*) echo "usage: bench/e2e/sws-memory.sh [N]" >&2; exit 2 ;; esac
SWS=${SWS_BIN:-build/apps/sws/sws}
IDLE=${IDLE_BIN:-build/bench/e2e/idle_conns}
for b in "$SWS" "$IDLE"; do
    [ -x "$b" ] || { echo "sws-memory.sh: $b not built (make -C build && make -C build bench)" >&2; exit 2; }
done
tmp=$(mktemp -d /tmp/sws-memory.XXXXXX)
pid=
cleanup() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
    exec 3>&- 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

ulimit -n $((n + 1024)) 2>/dev/null || { echo "sws-memory.sh: cannot raise the descriptor limit to $((n + 1024))" >&2; exit 1; }
"$SWS" --port 0 --workers 2 --max-clients $((n + 100)) >"$tmp/sws.out" 2>&1 &
pid=$!
port=$(sws_port "$tmp/sws.out" "$pid" 100) || { echo "sws-memory.sh: sws did not start:"; cat "$tmp/sws.out"; exit 1; }
# the binary may be a libtool wrapper that execs the real one: same pid
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$pid/status"; }

"$IDLE" "$port" 1 / </dev/null >/dev/null || exit 1 # warm-up: first request's allocations
sleep 0.2
before=$(rss)
mkfifo "$tmp/hold"
"$IDLE" "$port" "$n" / <"$tmp/hold" >"$tmp/idle.out" 2>&1 &
idle=$!
exec 3>"$tmp/hold" # keeps idle_conns waiting until closed
for _ in $(seq 600); do
    grep -q '^ready' "$tmp/idle.out" && break
    kill -0 "$idle" 2>/dev/null || break
    sleep 0.1
done
grep -q '^ready' "$tmp/idle.out" || { echo "sws-memory.sh: idle_conns failed:"; cat "$tmp/idle.out"; exit 1; }
sleep 0.5
after=$(rss)
current=$(curl -s "http://127.0.0.1:$port/server-status" 2>/dev/null | awk '/^connections_current:/ { print $2 }')
exec 3>&-
wait "$idle"
echo "machine: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) CPUs, $(uname -sr)"
echo "sws: VmRSS ${before} kB before, ${after} kB with $n idle keep-alive connections${current:+ (server-status: $current current)}"
awk -v a="$after" -v b="$before" -v n="$n" 'BEGIN { printf "per idle connection: %.0f bytes (target <= 4096)\n", (a - b) * 1024 / n }'
sws_stop "$pid" 300
rc=$?
pid=
[ $rc -eq 0 ] || { echo "sws-memory.sh: sws exited $rc"; exit 1; }
