#!/bin/bash
# SPDX-License-Identifier: MIT
# run-web.sh: the side-by-side web benchmark. Serves the same 1 KB and 100 KB
# files from nginx (nginx-light), SWS (apps/sws; the Mely engine, and the
# paper's Figure-6 rows: Mely with stealing, the legacy engine with and
# without it) and a plain libevent evhttp server (bench/e2e/web_evhttp), one
# at a time on 127.0.0.1, each loaded by wrk and by bench/e2e/injector
# (keep-alive with K=150 requests per connection; close: `Connection: close`,
# the server closes; reset: one request per connection ended by the client's
# RST), with 1 and 2 workers. bench/README.md explains the options, the
# placement on the CPUs and the figures.
#
#   bench/e2e/run-web.sh [--seconds S] [--quick] [--repeat N] [--only KINDS]
#                        [--workers LIST] [--files LIST] [--modes LIST]
#                        [--install] [--no-png]
#
#   --seconds S    each load run (default 5; --quick: 1)
#   --repeat N     interleaved passes (default 1, 1..20): each row gives medians
#   --only KINDS   of nginx, sws, sws-fd, sws-steal, legacy, legacy-steal, evhttp
#                  (the last but one three: 2 workers only); nginx gives the
#                  ratios. sws places connections by load, sws-fd (only when
#                  named) by descriptor, as before
#   --workers LIST 1, 2 or 1,2;  --files LIST 1k, 100k or 1k,100k
#   --modes LIST   of wrk:keepalive, injector:keepalive, injector:close,
#                  injector:reset
#   --install      as root, apt-get install nginx-light wrk when missing
#   --no-png       no gnuplot charts
#
# Run from the top of the source tree after `make bench` (binaries: $SWS_BIN,
# $INJECTOR_BIN, $EVHTTP_BIN, else build/, else the source tree). Writes
# bench/results/web.csv (and web-*.png with gnuplot); progress on stderr.
# Exit status: 0, 1 if a run failed (its row says so), 2 if a tool is missing
# or an option is wrong.
set -u

usage="usage: bench/e2e/run-web.sh [--seconds S] [--quick] [--repeat N] [--only KINDS]
       [--workers LIST] [--files LIST] [--modes LIST] [--install] [--no-png]"
all_kinds="nginx sws sws-fd sws-steal legacy legacy-steal evhttp"
default_kinds="nginx sws sws-steal legacy legacy-steal evhttp" # sws-fd: on request
all_modes="wrk:keepalive injector:keepalive injector:close injector:reset"

ME=run-web.sh
# shellcheck source=bench/e2e/lib.sh
. "$(dirname "$0")/lib.sh"

seconds=5 repeat=1 install='' png=yes
kinds_sel=$default_kinds workers_sel="1 2" files_sel="1k 100k" modes_sel=$all_modes
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds) seconds="${2:-}"; shift ;;
    --quick) seconds=1 ;;
    --repeat) repeat="${2:-}"; shift ;;
    --only) kinds_sel=$(pick --only "${2:-}" "$all_kinds") || exit 2; shift ;;
    --workers) workers_sel=$(pick --workers "${2:-}" "1 2") || exit 2; shift ;;
    --files) files_sel=$(pick --files "${2:-}" "1k 100k") || exit 2; shift ;;
    --modes) modes_sel=$(pick --modes "${2:-}" "$all_modes") || exit 2; shift ;;
    --install) install=yes ;;
    --no-png) png= ;;
    -h | --help) awk 'NR > 2 { if (!/^#/) exit; sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "run-web.sh: unknown option '$1'" >&2; echo "$usage" >&2; exit 2 ;;
    esac
    shift
done
whole --seconds "$seconds" 1 600
whole --repeat "$repeat" 1 20

# kinds_for WORKERS: the selected server kinds run with that many workers
kinds_for() {
    local k out=
    for k in $kinds_sel; do
        case "$k" in sws-steal | legacy | legacy-steal) [ "$1" = 2 ] || continue ;; esac
        out="$out $k"
    done
    echo "${out# }"
}
nconfigs=0
for w in $workers_sel; do
    for k in $(kinds_for "$w"); do nconfigs=$((nconfigs + 1)); done
done
if [ "$nconfigs" = 0 ]; then
    echo "run-web.sh: nothing to run: sws-steal, legacy and legacy-steal run with 2 workers only" >&2
    exit 2
fi
nruns=$((nconfigs * $(echo "$files_sel" | wc -w) * $(echo "$modes_sel" | wc -w)))
case " $kinds_sel " in
*" nginx "*) ;;
*) echo "run-web.sh: nginx left out (--only): ratios to nginx will be \"-\"" >&2 ;;
esac

# ---- tools -----------------------------------------------------------------
NGINX=$(command -v nginx || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; })
WRK=$(command -v wrk)
if [ -z "$NGINX" ] || [ -z "$WRK" ]; then
    missing=
    [ -z "$NGINX" ] && missing="nginx (Debian package nginx-light)"
    [ -z "$WRK" ] && missing="${missing:+$missing and }wrk (Debian package wrk)"
    if [ -n "$install" ] && [ "$(id -u)" = 0 ]; then
        echo "run-web.sh: installing $missing"
        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y nginx-light wrk || exit 2
        NGINX=$(command -v nginx || echo /usr/sbin/nginx)
        WRK=$(command -v wrk)
    else
        echo "run-web.sh: $missing not found: apt-get install nginx-light wrk" >&2
        echo "  (or run this script as root with --install)" >&2
        exit 2
    fi
fi

SWS=$(find_bin "${SWS_BIN:-}" build/apps/sws/sws apps/sws/sws)
INJ=$(find_bin "${INJECTOR_BIN:-}" build/bench/e2e/injector bench/e2e/injector)
EVH=$(find_bin "${EVHTTP_BIN:-}" build/bench/e2e/web_evhttp bench/e2e/web_evhttp)
for b in "$SWS" "$INJ" "$EVH"; do
    if [ -z "$b" ] || [ ! -x "$b" ]; then
        echo "run-web.sh: apps/sws/sws, bench/e2e/injector or bench/e2e/web_evhttp not built: run" \
            "'make -j2 apps/sws/sws && make bench' in build/ (or set SWS_BIN," \
            "INJECTOR_BIN, EVHTTP_BIN)" >&2
        exit 2
    fi
done
GNUPLOT=$(command -v gnuplot || true)

ncpu=$(nproc)
if [ "$ncpu" -lt 2 ]; then
    echo "run-web.sh: needs at least 2 CPUs (has $ncpu)" >&2
    exit 2
fi
HZ=$(getconf CLK_TCK)
machine_line
echo "servers: $("$NGINX" -v 2>&1 | sed 's/.*: //'), sws ($SWS), web_evhttp ($EVH, libevent $(pkg-config --modversion libevent 2>/dev/null || echo '?'))"
echo "clients: $("$WRK" -v 2>&1 | head -1 | awk '{print $1" "$2}'), bench/e2e/injector; ${seconds} s per run"
echo "runs: ${repeat} pass(es) of ${nruns} runs (servers: ${kinds_sel// /,}; workers: ${workers_sel// /,};" \
    "files: ${files_sel// /,}; modes: ${modes_sel// /,})"
echo

# ---- document root ---------------------------------------------------------
tmp=$(mktemp -d /tmp/run-web.XXXXXX)
chmod 755 "$tmp"
docroot="$tmp/www"
mkdir -p "$docroot" "$tmp/nginx"
gen() { # bytes -> deterministic printable content
    awk -v n="$1" 'BEGIN { s = ""; i = 0
        while (length(s) < n) { s = s sprintf("mely web benchmark line %06d\n", i++) }
        printf "%s", substr(s, 1, n) }'
}
gen 1024 >"$docroot/1k.txt"
gen 102400 >"$docroot/100k.txt"
chmod -R a+rX "$docroot"
# SWS serves a file changed less than --cache-settle-ms (1 s) ago fresh from
# disk, uncached (doc/sws.md): the first run would measure that.
sleep 1.1

cleanup_on_exit

# ---- servers ---------------------------------------------------------------
port=18300
nginx_conf() { # workers port
    local aff
    if [ "$1" = 1 ]; then aff=10; else aff="01 10"; fi
    cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes $1;
worker_cpu_affinity $aff;
daemon off;
master_process on;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events {
    worker_connections 10000;
}
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    open_file_cache max=1000 inactive=60s;
    open_file_cache_valid 60s;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    types { text/plain txt; text/html html; }
    default_type application/octet-stream;
    client_body_temp_path $tmp/nginx/body;
    proxy_temp_path $tmp/nginx/proxy;
    fastcgi_temp_path $tmp/nginx/fastcgi;
    uwsgi_temp_path $tmp/nginx/uwsgi;
    scgi_temp_path $tmp/nginx/scgi;
    server {
        listen 127.0.0.1:$2;
        root $docroot;
    }
}
EOF
}

# ($pin is a command and its arguments: split on purpose)
# shellcheck disable=SC2086
# start_server KIND WORKERS: KIND is nginx, sws, sws-steal, legacy,
# legacy-steal or evhttp. Sets server_pid, port, server_cpus.
start_server() {
    local kind=$1 w=$2 pin
    port=$((port + 1))
    if [ "$w" = 1 ]; then
        pin="taskset -c 1"
        server_cpus=1
    else
        pin="taskset -c 0,1"
        server_cpus=0-1
    fi
    case "$kind" in
    nginx)
        nginx_conf "$w" "$port"
        $pin "$NGINX" -p "$tmp/nginx" -e "$tmp/nginx/error.log" -c "$tmp/nginx/nginx.conf" \
            >"$tmp/server.log" 2>&1 &
        ;;
    sws | sws-fd | sws-steal | legacy | legacy-steal)
        local opts
        case "$kind" in
        sws) opts="--engine mely --steal off" ;;
        sws-fd) opts="--engine mely --steal off --placement fd" ;;
        sws-steal) opts="--engine mely --steal all" ;;
        legacy) opts="--engine libasync --steal off" ;;
        legacy-steal) opts="--engine libasync --steal base" ;;
        esac
        # 1 worker: taskset places it on CPU 1, sws must not re-pin it.
        [ "$w" = 1 ] && opts="$opts --no-pin"
        # shellcheck disable=SC2086
        $pin "$SWS" --root "$docroot" --port "$port" --workers "$w" $opts \
            >"$tmp/server.log" 2>&1 &
        ;;
    evhttp)
        $pin "$EVH" --root "$docroot" --port "$port" --threads "$w" >"$tmp/server.log" 2>&1 &
        ;;
    esac
    server_pid=$!
    if ! wait_port "$port"; then
        echo "run-web.sh: $kind did not start:" >&2
        sed 's/^/  /' "$tmp/server.log" >&2
        stop_server
        return 1
    fi
}

# ---- clients ---------------------------------------------------------------
# run_client CLIENT MODE WORKERS FILE: prints "requests req_per_s client_cpus errors"
# ($pin is a command and its arguments: split on purpose)
# shellcheck disable=SC2086
run_client() {
    local client=$1 mode=$2 w=$3 file=$4 cpus pin url out
    if [ "$w" = 1 ]; then cpus=0; else cpus=0-1; fi
    pin="taskset -c ${cpus/-/,}"
    url="http://127.0.0.1:$port/$file"
    if [ "$client" = wrk ]; then
        out=$(timeout $((seconds + 15)) $pin "$WRK" -t"$w" -c50 -d"${seconds}s" "$url" 2>&1)
        local req rps err
        req=$(echo "$out" | awk '/requests in/ { print $1 }')
        rps=$(echo "$out" | awk '/^Requests\/sec/ { printf "%.0f", $2 }')
        err=$(echo "$out" | awk '/Non-2xx|Socket errors/ { n++ } END { print n + 0 }')
        echo "${req:-0} ${rps:-0} $cpus $err"
    else
        local m
        case "$mode" in
        close) m=--close ;;
        reset) m=--reset ;;
        *) m=--keepalive ;;
        esac
        timeout $((seconds + 15)) $pin "$INJ" --port "$port" --url "/$file" --clients 50 \
            --requests-per-conn 150 $m --duration "$seconds" --workers "$w" --quiet \
            --csv "$tmp/inj.csv" >"$tmp/inj.out" 2>&1
        awk -F, -v c="$cpus" '$1 == "total" { printf "%d %.0f %s %d\n", $3, $4, c, $5; t = 1 }
            END { if (!t) print "0 0 " c " 1" }' "$tmp/inj.csv" 2>/dev/null ||
            echo "0 0 $cpus 1"
        rm -f "$tmp/inj.csv"
    fi
}

mkdir -p bench/results
csv=bench/results/web.csv
raw="$tmp/raw.csv"
# one line per run; the pass number comes last
echo "server,workers,file,client,mode,requests,req_per_s,server_cpu_us_per_req,client_cpus,server_cpus,errors,pass" >"$raw"
status=0

# One server configuration: every selected file x client:mode, then stop it.
bench_server() { # kind workers pass
    local kind=$1 w=$2 pass=$3 f file cm client mode
    if ! start_server "$kind" "$w"; then
        status=1
        return
    fi
    for f in $files_sel; do
        file=$f.txt
        for cm in $modes_sel; do
            client=${cm%%:*}
            mode=${cm#*:}
            local t0 t1 res req rps ccpus err us
            t0=$(server_ticks)
            res=$(run_client "$client" "$mode" "$w" "$file")
            t1=$(server_ticks)
            read -r req rps ccpus err <<<"$res"
            if [ "$req" -gt 0 ]; then
                us=$(awk -v d=$((t1 - t0)) -v hz="$HZ" -v n="$req" \
                    'BEGIN { printf "%.2f", d / hz * 1e6 / n }')
            else
                us=
                status=1
            fi
            [ "$err" -gt 0 ] && status=1
            echo "$kind,$w,${file%.txt},$client,$mode,$req,$rps,$us,$ccpus,$server_cpus,$err,$pass" >>"$raw"
            printf "  %-12s %d worker(s) %-5s %-8s %-9s %9s req/s %7s us/req\n" \
                "$kind" "$w" "${file%.txt}" "$client" "$mode" "$rps" "${us:--}" >&2
        done
    done
    stop_server
}

# Passes, interleaved: each pass runs every selected configuration once.
for pass in $(seq "$repeat"); do
    echo "pass $pass/$repeat ($(date +%H:%M:%S))" >&2
    for w in $workers_sel; do
        for k in $(kinds_for "$w"); do
            bench_server "$k" "$w" "$pass"
        done
    done
done
echo >&2

# ---- table and CSV: medians over the passes; ratio to nginx with the same
# workers/file/client/mode (median over median) ----------------------------
# median: sorts its values (at most 20: insertion sort, mawk has no asort); an
# even count gives the mean of the two middle values. A failed run counts in
# req/s (as 0) but has no us/req, so that median is over the runs that have one.
awk -F, "$AWK_MEDIAN"'
    NR == 1 { next }
    { key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $4 SUBSEP $5
      if (!(key in passes)) { order[++nk] = key; head[key] = $1 "," $2 "," $3 "," $4 "," $5
          cpus[key] = $9 "," $10; min[key] = $7 + 0; max[key] = $7 + 0 }
      passes[key]++
      req[key] += $6; err[key] += $11
      rps[key] = rps[key] " " $7
      if ($8 != "") us[key] = us[key] " " $8
      if ($7 + 0 < min[key]) min[key] = $7 + 0
      if ($7 + 0 > max[key]) max[key] = $7 + 0 }
    END {
        for (i = 1; i <= nk; i++) {
            k = order[i]; split(k, f, SUBSEP)
            med[k] = median(rps[k])
            if (f[1] == "nginx") ng[f[2] SUBSEP f[3] SUBSEP f[4] SUBSEP f[5]] = med[k]
        }
        print "server,workers,file,client,mode,requests,req_per_s,ratio_to_nginx,server_cpu_us_per_req,client_cpus,server_cpus,errors,req_per_s_min,req_per_s_max,passes"
        for (i = 1; i <= nk; i++) {
            k = order[i]; split(k, f, SUBSEP)
            nk2 = f[2] SUBSEP f[3] SUBSEP f[4] SUBSEP f[5]
            r = (ng[nk2] > 0) ? sprintf("%.2f", med[k] / ng[nk2]) : ""
            u = median(us[k]); if (u != "") u = sprintf("%.2f", u)
            printf "%s,%d,%.0f,%s,%s,%s,%d,%d,%d,%d\n", head[k], req[k], med[k], r, u,
                cpus[k], err[k], min[k], max[k], passes[k]
        }
    }' "$raw" >"$csv"

printf "%-12s %7s %5s %-8s %-9s %9s %9s %9s %6s %9s %7s %7s %6s\n" server workers file client \
    mode req/s min max ratio "us/req" "cl.CPU" "srv.CPU" passes
awk -F, 'NR > 1 { printf "%-12s %7s %5s %-8s %-9s %9s %9s %9s %6s %9s %7s %7s %6s%s\n",
    $1, $2, $3, $4, $5, $7, $13, $14, ($8 == "" ? "-" : $8), ($9 == "" ? "-" : $9), $10, $11,
    $15, ($12 > 0 ? "  errors: " $12 : "") }' "$csv"
echo
echo "req/s: median over the passes (min and max beside it); ratio: median req/s"
echo "over nginx's median with the same workers, file, client and mode (\"-\" without"
echo "nginx); us/req: median server CPU (user+system, /proc) per completed request;"
echo "errors: summed over the passes. mode close: Connection: close, the server"
echo "closes; reset: connection per request, the client resets. nginx, sws,"
echo "evhttp: steal off; sws-fd: --placement fd (by descriptor, not by load);"
echo "sws-steal: --engine mely --steal all; legacy: --engine"
echo "libasync --steal off; legacy-steal: --engine libasync --steal base."
echo "CSV: $csv"

# ---- charts ------------------------------------------------------------------
if [ -z "$png" ]; then
    :
elif [ -z "$GNUPLOT" ]; then
    echo "gnuplot not found (Debian package gnuplot-nox): PNG charts skipped"
else
    for w in $workers_sel; do
        for file in $files_sel; do
            dat="$tmp/plot-$w-$file.dat"
            # one line per server, columns: wrk keep-alive, injector keep-alive,
            # injector close, injector reset (median req/s; 0 for a mode not run)
            awk -F, -v w="$w" -v file="$file" 'NR > 1 && $2 == w && $3 == file {
                    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
                    v[$1, $4 "-" $5] = $7 }
                END { for (i = 1; i <= n; i++) { s = order[i]
                    printf "%s %s %s %s %s\n", s, v[s, "wrk-keepalive"] + 0,
                        v[s, "injector-keepalive"] + 0, v[s, "injector-close"] + 0,
                        v[s, "injector-reset"] + 0 } }' \
                "$csv" >"$dat"
            [ -s "$dat" ] || continue
            out="bench/results/web-${w}w-${file}.png"
            "$GNUPLOT" <<EOF 2>"$tmp/gnuplot.err" || { echo "gnuplot failed:"; cat "$tmp/gnuplot.err"; }
set terminal png size 900,560
set output "$out"
set title "bench/web: ${file} file, ${w} worker(s), median req/s over ${repeat} pass(es) (higher is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "requests/s"
set yrange [0:*]
set key below
set grid ytics
plot "$dat" using 2:xtic(1) title "wrk keep-alive", \
     "" using 3 title "injector keep-alive K=150", \
     "" using 4 title "injector connection-per-request, Connection: close (server closes)", \
     "" using 5 title "injector connection-per-request, client RST"
EOF
            [ -s "$out" ] && echo "chart: $out"
        done
    done
fi
exit $status
