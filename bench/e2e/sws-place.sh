#!/bin/bash
# SPDX-License-Identifier: MIT
# sws-place.sh: where SWS's connections run, by descriptor or by load.
# SWS (apps/sws/sws, its sample site, MELY_STATS=1) is loaded by
# bench/e2e/injector (keep-alive, 50 clients, 150 requests per connection,
# then a new one) with `--placement fd` (the paper's coloring: a
# connection's worker is its descriptor's parity) and `--placement load`
# (a color pool, mely_color_place), in interleaved passes whose order
# alternates (fd/load, then load/fd), a fresh server each run. Per run: the
# injector's req/s, SWS's server CPU per request (/proc), each worker's
# handler runs (MELY_STATS's events_run) and the busier worker's share of
# them, connections placed per worker, and the load average when the run
# began (the machine may be shared: read the split and the ratios beside it).
# Then the medians per placement, the busier share's worst run, and the
# targets: the busier worker runs at most 60% of the handlers in every run
# placed by load, and req/s by load >= by descriptor (medians).
#
#   bench/e2e/sws-place.sh [--seconds S] [--passes N] [--workers N]
#                          [--inj-workers N] [--clients N] [--steal POLICY]
#                          [--hog CPU]
#
#   --seconds S       each load run (default 5)
#   --passes N        interleaved fd/load pairs (default 3, 1..20)
#   --workers N       SWS's workers (default 2)
#   --inj-workers N   the injector's workers (default 1: one client thread,
#                     as issue 29 measured; run-web.sh gives it 2)
#   --clients N       keep-alive clients (default 50)
#   --steal P         SWS's --steal (default off)
#   --hog CPU         during each run, a busy loop pinned to CPU (0 or 1: SWS's
#                     worker 0 or 1 then gets about half of its CPU): a worker
#                     slowed by another program
#
# Run from the top of the source tree after `make bench` (binaries under
# build/, or $SWS_BIN, $INJECTOR_BIN). Writes bench/results/sws-place.csv.
# Exit status: 0 (targets met or not: the table says), 1 if a run failed,
# 2 if a tool is missing or an option is wrong.
set -u
ME=sws-place.sh
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/e2e/lib.sh
. "$top/bench/e2e/lib.sh"
# shellcheck source=apps/sws/tests/sws-lib.sh
. "$top/apps/sws/tests/sws-lib.sh"

seconds=5 passes=3 workers=2 inj_workers=1 clients=50 steal=off hog=
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) seconds="${2:-}"; shift ;;
    --passes) passes="${2:-}"; shift ;;
    --workers) workers="${2:-}"; shift ;;
    --inj-workers) inj_workers="${2:-}"; shift ;;
    --clients) clients="${2:-}"; shift ;;
    --steal) steal="${2:-}"; shift ;;
    --hog) hog="${2:-}"; shift ;;
    -h | --help) awk 'NR > 2 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "$ME: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
whole --seconds "$seconds" 1 600
whole --passes "$passes" 1 20
whole --workers "$workers" 1 64
whole --inj-workers "$inj_workers" 1 64
whole --clients "$clients" 1 10000
[ -z "$hog" ] || whole --hog "$hog" 0 1023

sws=$(find_bin "${SWS_BIN:-}" "$top/build/apps/sws/sws" "$top/apps/sws/sws")
inj=$(find_bin "${INJECTOR_BIN:-}" "$top/build/bench/e2e/injector" "$top/bench/e2e/injector")
[ -n "$sws" ] && [ -n "$inj" ] || { echo "$ME: build sws and bench/e2e/injector first (make bench)" >&2; exit 2; }
HZ=$(getconf CLK_TCK)

results=$top/bench/results
mkdir -p "$results"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sws-place.XXXXXX") || exit 2
cleanup_on_exit

loadavg() { cut -d' ' -f1 /proc/loadavg; }

hog_pid=
hog_start() {
    [ -n "$hog" ] || return 0
    taskset -c "$hog" bash -c 'while :; do :; done' </dev/null >/dev/null 2>&1 &
    hog_pid=$!
}
hog_stop() {
    [ -n "$hog_pid" ] || return 0
    kill "$hog_pid" 2>/dev/null
    wait "$hog_pid" 2>/dev/null
    hog_pid=
}
trap 'hog_stop; cleanup' EXIT

# run PLACEMENT: one load run against a fresh SWS; prints "req/s us/req
# runs0,runs1,... places0,places1,... busier% load", or nothing on failure.
run() {
    local port rps t0 t1 req la
    la=$(loadavg)
    MELY_STATS=1 "$sws" --port 0 --workers "$workers" --steal "$steal" --placement "$1" \
        >"$tmp/sws.out" 2>"$tmp/sws.err" &
    server_pid=$!
    if ! port=$(sws_port "$tmp/sws.out" "$server_pid" 100); then
        echo "$ME: sws did not start:" >&2
        cat "$tmp/sws.out" "$tmp/sws.err" >&2
        stop_server
        return
    fi
    hog_start
    t0=$(server_ticks)
    timeout $((seconds + 60)) "$inj" --port "$port" --clients "$clients" --workers "$inj_workers" \
        --duration "$seconds" --quiet --url / --url /about.html --url /style.css --url /hello.txt \
        >"$tmp/inj.out" 2>&1
    t1=$(server_ticks)
    hog_stop
    local alive=yes
    kill -0 "$server_pid" 2>/dev/null || alive=no
    stop_server # SIGTERM: SWS drains, mely_shutdown prints MELY_STATS's table
    rps=$(awk '$1 == "req/s" { print $2 }' "$tmp/inj.out")
    req=$(awk '$1 == "requests" { print $2; exit }' "$tmp/inj.out")
    if ! grep -q '^errors *0 ' "$tmp/inj.out" || [ -z "$rps" ] || [ -z "$req" ]; then
        echo "$ME: the injector failed or saw errors (sws on port $port still running" \
            "after it: $alive; its stderr follows the injector's report):" >&2
        cat "$tmp/inj.out" >&2
        tail -n 20 "$tmp/sws.err" >&2
        return
    fi
    # MELY_STATS: a header naming the columns, then a row per worker
    awk -v rps="$rps" -v req="$req" -v d=$((t1 - t0)) -v hz="$HZ" -v la="$la" '
        $1 == "worker" && $2 == "events_run" {
            for (i = 1; i <= NF; i++) col[$i] = i; table = 1; next }
        table && $1 ~ /^[0-9]+$/ {
            runs = runs (n ? "," : "") $col["events_run"]
            places = places (n ? "," : "") $col["places"]
            total += $col["events_run"]; if ($col["events_run"] > most) most = $col["events_run"]
            n++; next }
        table { table = 0 }
        END { if (!n || !total) exit 1
              printf "%s %.2f %s %s %.1f %s\n", rps, d / hz * 1e6 / req, runs, places,
                  100 * most / total, la }' "$tmp/sws.err" ||
        { echo "$ME: no MELY_STATS table from sws:" >&2; cat "$tmp/sws.err" >&2; }
}

machine_line
echo "SWS: $workers workers, steal $steal; injector: $clients keep-alive clients (150 requests a" \
    "connection), $inj_workers worker(s); ${seconds} s a run; load average $(cut -d' ' -f1-3 /proc/loadavg) at start"
[ -z "$hog" ] || echo "a busy loop pinned to CPU $hog during each run"
printf '%-5s %-9s %9s %8s %-17s %-13s %8s %6s\n' pass placement "req/s" "us/req" "handler runs" \
    "placed" "busier%" "load"
csv=$results/sws-place.csv
echo "date,pass,placement,req_per_s,server_us_per_req,events_run,places,busier_pct,loadavg1,workers,inj_workers,clients,seconds,hog_cpu" >"$csv"
all="$tmp/all"
: >"$all"
failed=0
for p in $(seq "$passes"); do
    if [ $((p % 2)) -eq 1 ]; then order="fd load"; else order="load fd"; fi
    for pl in $order; do
        out=$(run "$pl")
        if [ -z "$out" ]; then # once more (on this machine whole runs failed at connect, both ways)
            echo "pass $p, $pl: the run failed; once more" >&2
            sleep 1
            out=$(run "$pl")
        fi
        if [ -z "$out" ]; then
            failed=1
            echo "pass $p, $pl: the run failed" >&2
            continue
        fi
        read -r rps us runs places busier la <<<"$out"
        printf '%-5s %-9s %9s %8s %-17s %-13s %8s %6s\n' "$p" "$pl" "$rps" "$us" "$runs" "$places" \
            "$busier" "$la"
        echo "$(date -u +%FT%TZ),$p,$pl,$rps,$us,\"$runs\",\"$places\",$busier,$la,$workers,$inj_workers,$clients,$seconds,$hog" >>"$csv"
        echo "$pl $rps $us $busier $la" >>"$all"
    done
done
[ -s "$all" ] || exit 1
echo
awk "$AWK_MEDIAN"'
    { rps[$1] = rps[$1] " " $2; us[$1] = us[$1] " " $3; bus[$1] = bus[$1] " " $4
      if ($4 > worst[$1]) worst[$1] = $4; la = la " " $5; n[$1]++ }
    END {
        printf "%-9s %6s %10s %8s %15s %14s\n", "placement", "runs", "req/s", "us/req", "busier% median", "busier% worst"
        for (k = 1; k <= 2; k++) {
            p = k == 1 ? "fd" : "load"
            if (!n[p]) continue
            printf "%-9s %6d %10.0f %8.2f %15.1f %14.1f\n", p, n[p], median(rps[p]), median(us[p]),
                median(bus[p]), worst[p]
        }
        printf "load average (1 min) at the runs'\'' starts: median %.2f\n", median(la)
        if (n["fd"] && n["load"]) {
            r = median(rps["load"]) / median(rps["fd"])
            printf "req/s load / fd (medians): %.3f  target >= 1.00: %s\n", r, (r >= 1 ? "PASS" : "MISS")
            printf "busier worker by load, worst run: %.1f%%  target <= 60%%: %s\n", worst["load"],
                (worst["load"] <= 60 ? "PASS" : "MISS")
        }
    }' "$all"
echo "CSV: $csv"
exit $failed
