#!/bin/bash
# SPDX-License-Identifier: MIT
# run-pubsub.sh: the publish/subscribe benchmark (protocol: bench/e2e/pubsub.h).
# mely's broker (examples/pubsub, on mely streams) with MELY_WORKERS=1 and 2,
# next to the same broker on libevent bufferevents, one thread
# (bench/e2e/pubsub_bufferevent), each loaded by the same closed-loop client
# that checks every delivery (bench/e2e/pubsub_client: 200 subscribers, 20
# rooms, 2 rooms each, 50 publishers, 32-byte payloads, 64 messages in flight
# per publisher). bench/README.md explains the load and the figures.
#
#   bench/e2e/run-pubsub.sh [--passes N] [--quick] [--msgs X] [--only ROWS]
#                           [--client-threads T] [--client-args "..."]
#
#   --passes N          interleaved passes (default 3, 1..20): pass 1 of every
#                       row, then pass 2, ...; the rows' order rotates per pass
#   --quick             --msgs 2000: seconds a pass, to check that all works
#                       (too noisy to quote)
#   --msgs X            messages per publisher (default 20000: 20M deliveries)
#   --only ROWS         of bev, mely-1w, mely-2w (default: all; the mely rows
#                       need examples/pubsub)
#   --client-threads T  the client's threads, 1 or 2 (default 1)
#   --client-args "..." more pubsub_client options (--subs, --rooms,
#                       --rooms-per-sub, --pubs, --payload, --window)
#
# Run from the top of the source tree once the binaries are built (make check,
# or in build/: make bench/e2e/pubsub_bufferevent bench/e2e/pubsub_client
# examples/pubsub). Binaries: $PUBSUB_BEV_BIN, $PUBSUB_MELY_BIN,
# $PUBSUB_CLIENT_BIN, else build/, else the source tree. Without
# examples/pubsub only the bufferevent row runs (said so). Nothing is pinned:
# the client shares the CPUs with the broker, as on the 2-vCPU guests, and
# MELY_* variables other than MELY_WORKERS pass through. Each run's broker
# must end by SIGTERM with its stderr line agreeing with the client (P = pubs x
# msgs, D = deliveries, C = 0), else the run fails. Bounded: the client's
# --seconds-limit (120 s; the quick load: 60), 10 s for a broker to say its
# port and to end. Writes bench/results/pubsub.csv; progress on stderr.
# Exit status: 0 (a missed target too), 1 if a run failed, 2 for a usage error
# or a missing binary.
set -u
ME=run-pubsub.sh
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/e2e/lib.sh
. "$top/bench/e2e/lib.sh"

usage="usage: bench/e2e/run-pubsub.sh [--passes N] [--quick] [--msgs X] [--only ROWS]
       [--client-threads T] [--client-args \"...\"]"
all_rows="bev mely-1w mely-2w"
passes=3 msgs=20000 rows_sel=$all_rows cthreads=1 cargs='' limit=120
while [ $# -gt 0 ]; do
    case "$1" in
    --passes) passes="${2:-}"; shift ;;
    --quick) msgs=2000 limit=60 ;;
    --msgs) msgs="${2:-}"; shift ;;
    --only) rows_sel=$(pick --only "${2:-}" "$all_rows") || exit 2; shift ;;
    --client-threads) cthreads="${2:-}"; shift ;;
    --client-args) cargs="${2:-}"; shift ;;
    -h | --help) awk 'NR > 2 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "$ME: unknown option '$1'" >&2; echo "$usage" >&2; exit 2 ;;
    esac
    shift
done
whole --passes "$passes" 1 20
whole --msgs "$msgs" 1 100000000
whole --client-threads "$cthreads" 1 2

BEV=$(find_bin "${PUBSUB_BEV_BIN:-}" "$top/build/bench/e2e/pubsub_bufferevent" \
    "$top/bench/e2e/pubsub_bufferevent")
MELY=$(find_bin "${PUBSUB_MELY_BIN:-}" "$top/build/examples/pubsub" "$top/examples/pubsub")
CLIENT=$(find_bin "${PUBSUB_CLIENT_BIN:-}" "$top/build/bench/e2e/pubsub_client" \
    "$top/bench/e2e/pubsub_client")
if [ -z "$BEV" ] || [ -z "$CLIENT" ]; then
    echo "$ME: bench/e2e/pubsub_bufferevent or bench/e2e/pubsub_client not built: in build/," \
        "make bench/e2e/pubsub_bufferevent bench/e2e/pubsub_client (or set PUBSUB_BEV_BIN," \
        "PUBSUB_CLIENT_BIN)" >&2
    exit 2
fi
rows=
note=
for r in $rows_sel; do
    case $r in
    mely-*) if [ -z "$MELY" ]; then note="examples/pubsub is not built (or PUBSUB_MELY_BIN not set): only the bufferevent row runs"; continue; fi ;;
    esac
    rows="$rows $r"
done
rows=${rows# }
[ -n "$rows" ] || { echo "$ME: nothing to run: $note" >&2; exit 2; }

# The load: the client's defaults, --msgs, and --client-args (split on purpose).
# shellcheck disable=SC2206
load=(--msgs "$msgs" --threads "$cthreads" $cargs)
opt() { # the value of a load option, else the client's default
    local i
    for ((i = ${#load[@]} - 2; i >= 0; i--)); do
        [ "${load[$i]}" = "--$1" ] && { echo "${load[$((i + 1))]}"; return; }
    done
    echo "$2"
}
subs=$(opt subs 200) rooms=$(opt rooms 20) rps=$(opt rooms-per-sub 2) pubs=$(opt pubs 50)
payload=$(opt payload 32) window=$(opt window 64) msgs=$(opt msgs "$msgs")

tmp=$(mktemp -d "${TMPDIR:-/tmp}/run-pubsub.XXXXXX") || exit 2
cleanup_on_exit

# floor: prints the loopback write()+read() pair's ns (median of the client's runs)
floor() {
    "$CLIENT" --floor --csv-line 2>/dev/null | sed -n 's/^csv: //p'
}

# one_run ROW PASS: a fresh broker, the client, SIGTERM; appends a line to $raw
# (row,pass,deliveries,seconds,per_s,srv_s,srv_us,cl_s,cl_us,others,steal,ok,why)
one_run() {
    local row=$1 pass=$2 bin env=() port='' csv why='' ok=1
    case $row in
    bev) bin=$BEV ;;
    mely-1w) bin=$MELY env=(MELY_WORKERS=1) ;;
    mely-2w) bin=$MELY env=(MELY_WORKERS=2) ;;
    esac
    env ${env[@]+"${env[@]}"} "$bin" --port 0 >"$tmp/out" 2>"$tmp/err" &
    server_pid=$!
    port=$(said_port "$tmp/out")
    if [ -z "$port" ]; then
        echo "$ME: $row did not say its port:" >&2
        sed 's/^/  /' "$tmp/out" "$tmp/err" >&2
        stop_server
        echo "$row,$pass$(printf ',%.0s' {1..9}),0,no port" >>"$raw"
        return
    fi
    timeout $((limit + 30)) "$CLIENT" --port "$port" --server-pid "$server_pid" \
        --seconds-limit "$limit" --csv-line "${load[@]}" >"$tmp/client" 2>&1
    local st=$?
    csv=$(sed -n 's/^csv: //p' "$tmp/client")
    if [ $st -ne 0 ] || [ -z "$csv" ]; then ok=0 why="client exit $st"; fi
    # The broker's end: exit 0 and its line agreeing with the client.
    local pid=$server_pid
    server_pid=
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null
        ok=0 why="${why:+$why; }broker killed after 10 s"
    fi
    wait "$pid"
    local bst=$?
    [ $bst -eq 0 ] || { ok=0 why="${why:+$why; }broker exit $bst"; }
    local line want_p want_d
    # The runtime's own messages (a stall warning when the guest preempts a
    # worker for 100 ms) say nothing of the broker's counts: shown, not
    # compared.
    grep '^mely: ' "$tmp/err" >&2
    line=$(grep -v '^mely: ' "$tmp/err")
    want_p=$((pubs * msgs))
    want_d=${csv%%,*}
    if [ "$ok" = 1 ] && [ "$line" != "pubsub: $want_p published, $want_d delivered, 0 cut" ]; then
        ok=0 why="broker says \"$line\", want \"pubsub: $want_p published, $want_d delivered, 0 cut\""
    fi
    if [ "$ok" = 0 ]; then
        echo "$ME: $row pass $pass failed: $why" >&2
        sed 's/^/  /' "$tmp/client" >&2
        [ -n "$csv" ] || csv=",,,,,,,,,"
    fi
    # csv: deliveries,seconds,per_s,srv_s,srv_us,cl_s,cl_us,others,steal,errors
    echo "$row,$pass,$(echo "$csv" | cut -d, -f1-9),$ok,${why//,/;}" >>"$raw"
    printf "  %-8s pass %d: %s deliveries/s, server %s us/delivery, client %s us/delivery, others %s%%%s\n" \
        "$row" "$pass" "$(echo "$csv" | cut -d, -f3)" "$(echo "$csv" | cut -d, -f5)" \
        "$(echo "$csv" | cut -d, -f7)" "$(echo "$csv" | cut -d, -f8)" \
        "$([ "$ok" = 1 ] || echo "  FAILED: $why")" >&2
}

machine_line
echo "load: $subs subscribers on $rooms rooms ($rps each), $pubs publishers x $msgs messages," \
    "payload $payload B, window $window, client threads $cthreads; $passes interleaved pass(es)"
echo "brokers: pubsub_bufferevent ($BEV, libevent $(pkg-config --modversion libevent 2>/dev/null || echo '?'))${MELY:+, examples/pubsub ($MELY)}"
[ -n "$note" ] && echo "note: $note"
env | grep '^MELY_' | grep -v '^MELY_WORKERS=' | sed 's/^/environment: /'
floor0=$(floor)

raw=$tmp/raw.csv
: >"$raw"
read -r -a order <<<"$rows"
n=${#order[@]}
for pass in $(seq "$passes"); do
    echo "pass $pass/$passes ($(date +%H:%M:%S))" >&2
    for ((i = 0; i < n; i++)); do
        one_run "${order[$(((i + pass - 1) % n))]}" "$pass"
    done
done
floor1=$(floor)

# ---- the table: each row's median pass (by deliveries/s), every pass, the ratios
echo
echo "floor: a 64 B write()+read() over loopback TCP: ${floor0:-?} ns before the first run," \
    "${floor1:-?} ns after the last"
status=0
grep -q ',0,[^,]*$' "$raw" && status=1
mkdir -p "$top/bench/results"
csvout=$top/bench/results/pubsub.csv
date=$(date -u +%FT%TZ)
model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo | tr -d ,)
awk -F, -v rows="$rows" -v date="$date" -v model="$model" -v cpus="$(nproc)" \
    -v kernel="$(uname -sr)" -v floor0="$floor0" -v floor1="$floor1" \
    -v params="$subs,$rooms,$rps,$pubs,$msgs,$payload,$window,$cthreads,$passes" \
    -v csvout="$csvout" '
    function name(r) {
        return r == "bev" ? "libevent bufferevent, 1 thread" : r == "mely-1w" ? \
            "mely streams, 1 worker" : "mely streams, 2 workers"
    }
    { if ($12 == 1) { k = ++np[$1]; dps[$1, k] = $5; srv[$1, k] = $7; cl[$1, k] = $9
          oth[$1, k] = $10 }
      all[$1] = all[$1] (all[$1] == "" ? "" : "  ") ($12 == 1 ? sprintf("%.2fM (%s)", $5 / 1e6, $7) : "failed") }
    END {
        nr = split(rows, r, " ")
        printf "%-32s %13s %12s %12s %7s   %s\n", "broker", "deliveries/s", "srv us/dlv",
            "cl us/dlv", "others", "passes: M deliveries/s (srv us/dlv)"
        print "date,cpu_model,cpus,kernel,subs,rooms,rooms_per_sub,pubs,msgs,payload,window,client_threads,passes,row,deliveries_per_s,server_us_per_delivery,client_us_per_delivery,others_pct,passes_deliveries_per_s,passes_server_us_per_delivery,ratio_deliveries_per_s,ratio_server_us,targets,floor_ns_before,floor_ns_after" > csvout
        for (i = 1; i <= nr; i++) {
            x = r[i]; n = np[x] + 0; m[x] = 0
            if (n > 0) { # the median pass by deliveries/s (the lower middle for an even count)
                for (a = 1; a <= n; a++) { below = 0; same = 0
                    for (b = 1; b <= n; b++) { below += dps[x, b] < dps[x, a]; same += dps[x, b] == dps[x, a] && b < a }
                    if (below + same == int((n - 1) / 2)) m[x] = a }
            }
            if (m[x]) printf "%-32s %13.0f %12.4f %12.4f %6.1f%%   %s\n", name(x), dps[x, m[x]],
                srv[x, m[x]], cl[x, m[x]], oth[x, m[x]], all[x]
            else printf "%-32s %13s %12s %12s %7s   %s\n", name(x), "-", "-", "-", "-", all[x]
        }
        for (i = 1; i <= nr; i++) {
            x = r[i]; rd = ""; rc = ""; t = ""
            if (x != "bev" && !blank++) print ""
            if (x != "bev" && m[x] && m["bev"]) {
                rd = dps[x, m[x]] / dps["bev", m["bev"]]
                rc = srv["bev", m["bev"]] > 0 ? srv[x, m[x]] / srv["bev", m["bev"]] : ""
                cmax = x == "mely-1w" ? 1.0 : 1.1
                t = (rd >= 1.0 && rc != "" && rc <= cmax) ? "PASS" : "MISS"
                printf "%s / bufferevent: deliveries/s %.2fx (target >= 1.00), server CPU per delivery %sx (target <= %.2f): %s\n",
                    name(x), rd, rc == "" ? "?" : sprintf("%.2f", rc), cmax, t
                rd = sprintf("%.3f", rd); if (rc != "") rc = sprintf("%.3f", rc)
            }
            pd = ""; ps = ""
            for (k = 1; k <= np[x]; k++) { pd = pd (k > 1 ? ";" : "") dps[x, k]; ps = ps (k > 1 ? ";" : "") srv[x, k] }
            printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", date, model, cpus, kernel,
                params, x, m[x] ? dps[x, m[x]] : "", m[x] ? srv[x, m[x]] : "", m[x] ? cl[x, m[x]] : "",
                m[x] ? oth[x, m[x]] : "", pd, ps, rd, rc, t, floor0, floor1 >> csvout
        }
    }' "$raw"
echo
echo "deliveries/s: from the first PUB to the last delivery; the median pass by deliveries/s,"
echo "and its server CPU (all threads: schedstat, checked against /proc/PID/stat) and client CPU (getrusage)"
echo "per delivery; others: CPU time of other processes, % of all CPUs (/proc/stat). Targets:"
echo "mely, 1 worker: >= 1.0x the bufferevent broker's deliveries/s at <= 1.0x its CPU per"
echo "delivery; 2 workers: >= 1.0x at <= 1.1x. Compare ratios within one run: figures move"
echo "from one minute to the next on the shared guests."
[ -n "$note" ] && echo "note: $note"
echo "CSV: $csvout"
exit $status
