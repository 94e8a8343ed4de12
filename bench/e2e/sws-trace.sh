#!/bin/bash
# SPDX-License-Identifier: MIT
# sws-trace.sh: what tracing costs SWS under load, and a trace to look at.
# SWS (apps/sws/sws, its sample site) is loaded by bench/e2e/injector
# (keep-alive, 50 clients) with tracing off and on (`sws --trace FILE`), in
# interleaved passes whose order alternates (off/on, then on/off), a fresh
# server each run; prints each run's req/s, the medians and their ratio
# (target: on >= 0.9x off). The last traced run's file is kept and read by
# tools/mely-trace, which prints its summary and draws its picture.
#
#   bench/e2e/sws-trace.sh [--seconds S] [--passes N] [--workers N]
#                          [--steal POLICY] [--png OUT.png]
#
#   --seconds S    each load run (default 5)
#   --passes N     interleaved off/on pairs (default 3, 1..20)
#   --workers N    SWS's workers (default 2); the injector gets 1 worker
#   --steal P      SWS's --steal (default off)
#   --png OUT      the picture (default bench/results/sws-trace.png)
#
# Run from the top of the source tree after `make bench` (binaries under
# build/, or $SWS_BIN, $INJECTOR_BIN). Writes bench/results/sws-trace.csv
# and keeps the trace as bench/results/sws-trace.json.
# Exit status: 0, 1 if a run failed, 2 if a tool is missing or an option is wrong.
set -u
ME=sws-trace.sh
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/e2e/lib.sh
. "$top/bench/e2e/lib.sh"
# shellcheck source=apps/sws/tests/sws-lib.sh
. "$top/apps/sws/tests/sws-lib.sh"

seconds=5 passes=3 workers=2 steal=off png=$top/bench/results/sws-trace.png
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) seconds="${2:-}"; shift ;;
    --passes) passes="${2:-}"; shift ;;
    --workers) workers="${2:-}"; shift ;;
    --steal) steal="${2:-}"; shift ;;
    --png) png="${2:-}"; shift ;;
    -h | --help) awk 'NR > 2 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "$ME: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
whole --seconds "$seconds" 1 600
whole --passes "$passes" 1 20
whole --workers "$workers" 1 64

sws=$(find_bin "${SWS_BIN:-}" "$top/build/apps/sws/sws" "$top/apps/sws/sws")
inj=$(find_bin "${INJECTOR_BIN:-}" "$top/build/bench/e2e/injector" "$top/bench/e2e/injector")
tool=$top/tools/mely-trace
[ -n "$sws" ] && [ -n "$inj" ] || { echo "$ME: build sws and bench/e2e/injector first (make bench)" >&2; exit 2; }

results=$top/bench/results
mkdir -p "$results"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sws-trace.XXXXXX") || exit 2
cleanup_on_exit

# run MODE: one load run against a fresh SWS, tracing when MODE is on;
# prints its req/s (empty on failure).
run() {
    local trace=() port rps
    [ "$1" = on ] && trace=(--trace "$tmp/trace.json")
    "$sws" --port 0 --workers "$workers" --steal "$steal" "${trace[@]}" >"$tmp/sws.out" 2>&1 &
    server_pid=$!
    if ! port=$(sws_port "$tmp/sws.out" "$server_pid" 100); then
        echo "$ME: sws did not start:" >&2
        cat "$tmp/sws.out" >&2
        stop_server
        return
    fi
    timeout $((seconds + 60)) "$inj" --port "$port" --clients 50 --workers 1 --duration "$seconds" \
        --quiet --url / --url /about.html --url /style.css --url /hello.txt >"$tmp/inj.out" 2>&1
    rps=$(awk '$1 == "req/s" { print $2 }' "$tmp/inj.out")
    grep -q '^errors *0 ' "$tmp/inj.out" || { echo "$ME: the injector saw errors:" >&2; cat "$tmp/inj.out" >&2; rps=; }
    stop_server
    echo "$rps"
}

machine_line
echo "SWS: $workers workers, steal $steal; injector: 50 keep-alive clients, 1 worker; ${seconds} s a run"
printf '%-6s %12s %12s %8s\n' pass "off req/s" "on req/s" "on/off"
off_all= on_all= failed=0
csv=$results/sws-trace.csv
echo "date,pass,off_rps,on_rps,ratio" >"$csv"
for p in $(seq "$passes"); do
    if [ $((p % 2)) -eq 1 ]; then off=$(run off); on=$(run on); else on=$(run on); off=$(run off); fi
    [ -n "$off" ] && [ -n "$on" ] || { failed=1; echo "pass $p: a run failed" >&2; continue; }
    ratio=$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.3f", a / b }')
    printf '%-6s %12s %12s %8s\n' "$p" "$off" "$on" "$ratio"
    echo "$(date -u +%FT%TZ),$p,$off,$on,$ratio" >>"$csv"
    off_all="$off_all $off" on_all="$on_all $on"
done
[ -n "$off_all" ] || exit 1
awk -v off="$off_all" -v on="$on_all" "$AWK_MEDIAN"' BEGIN {
    m_off = median(off); m_on = median(on); r = m_on / m_off
    printf "%-6s %12.0f %12.0f %8.3f  target >= 0.90: %s\n", "median", m_off, m_on, r, (r >= 0.9 ? "PASS" : "MISS") }'

if [ -f "$tmp/trace.json" ]; then
    cp "$tmp/trace.json" "$results/sws-trace.json"
    echo
    echo "The last traced run's trace ($results/sws-trace.json), read by mely-trace:"
    python3 "$tool" --top 8 --png "$png" "$results/sws-trace.json" || failed=1
    echo "picture: $png"
fi
exit $failed
