#!/bin/bash
# SPDX-License-Identifier: MIT
# run-kv.sh: the key-value server on mely next to its libevent twin.
# examples/kv (mely streams, a color per connection and one per key; the
# runtime's default workers, and MELY_WORKERS=1 as a second row) and
# bench/e2e/kv_bufferevent (the same table and commands on libevent
# bufferevents, one thread), a fresh server per run, loaded by
# bench/e2e/kv_load (closed loop, every reply checked). Passes are
# interleaved, the row order rotating by one each pass, and every pass's
# figures are printed: the target, kv on mely >= 1.0x its bufferevent
# version in req/s, asks for a figure per pass. Then each row's medians, the
# ratios mely/bufferevent per pass and of the medians, PASS or MISS (on the
# ratio of the medians; the passes that met it beside). The machine line and
# the floor, a loopback TCP write()+read() pair (kv_load --floor) measured
# before and after the runs, are printed beside the figures.
#
#   bench/e2e/run-kv.sh [--quick] [--passes N] [--seconds S] [--rows LIST]
#                       [--clients N] [--pipeline K] [--keys N]
#                       [--set-ratio R] [--value-bytes B] [--threads 1|2]
#
#   --passes N      interleaved passes (default 3, 1..20)
#   --seconds S     each run's measured window (default 5, 1..600; --quick: 1)
#   --rows LIST     of mely, mely-1w, bufferevent (default: all three)
#   --quick         1 s windows, 0.3 s warm-ups, a shorter floor: a check
#                   that all works, too noisy to quote
#   --clients ... --threads: kv_load's (defaults 100, 4, 10000, 0.1, 32, 1)
#
# Run from the top of the source tree after `make bench` (in build/: it
# builds kv_load, examples/kv and kv_bufferevent; or set KV_BIN,
# KV_BUFFEREVENT_BIN, KV_LOAD_BIN). Server and client share the machine's
# CPUs, unpinned but for mely's own pinned workers. Writes
# bench/results/kv.csv: a line per run, then a line per row's medians.
# Exit status: 0 when every row has figures (a missed target does not change
# it), 1 if a run failed, 2 if a program is missing or an option is wrong.
set -u
ME=run-kv.sh
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=bench/e2e/lib.sh
. "$top/bench/e2e/lib.sh"

all_rows="mely mely-1w bufferevent"
passes=3 seconds=5 warmup=0.5 quick='' rows=$all_rows
clients=100 pipeline=4 keys=10000 set_ratio=0.1 value_bytes=32 threads=1
while [ $# -gt 0 ]; do
    case "$1" in
    --quick) quick=--quick seconds=1 warmup=0.3 ;;
    --passes) passes="${2:-}"; shift ;;
    --seconds) seconds="${2:-}"; shift ;;
    --rows) rows=$(pick --rows "${2:-}" "$all_rows") || exit 2; shift ;;
    --clients) clients="${2:-}"; shift ;;
    --pipeline) pipeline="${2:-}"; shift ;;
    --keys) keys="${2:-}"; shift ;;
    --set-ratio) set_ratio="${2:-}"; shift ;;
    --value-bytes) value_bytes="${2:-}"; shift ;;
    --threads) threads="${2:-}"; shift ;;
    -h | --help) awk 'NR > 2 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "$ME: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
whole --passes "$passes" 1 20
whole --seconds "$seconds" 1 600
# kv_load checks the rest of its options itself (it exits 2 on a bad one)

kv=$(find_bin "${KV_BIN:-}" "$top/build/examples/kv" "$top/examples/kv")
kvb=$(find_bin "${KV_BUFFEREVENT_BIN:-}" "$top/build/bench/e2e/kv_bufferevent" \
    "$top/bench/e2e/kv_bufferevent")
load=$(find_bin "${KV_LOAD_BIN:-}" "$top/build/bench/e2e/kv_load" "$top/bench/e2e/kv_load")
if [ -z "$kv" ] || [ -z "$kvb" ] || [ -z "$load" ]; then
    echo "$ME: examples/kv, bench/e2e/kv_bufferevent or bench/e2e/kv_load not built: run" \
        "'make bench' in build/ (or set KV_BIN, KV_BUFFEREVENT_BIN, KV_LOAD_BIN)" >&2
    exit 2
fi
load_opts=(--clients "$clients" --pipeline "$pipeline" --keys "$keys" --set-ratio "$set_ratio"
    --value-bytes "$value_bytes" --threads "$threads" --seconds "$seconds" --warmup "$warmup")
"$load" "${load_opts[@]}" --help >/dev/null || exit 2

results=$top/bench/results
mkdir -p "$results"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/run-kv.XXXXXX") || exit 2
cleanup_on_exit

# floor: kv_load --floor's ns per pair (empty if it failed)
floor() {
    "$load" --floor $quick >"$tmp/floor.out" 2>&1
    sed -n 's/^kv_load: floor_ns_per_pair=\([0-9]*\)$/\1/p' "$tmp/floor.out"
}

# run ROW: one run of ROW on a fresh server; sets figures to kv_load's
# "rps srv_us cli_us srv_cores cli_cores others steal", or to "" if it failed
# (why on stderr). Not in a subshell: the EXIT trap must see server_pid.
run() {
    local port=
    figures=
    case "$1" in
    mely) "$kv" 0 >"$tmp/server.out" 2>"$tmp/server.err" & ;;
    mely-1w) MELY_WORKERS=1 "$kv" 0 >"$tmp/server.out" 2>"$tmp/server.err" & ;;
    bufferevent) "$kvb" 0 >"$tmp/server.out" 2>"$tmp/server.err" & ;;
    esac
    server_pid=$!
    port=$(said_port "$tmp/server.out")
    if [ -z "$port" ]; then
        echo "$ME: $1 did not say its port:" >&2
        cat "$tmp/server.err" >&2
        stop_server
        return
    fi
    # kv_load bounds itself; timeout is the last resort
    timeout $((seconds + 60)) "$load" --port "$port" --server-pid "$server_pid" \
        "${load_opts[@]}" >"$tmp/load.out" 2>&1
    stop_server
    figures=$(awk '/^kv_load: rps=/ { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
        if (v["errors"] == 0) print v["rps"], v["server_us"], v["client_us"], v["server_cores"],
            v["client_cores"], v["others_pct"], v["steal_pct"] }' "$tmp/load.out")
    if [ -z "$figures" ]; then
        echo "$ME: $1: kv_load failed:" >&2
        sed 's/^/  /' "$tmp/load.out" >&2
        return
    fi
    grep -v 'commands executed' "$tmp/server.err" | sed "s/^/  $1: /" >&2
}

machine_line
env | grep '^MELY_' | sed 's/^/environment: /'
echo "rows: ${rows// /, } (mely: examples/kv, the runtime's default workers, one per usable CPU" \
    "($(nproc)), pinned; mely-1w: MELY_WORKERS=1; bufferevent: bench/e2e/kv_bufferevent, one" \
    "thread); a fresh server per run"
echo "load: bench/e2e/kv_load, $clients connections on $threads thread(s), $pipeline in flight" \
    "each, $keys keys, SET ratio $set_ratio, $value_bytes-byte values; ${warmup} s warm-up +" \
    "${seconds} s measured per run; $passes interleaved pass(es), the order rotating"
floor0=$(floor)
echo "floor before: a loopback TCP write()+read() pair: ${floor0:-?} ns"
echo
echo "others, steal: the % of all CPUs that other processes and the hypervisor took during the window"
printf '%-5s %-12s %10s %11s %11s %10s %10s %7s %6s\n' pass row req/s "srv us/req" \
    "cli us/req" "srv cores" "cli cores" others steal
: >"$tmp/raw"
status=0
read -ra row_list <<<"$rows"
nrows=${#row_list[@]}
for p in $(seq "$passes"); do
    for j in $(seq 0 $((nrows - 1))); do
        row=${row_list[$(((j + p - 1) % nrows))]}
        run "$row"
        if [ -z "$figures" ]; then
            status=1
            printf '%-5s %-12s %10s\n' "$p" "$row" failed
            continue
        fi
        echo "$row $p $figures" >>"$tmp/raw"
        read -r rps su cu sc cc oth st <<<"$figures"
        printf '%-5s %-12s %10s %11s %11s %10s %10s %6s%% %5s%%\n' "$p" "$row" "$rps" "$su" "$cu" \
            "$sc" "$cc" "$oth" "$st"
    done
done
floor1=$(floor)
echo
echo "floor after: a loopback TCP write()+read() pair: ${floor1:-?} ns"

# The medians, ratios and targets; the CSV (a line per run, then the medians).
csv=$results/kv.csv
awk -v passes="$passes" -v f0="${floor0:-0}" -v f1="${floor1:-0}" -v csv="$csv" \
    -v head="$(date -u +%FT%TZ),\"$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)\",$(nproc),\"$(uname -sr)\",$clients,$pipeline,$keys,$set_ratio,$value_bytes,$seconds,$threads" \
    "$AWK_MEDIAN"'
    { rps[$1, $2] = $3; su[$1, $2] = $4; cu[$1, $2] = $5; line[$1, $2] = $0
      if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
      all_rps[$1] = all_rps[$1] " " $3; all_su[$1] = all_su[$1] " " $4; all_cu[$1] = all_cu[$1] " " $5
      all_sc[$1] = all_sc[$1] " " $6; all_cc[$1] = all_cc[$1] " " $7 }
    END {
        floor = (f0 > 0 && (f1 == 0 || f0 < f1)) ? f0 : f1 # the least of the two
        print "date,cpu_model,usable_cpus,kernel,clients,pipeline,keys,set_ratio,value_bytes,seconds,threads,floor_ns_per_pair,row,pass,req_per_s,server_cpu_us_per_req,client_cpu_us_per_req,server_cores,client_cores,others_pct,steal_pct,ratio_to_bufferevent,status" >csv
        for (i = 1; i <= n; i++) {
            r = order[i]
            for (p = 1; p <= passes; p++) {
                if (!((r, p) in rps)) continue
                split(line[r, p], f, " ")
                ratio = ""
                if ((("bufferevent", p) in rps) && rps["bufferevent", p] > 0)
                    ratio = sprintf("%.3f", rps[r, p] / rps["bufferevent", p])
                printf "%s,%d,%s,%d,%s,%s,%s,%s,%s,%s,%s,%s,\n", head, floor, r, p, f[3], f[4], f[5],
                    f[6], f[7], f[8], f[9], ratio >csv
            }
        }
        printf "\n%-12s %-28s %10s %11s %11s %9s  %s\n", "row", "req/s, pass 1..", "median",
            "srv us/req", "cli us/req", "in pairs", "vs bufferevent: per pass; of the medians"
        for (i = 1; i <= n; i++)
            m[order[i]] = median(all_rps[order[i]])
        for (i = 1; i <= n; i++) {
            r = order[i]; per = ""; vs = ""; met = 0; had = 0
            for (p = 1; p <= passes; p++) {
                per = per sprintf("%s ", ((r, p) in rps) ? rps[r, p] : "-")
                if (((r, p) in rps) && (("bufferevent", p) in rps) && rps["bufferevent", p] > 0) {
                    x = rps[r, p] / rps["bufferevent", p]
                    vs = vs sprintf("%.2f ", x); had++; met += x >= 1.0
                } else {
                    vs = vs "- "
                }
            }
            ms = median(all_su[r]); mc = median(all_cu[r])
            pairs = floor > 0 ? sprintf("%.2f", (ms + mc) * 1000 / floor) : "-"
            xm = (r != "bufferevent" && m["bufferevent"] > 0) ? m[r] / m["bufferevent"] : 0
            status = r == "bufferevent" ? "" : (xm == 0 ? "n/a" : (xm >= 1.0 ? "PASS" : "MISS"))
            sub(/ $/, "", vs)
            res = r == "bufferevent" ? "(the reference)" : (xm > 0 ? sprintf("%s; %.2fx  %s (%d of %d passes >= 1.0x)", vs, xm, status, met, had) : "n/a")
            printf "%-12s %-28s %10.0f %11.2f %11.2f %9s  %s\n", r, per, m[r], ms, mc, pairs, res
            printf "%s,%d,%s,median,%.0f,%.3f,%.3f,%s,%s,,,%s,%s\n", head, floor, r, m[r], ms, mc,
                median(all_sc[r]), median(all_cc[r]), (xm > 0 ? sprintf("%.3f", xm) : ""), status >csv
            if (r == "mely") target = sprintf("target: kv on mely (default workers) >= 1.0x its bufferevent version in req/s: %s (%.2fx the median; %d of %d passes met it)", status, xm, met, had)
        }
        print ""
        print "req/s: each pass, then the median; us/req: medians of the server'"'"'s CPU (utime+stime, /proc) and the"
        print "client'"'"'s per request; in pairs: (srv + cli us/req) over the floor'"'"'s pair (the lesser of before and"
        printf "after, %d ns), what a request costs in loopback write()+read() pairs; vs bufferevent: req/s over\n", floor
        print "the bufferevent row'"'"'s in the same pass, and of the medians (PASS: >= 1.0x)."
        if (target != "") print target
    }' "$tmp/raw"
awk -F, 'NR > 1 && ($20 > 10 || $21 > 5) { bad = 1 } END { if (bad) print "note: other processes used over 10% of the CPUs (or the hypervisor over 5%) during some runs: the figures are disturbed" }' "$csv"
echo "CSV: $csv"
exit $status
