#!/bin/bash
# run-web.sh: the side-by-side web benchmark (issue 6, item 6). Serves the same
# 1 KB and 100 KB files from nginx (Debian's nginx-light), SWS (apps/sws: Mely
# engine, and the paper's Figure-6 rows: Mely engine with stealing, legacy
# engine with and without stealing) and a plain libevent evhttp server
# (bench/web_evhttp), one server at a time on 127.0.0.1, each loaded by wrk and
# by bench/injector (keep-alive, K=150 requests per connection, and
# connection-per-request), with 1 and 2 workers.
#
#   bench/run-web.sh [--seconds S] [--quick] [--install] [--no-png]
#
#   --seconds S   length of each load run (default 5)
#   --quick       1-second runs (about a minute in all)
#   --install     when nginx or wrk is missing and this runs as root:
#                 apt-get update && apt-get install -y nginx-light wrk
#
# Run from the top of the source tree after `make bench` (and apps/sws/sws).
# Binaries are looked for in $SWS_BIN / $INJECTOR_BIN / $EVHTTP_BIN, then
# build/, then the source tree. Writes bench/results/web.csv and, when gnuplot
# is installed, bench/results/web-*.png.
#
# Placement: 1-worker rows run the server on CPU 1 and the client on CPU 0;
# 2-worker rows let the server and the client share CPUs 0 and 1 (the servers
# pin their two workers to CPU 0 and CPU 1). Server CPU per request is the
# utime+stime the server's processes (nginx: master and workers) gained over
# the run, from /proc/PID/stat, divided by the requests the client completed.
# Exit status: 0, 1 if a run failed (its row says so), 2 if a tool is missing.
set -u

seconds=5
install=
png=yes
while [ $# -gt 0 ]; do
    case "$1" in
    --seconds)
        seconds="${2:-}"
        shift
        ;;
    --quick) seconds=1 ;;
    --install) install=yes ;;
    --no-png) png= ;;
    -h | --help)
        sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "usage: bench/run-web.sh [--seconds S] [--quick] [--install] [--no-png]" >&2
        exit 2
        ;;
    esac
    shift
done
case "$seconds" in
'' | *[!0-9]*)
    echo "run-web.sh: --seconds expects a whole number of seconds" >&2
    exit 2
    ;;
esac
if [ "$seconds" -lt 1 ] || [ "$seconds" -gt 600 ]; then
    echo "run-web.sh: --seconds must be 1..600" >&2
    exit 2
fi

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

find_bin() { # override, candidates...
    if [ -n "$1" ]; then
        echo "$1"
        return
    fi
    shift
    for b in "$@"; do
        if [ -x "$b" ]; then
            echo "$b"
            return
        fi
    done
}
SWS=$(find_bin "${SWS_BIN:-}" build/apps/sws/sws apps/sws/sws)
INJ=$(find_bin "${INJECTOR_BIN:-}" build/bench/injector bench/injector)
EVH=$(find_bin "${EVHTTP_BIN:-}" build/bench/web_evhttp bench/web_evhttp)
for b in "$SWS" "$INJ" "$EVH"; do
    if [ -z "$b" ] || [ ! -x "$b" ]; then
        echo "run-web.sh: apps/sws/sws, bench/injector or bench/web_evhttp not built: run" \
            "'make -j2 apps/sws/sws bench/injector && make bench' in build/ (or set SWS_BIN," \
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
model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
[ -n "$model" ] || model=$(uname -m)
echo "machine: ${model}, ${ncpu} CPUs online, $(uname -sr)"
echo "servers: $("$NGINX" -v 2>&1 | sed 's/.*: //'), sws ($SWS), web_evhttp ($EVH, libevent $(pkg-config --modversion libevent 2>/dev/null || echo '?'))"
echo "clients: $("$WRK" -v 2>&1 | head -1 | awk '{print $1" "$2}'), bench/injector; ${seconds} s per run"
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

server_pid=
# shellcheck disable=SC2317 # called by the EXIT trap
cleanup() {
    if [ -n "$server_pid" ]; then stop_server; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- servers ---------------------------------------------------------------
port=18300
wait_port() { # port: wait (at most 5 s) until it accepts
    for _ in $(seq 50); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    return 1
}

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
    sws | sws-steal | legacy | legacy-steal)
        local opts
        case "$kind" in
        sws) opts="--engine mely --steal off" ;;
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

stop_server() { # TERM, at most 5 s, then KILL
    local pid=$server_pid
    server_pid=
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "run-web.sh: server $pid did not stop in 5 s: killed" >&2
        kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
}

server_ticks() { # utime+stime of the server and its children (nginx workers)
    local pids t=0 p
    pids="$server_pid $(pgrep -P "$server_pid" 2>/dev/null | tr '\n' ' ')"
    for p in $pids; do
        [ -r "/proc/$p/stat" ] || continue
        # fields after the ")" that ends the command name: utime is 12th, stime 13th
        t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{ print $12 + $13 }')))
    done
    echo "$t"
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
        local m=--keepalive
        [ "$mode" = close ] && m=--close
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
echo "server,workers,file,client,mode,requests,req_per_s,server_cpu_us_per_req,client_cpus,server_cpus,errors" >"$raw"
status=0

# One server configuration: every file x client x mode, then stop it.
bench_server() { # kind workers
    local kind=$1 w=$2 file client mode
    if ! start_server "$kind" "$w"; then
        status=1
        return
    fi
    for file in 1k.txt 100k.txt; do
        for cm in wrk:keepalive injector:keepalive injector:close; do
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
            echo "$kind,$w,${file%.txt},$client,$mode,$req,$rps,$us,$ccpus,$server_cpus,$err" >>"$raw"
            printf "  %-12s %d worker(s) %-5s %-8s %-9s %9s req/s %7s us/req\n" \
                "$kind" "$w" "${file%.txt}" "$client" "$mode" "$rps" "${us:--}" >&2
        done
    done
    stop_server
}

for w in 1 2; do
    if [ "$w" = 1 ]; then
        kinds="nginx sws evhttp"
    else
        kinds="nginx sws sws-steal legacy legacy-steal evhttp"
    fi
    for k in $kinds; do
        bench_server "$k" "$w"
    done
done
echo >&2

# ---- table and CSV: ratio to nginx with the same workers/file/client/mode ---
awk -F, 'NR == 1 { next }
    { key = $2 SUBSEP $3 SUBSEP $4 SUBSEP $5; row[NR] = $0
      if ($1 == "nginx") ng[key] = $7 }
    END {
        print "server,workers,file,client,mode,requests,req_per_s,ratio_to_nginx,server_cpu_us_per_req,client_cpus,server_cpus,errors"
        for (i = 2; i <= NR; i++) {
            split(row[i], f, ",")
            key = f[2] SUBSEP f[3] SUBSEP f[4] SUBSEP f[5]
            r = (ng[key] > 0) ? sprintf("%.2f", f[7] / ng[key]) : ""
            print f[1] "," f[2] "," f[3] "," f[4] "," f[5] "," f[6] "," f[7] "," r "," f[8] "," f[9] "," f[10] "," f[11]
        }
    }' "$raw" >"$csv"

printf "%-12s %7s %5s %-8s %-9s %9s %6s %9s %7s %7s\n" server workers file client mode \
    req/s ratio "us/req" "cl.CPU" "srv.CPU"
awk -F, 'NR > 1 { printf "%-12s %7s %5s %-8s %-9s %9s %6s %9s %7s %7s%s\n",
    $1, $2, $3, $4, $5, $7, ($8 == "" ? "-" : $8), ($9 == "" ? "-" : $9), $10, $11,
    ($12 > 0 ? "  errors: " $12 : "") }' "$csv"
echo
echo "ratio: req/s over nginx's with the same workers, file, client and mode;"
echo "us/req: server CPU (user+system, /proc) per completed request. nginx, sws,"
echo "evhttp: steal off; sws-steal: --engine mely --steal all; legacy: --engine"
echo "libasync --steal off; legacy-steal: --engine libasync --steal base."
echo "CSV: $csv"

# ---- charts ------------------------------------------------------------------
if [ -z "$png" ]; then
    :
elif [ -z "$GNUPLOT" ]; then
    echo "gnuplot not found (Debian package gnuplot-nox): PNG charts skipped"
else
    for w in 1 2; do
        for file in 1k 100k; do
            dat="$tmp/plot-$w-$file.dat"
            # one line per server, columns: wrk keep-alive, injector keep-alive, injector close
            awk -F, -v w="$w" -v file="$file" 'NR > 1 && $2 == w && $3 == file {
                    if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
                    v[$1, $4 "-" $5] = $7 }
                END { for (i = 1; i <= n; i++) { s = order[i]
                    printf "%s %s %s %s\n", s, v[s, "wrk-keepalive"] + 0,
                        v[s, "injector-keepalive"] + 0, v[s, "injector-close"] + 0 } }' \
                "$csv" >"$dat"
            out="bench/results/web-${w}w-${file}.png"
            "$GNUPLOT" <<EOF 2>"$tmp/gnuplot.err" || { echo "gnuplot failed:"; cat "$tmp/gnuplot.err"; }
set terminal png size 900,500
set output "$out"
set title "bench/web: ${file} file, ${w} worker(s), req/s (higher is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set ylabel "requests/s"
set yrange [0:*]
set key top right
set grid ytics
plot "$dat" using 2:xtic(1) title "wrk keep-alive", \
     "" using 3 title "injector keep-alive K=150", \
     "" using 4 title "injector connection-per-request"
EOF
            [ -s "$out" ] && echo "chart: $out"
        done
    done
fi
exit $status
