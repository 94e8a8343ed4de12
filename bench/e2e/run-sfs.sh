#!/bin/bash
# SPDX-License-Identifier: MIT
# run-sfs.sh: the paper's Figure 7 on this machine. apps/sfs/sfsd serves one
# file from the page cache to bench/multio (N clients, each reading the whole
# file over its own connection, K reads in flight, --no-verify so that the
# client does not spend the cores on decryption), under five server
# configurations:
#
#   legacy         libasync-smp's engine (MELY_ENGINE=legacy), stealing off
#   legacy-steal   libasync-smp's engine, its own stealing (base)
#   mely           Mely's engine, stealing off
#   mely-all       Mely's engine, all heuristics (the annotated handlers)
#   mely-measured  all + measured, sfsd --no-annotations
#
# for 1, 2, 3, 4 and 16 clients, in interleaved passes (medians, and the
# spread of each ratio over the passes). Each run lasts at least --seconds
# (2): the file each client reads is sized per client count from a probe run
# (Mely, stealing off, 200 MB per client) unless --file-mb fixes it; runs of
# 0.1-0.3 s (the paper's 200 MB) turned the stealing ratios over from one run
# to the next. In the same
# run: the machine's crypto ceiling (bench/aead: the AEAD's single-core
# sealing rate on 64 KB blocks, times the workers), and the peer a user would
# pick instead: nginx serving the same file over HTTPS (TLS 1.3,
# TLS_AES_128_GCM_SHA256, the same two workers, pinned), N curl clients each
# downloading the whole file.
#
#   bench/e2e/run-sfs.sh [--passes P] [--seconds S] [--file-mb M] [--clients LIST]
#                        [--configs LIST] [--inflight K] [--no-nginx] [--no-png]
#
#   --passes P     interleaved passes (default 3, 1..20)
#   --seconds S    the shortest run wanted, seconds (default 2, 1..60): sizes
#                  the file per client count from a probe run
#   --file-mb M    the file each client reads, whatever the client count
#                  (1..4096; default: sized by --seconds)
#   --clients LIST of 1,2,3,4,16 (default all)
#   --configs LIST of legacy,legacy-steal,mely,mely-all,mely-measured
#   --inflight K   READs in flight per client (default 4)
#   --no-nginx     leave the HTTPS peer out
#   --no-png       no gnuplot chart
#
# Run from the top of the source tree after `make -C build bench`. Writes
# bench/results/sfs.csv and sfs.png; progress on stderr. Exit status: 0; 1 if a
# run failed or had errors (its row says so); 2 if a tool is missing or an
# option is wrong.
set -u
ME=run-sfs.sh
# shellcheck source=bench/e2e/lib.sh
. "$(dirname "$0")/lib.sh"

usage="usage: bench/e2e/run-sfs.sh [--passes P] [--seconds S] [--file-mb M] [--clients LIST]
       [--configs LIST] [--inflight K] [--no-nginx] [--no-png]"
all_configs="legacy legacy-steal mely mely-all mely-measured"
all_clients="1 2 3 4 16"

passes=3 seconds=2 file_mb='' inflight=4 nginx=yes png=yes
probe_mb=200 # per client, the paper's file: the probe that sizes the files
configs_sel=$all_configs clients_sel=$all_clients
while [ $# -gt 0 ]; do
    case "$1" in
    --passes) whole --passes "${2:-}" 1 20; passes=$2; shift ;;
    --seconds) whole --seconds "${2:-}" 1 60; seconds=$2; shift ;;
    --file-mb) whole --file-mb "${2:-}" 1 4096; file_mb=$2; shift ;;
    --inflight) whole --inflight "${2:-}" 1 64; inflight=$2; shift ;;
    --clients) clients_sel=$(pick --clients "${2:-}" "$all_clients") || exit 2; shift ;;
    --configs) configs_sel=$(pick --configs "${2:-}" "$all_configs") || exit 2; shift ;;
    --no-nginx) nginx= ;;
    --no-png) png= ;;
    -h | --help) echo "$usage"; exit 0 ;;
    *) echo "$usage" >&2; exit 2 ;;
    esac
    shift
done

# ---- tools -----------------------------------------------------------------
SFSD=$(find_bin "${SFSD_BIN:-}" build/apps/sfs/sfsd apps/sfs/sfsd)
MULTIO=$(find_bin "${MULTIO_BIN:-}" build/bench/multio bench/multio)
AEAD=$(find_bin "${AEAD_BIN:-}" build/bench/aead bench/aead)
for b in "$SFSD" "$MULTIO" "$AEAD"; do
    if [ -z "$b" ] || [ ! -x "$b" ]; then
        echo "$ME: apps/sfs/sfsd, bench/multio or bench/aead not built: run 'make -C build bench'" \
            "(or set SFSD_BIN, MULTIO_BIN, AEAD_BIN)" >&2
        exit 2
    fi
done
NGINX=$(command -v nginx || { [ -x /usr/sbin/nginx ] && echo /usr/sbin/nginx; })
if [ -n "$nginx" ]; then
    for t in "$NGINX" "$(command -v curl)" "$(command -v openssl)"; do
        [ -n "$t" ] && continue
        echo "$ME: the HTTPS peer needs nginx, curl and openssl (Debian packages nginx-light," \
            "curl, openssl), or --no-nginx" >&2
        exit 2
    done
fi
GNUPLOT=$(command -v gnuplot || true)
if [ "$(nproc)" -lt 2 ]; then
    echo "$ME: needs at least 2 CPUs (has $(nproc))" >&2
    exit 2
fi
HZ=$(getconf CLK_TCK)
workers=2

tmp=$(mktemp -d /tmp/run-sfs.XXXXXX)
chmod 755 "$tmp"
root="$tmp/root"
mkdir -p "$root" "$tmp/nginx"
cleanup_on_exit

machine_line
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "server: sfsd ($SFSD), $workers workers pinned; client: bench/multio, --no-verify," \
    "${file_mb:+${file_mb} MB per client, }$inflight READs of 64 KB in flight; $passes pass(es)"

# ---- the crypto ceiling ------------------------------------------------------
if ! "$AEAD" --workers "$workers" >"$tmp/aead.out" 2>&1; then
    echo "$ME: bench/aead failed:" >&2
    sed 's/^/  /' "$tmp/aead.out" >&2
    exit 1
fi
sed 's/^/  /' "$tmp/aead.out"
ceiling=$(awk '/^aead: / { for (i = 2; i <= NF; i++) if ($i ~ /^ceiling_mbps=/) { sub(/.*=/, "", $i); print $i } }' "$tmp/aead.out")
echo "crypto ceiling: ${ceiling:-?} MB/s ($workers workers)"
echo

# make_file MB: the file of MB MB, written once by multio itself
# (deterministic content), then read once so that it is in the page cache.
make_file() {
    [ -f "$root/multio-${1}mb.bin" ] && return 0
    "$MULTIO" --port 1 --root "$root" --file-mb "$1" --prepare-only >"$tmp/prep.out" 2>&1 || {
        echo "$ME: multio could not create a ${1} MB file:" >&2
        sed 's/^/  /' "$tmp/prep.out" >&2
        exit 1
    }
    cat "$root/multio-${1}mb.bin" >/dev/null
}

# ---- servers ---------------------------------------------------------------
port=18400
start_sfsd() { # config
    local steal=off engine=mely opts=
    case "$1" in
    legacy) engine=legacy ;;
    legacy-steal) engine=legacy steal=base ;;
    mely-all) steal=all ;;
    mely-measured) steal=all+measured opts=--no-annotations ;;
    esac
    port=$((port + 1))
    # shellcheck disable=SC2086
    MELY_WORKERS=$workers MELY_ENGINE=$engine MELY_STEAL=$steal \
        "$SFSD" --root "$root" --port "$port" $opts >"$tmp/server.log" 2>&1 &
    server_pid=$!
    wait_port "$port"
}

nginx_conf() {
    cat >"$tmp/nginx/nginx.conf" <<EOF
worker_processes $workers;
worker_cpu_affinity 01 10;
daemon off;
master_process on;
pid $tmp/nginx/nginx.pid;
error_log $tmp/nginx/error.log warn;
events { worker_connections 1024; }
http {
    access_log off;
    keepalive_timeout 60s;
    default_type application/octet-stream;
    client_body_temp_path $tmp/nginx/body;
    proxy_temp_path $tmp/nginx/proxy;
    fastcgi_temp_path $tmp/nginx/fastcgi;
    uwsgi_temp_path $tmp/nginx/uwsgi;
    scgi_temp_path $tmp/nginx/scgi;
    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate $tmp/nginx/cert.pem;
        ssl_certificate_key $tmp/nginx/key.pem;
        ssl_protocols TLSv1.3;
        ssl_conf_command Ciphersuites TLS_AES_128_GCM_SHA256;
        root $root;
    }
}
EOF
}

start_nginx() {
    port=$((port + 1))
    nginx_conf
    "$NGINX" -p "$tmp/nginx" -e "$tmp/nginx/error.log" -c "$tmp/nginx/nginx.conf" \
        >"$tmp/server.log" 2>&1 &
    server_pid=$!
    wait_port "$port"
}

if [ -n "$nginx" ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj /CN=127.0.0.1 -keyout "$tmp/nginx/key.pem" -out "$tmp/nginx/cert.pem" \
        >/dev/null 2>&1 || { echo "$ME: openssl could not make a certificate" >&2; exit 2; }
fi

# ---- clients ---------------------------------------------------------------
# run_multio N MB: N clients each read the MB file; prints "mbps p50_us
# p99_us errors seconds" (seconds: the run's, all bytes over the aggregate)
run_multio() {
    local out
    out=$(timeout 300 "$MULTIO" --port "$port" --clients "$1" --inflight "$inflight" \
        --root "$root" --file "multio-${2}mb.bin" --no-verify --timeout 240 2>&1)
    echo "$out" >>"$tmp/multio.log"
    echo "$out" | awk '/^multio: / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
        END { printf "%s %s %s %s %.2f\n", v["aggregate_mbps"] + 0, v["p50_us"] + 0, v["p99_us"] + 0,
              (("errors" in v) ? v["errors"] : 1),
              (v["aggregate_mbps"] > 0 ? v["total_mb"] / v["aggregate_mbps"] : 0) }'
}

# run_curl N MB: N curl clients each download the MB file over HTTPS; prints
# "mbps - - errors seconds" (aggregate: all bytes over the wall time of the
# slowest).
run_curl() {
    local n=$1 mb=$2 i t0 t1 bytes=0 err=0 b
    t0=$(date +%s%N)
    for i in $(seq "$n"); do
        timeout 300 curl -k -s -o /dev/null -w '%{size_download} %{http_code}\n' \
            "https://127.0.0.1:$port/multio-${mb}mb.bin" >"$tmp/curl.$i" 2>&1 &
    done
    wait
    t1=$(date +%s%N)
    for i in $(seq "$n"); do
        read -r b code <"$tmp/curl.$i" || { err=$((err + 1)); continue; }
        bytes=$((bytes + b))
        [ "$code" = 200 ] && [ "$b" = $((mb * 1048576)) ] || err=$((err + 1))
    done
    awk -v b="$bytes" -v ns=$((t1 - t0)) -v e="$err" 'BEGIN { printf "%.1f - - %d %.2f\n", b / 1e6 / (ns / 1e9), e, ns / 1e9 }'
}

mkdir -p bench/results
csv=bench/results/sfs.csv
raw="$tmp/raw.csv"
echo "config,clients,mbps,p50_us,p99_us,server_cpu_s,mb_per_cpu_s,steals,errors,pass,seconds,file_mb" >"$raw"
status=0

# ---- file sizes: each run lasts at least $seconds s ---------------------------
# size[N]: the file each of N clients reads. Probe runs (Mely, stealing off)
# give the aggregate rate: one of $probe_mb MB per client, and, if that took
# less than half a second (too short to time), one sized for about a second.
# The file is sized for 1.5 x $seconds at that rate (a stealing
# configuration, or a quieter moment, may run faster), in steps of 50 MB,
# 4,096 MB at most.
declare -A size
probe() { # N MB: one mely run; sets mbps, secs and err (no subshell: the
           # port and the server's pid are the script's)
    start_sfsd mely || { echo "$ME: sfsd did not start:" >&2; sed 's/^/  /' "$tmp/server.log" >&2; exit 1; }
    read -r mbps _ _ err secs <<<"$(run_multio "$1" "$2")"
    stop_server
}
scale_mb() { # MB SECONDS_TAKEN SECONDS_WANTED: MB for that duration, 50-MB steps, 1..4096
    awk -v mb="$1" -v s="$2" -v want="$3" 'BEGIN {
        f = (s > 0) ? mb * want / s : 4096; f = int((f + 49) / 50) * 50
        if (f < 50) f = 50; if (f > 4096) f = 4096; print f }'
}
if [ -n "$file_mb" ]; then
    make_file "$file_mb"
    for n in $clients_sel; do size[$n]=$file_mb; done
else
    make_file "$probe_mb"
    for n in $clients_sel; do
        mb=$probe_mb
        probe "$n" "$mb"
        if awk -v s="$secs" 'BEGIN { exit !(s < 0.5) }'; then
            mb=$(scale_mb "$mb" "$secs" 1)
            make_file "$mb"
            probe "$n" "$mb"
        fi
        size[$n]=$(scale_mb "$mb" "$secs" "$(awk -v s="$seconds" 'BEGIN { print 1.5 * s }')")
        echo "probe: $n clients x $mb MB: $mbps MB/s in $secs s (errors $err): ${size[$n]} MB per client"
        make_file "${size[$n]}"
    done
fi
echo

# One run: a fresh server, one load, the server's CPU and statistics.
run_one() { # config clients pass
    local cfg=$1 n=$2 pass=$3 ok t0 t1 res mbps p50 p99 err cpu steals secs mb=${size[$2]}
    if [ "$cfg" = nginx ]; then start_nginx; else start_sfsd "$cfg"; fi
    ok=$?
    if [ $ok -ne 0 ]; then
        echo "$ME: $cfg did not start:" >&2
        sed 's/^/  /' "$tmp/server.log" >&2
        stop_server
        status=1
        return
    fi
    t0=$(server_ticks)
    if [ "$cfg" = nginx ]; then res=$(run_curl "$n" "$mb"); else res=$(run_multio "$n" "$mb"); fi
    t1=$(server_ticks)
    stop_server
    read -r mbps p50 p99 err secs <<<"$res"
    steals=$(awk '/^sfsd: connections/ { for (i = 1; i <= NF; i++) if ($i == "steals") print $(i + 1) }' "$tmp/server.log")
    cpu=$(awk -v d=$((t1 - t0)) -v hz="$HZ" 'BEGIN { printf "%.2f", d / hz }')
    local per
    per=$(awk -v c="$cpu" -v n="$n" -v mb="$mb" 'BEGIN { if (c > 0) printf "%.0f", n * mb * 1.048576 / c }')
    [ "$err" = 0 ] || status=1
    echo "$cfg,$n,$mbps,$p50,$p99,$cpu,$per,${steals:-},$err,$pass,$secs,$mb" >>"$raw"
    printf "  %-14s %2d clients %9s MB/s in %5s s  p99 %7s us  server CPU %6s s  steals %s%s\n" \
        "$cfg" "$n" "$mbps" "$secs" "$p99" "$cpu" "${steals:--}" "$([ "$err" = 0 ] || echo "  ERRORS: $err")" >&2
}

runs=$configs_sel
[ -n "$nginx" ] && runs="$runs nginx"
for pass in $(seq "$passes"); do
    echo "pass $pass/$passes ($(date +%H:%M:%S), load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    for n in $clients_sel; do
        for cfg in $runs; do
            run_one "$cfg" "$n" "$pass"
        done
    done
done
echo >&2

# ---- table and CSV: medians over the passes; ratios to mely (stealing off)
# and to the legacy engine with its stealing, same client count: the median
# of the per-pass ratios (each pass's run against the same pass's mely or
# legacy-steal run, minutes apart at most) and their spread ------------------
awk -F, -v ceiling="${ceiling:-0}" "$AWK_MEDIAN"'
    function bound(list, sign,   n, v, i, m) { # sign 1: the least, -1: the greatest
        n = split(list, v, " "); if (n == 0) return ""
        m = v[1] + 0; for (i = 2; i <= n; i++) if (sign * (v[i] - m) < 0) m = v[i] + 0; return m }
    function lo(list) { return bound(list, 1) }
    function hi(list) { return bound(list, -1) }
    NR == 1 { next }
    { k = $1 SUBSEP $2
      if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
      mb[k] = mb[k] " " $3; p99[k] = p99[k] " " $5; cpu[k] = cpu[k] " " $6
      per[k] = per[k] " " $7; st[k] = st[k] " " $8; err[k] += $9; np[k]++
      sec[k] = sec[k] " " $11; fmb[k] = $12; pass[k, $10] = $3 }
    END {
        for (i = 1; i <= nk; i++) {
            k = order[i]; med[k] = median(mb[k]); split(k, f, SUBSEP)
            for (p = 1; p <= 1000; p++) {
                if (!((k, p) in pass)) continue
                o = pass["mely", f[2], p]; l = pass["legacy-steal", f[2], p]
                if (o > 0) r1[k] = r1[k] " " pass[k, p] / o
                if (l > 0) r2[k] = r2[k] " " pass[k, p] / l
            }
        }
        print "config,clients,mbps,ratio_to_mely_off,ratio_to_mely_off_min,ratio_to_mely_off_max,ratio_to_legacy_steal,ratio_to_legacy_steal_min,ratio_to_legacy_steal_max,pct_of_ceiling,p99_us,server_cpu_s,mb_per_cpu_s,ratio_per_cpu_to_nginx,steals,errors,passes,run_s_min,file_mb"
        for (i = 1; i <= nk; i++) {
            k = order[i]; split(k, f, SUBSEP)
            ng = median(per["nginx" SUBSEP f[2]]); mine = median(per[k])
            printf("%s,%s,%.1f,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%d,%d,%s,%s\n", f[1], f[2], med[k],
                (r1[k] != "" ? sprintf("%.2f", median(r1[k])) : ""),
                (r1[k] != "" ? sprintf("%.2f", lo(r1[k])) : ""),
                (r1[k] != "" ? sprintf("%.2f", hi(r1[k])) : ""),
                (r2[k] != "" ? sprintf("%.2f", median(r2[k])) : ""),
                (r2[k] != "" ? sprintf("%.2f", lo(r2[k])) : ""),
                (r2[k] != "" ? sprintf("%.2f", hi(r2[k])) : ""),
                (ceiling > 0 ? sprintf("%.1f", 100 * med[k] / ceiling) : ""),
                median(p99[k]), median(cpu[k]), mine,
                ((ng > 0 && mine != "") ? sprintf("%.2f", mine / ng) : ""),
                median(st[k]), err[k], np[k], lo(sec[k]), fmb[k])
        }
    }' "$raw" >"$csv"

printf "%-14s %7s %6s %9s %6s %9s %8s %9s %6s %9s %8s %8s %8s %7s\n" config clients "MB" "MB/s" "/mely" \
    "min-max" "/legacy+" "min-max" "%ceil" "p99 us" "MB/CPUs" "/nginx" steals errors
awk -F, 'function d(x) { return x == "" ? "-" : x }
    function mm(a, b) { return (a == "" ? "-" : a "-" b) }
    NR > 1 { printf "%-14s %7s %6s %9s %6s %9s %8s %9s %6s %9s %8s %8s %8s %7s\n", $1, $2, $19, $3,
    d($4), mm($5, $6), d($7), mm($8, $9), d($10), d($11), d($13), d($14), d($15), $16 }' "$csv"
echo
echo "MB: the file each client read; MB/s: median aggregate over the passes (all"
echo "clients' bytes over the run's wall time); /mely: over Mely's engine without"
echo "stealing, same clients, the median of the per-pass ratios and their spread;"
echo "/legacy+: the same over the libasync-smp engine with its stealing; %ceil: of"
echo "the crypto ceiling (${ceiling:-?} MB/s); MB/CPUs: MB served per second of server"
echo "CPU (user+system, /proc); /nginx: that over nginx's (HTTPS, curl clients, same"
echo "file and count)."
awk -F, -v want="$seconds" -v fixed="$file_mb" 'NR > 1 && $18 != "" { if (min == "" || $18 + 0 < min) min = $18 + 0 }
    END { if (min == "") exit
          printf "shortest run: %.2f s", min
          if (fixed == "" && min < want) printf " (below the %s s asked for: the machine ran faster than in the probe)", want
          printf "\n" }' "$csv"
echo "CSV: $csv"

# ---- targets (issues 14 and 29) -------------------------------------------------
awk -F, 'NR > 1 { r1[$1, $2] = $4; r1lo[$1, $2] = $5; r2[$1, $2] = $7; r2lo[$1, $2] = $8
        pc[$1, $2] = $10; pn[$1, $2] = $14; seen[$2] = 1 }
    function check(name, ok, val, low) { printf("  %-58s %-6s %-12s %s\n", name, (val == "" ? "-" : val),
        (low == "" ? "" : "(lowest " low ")"), (val == "" ? "not run" : (ok ? "met" : "MISSED"))) }
    END {
        print "targets (medians of the per-pass ratios; the lowest pass beside them):"
        check("3 clients: mely-all / mely (>= 1.25)", r1["mely-all", 3] >= 1.25, r1["mely-all", 3], r1lo["mely-all", 3])
        check("3 clients: mely-all / legacy-steal (>= 0.97)", r2["mely-all", 3] >= 0.97, r2["mely-all", 3], r2lo["mely-all", 3])
        check("16 clients: mely-all, % of the crypto ceiling (>= 70)", pc["mely-all", 16] >= 70, pc["mely-all", 16], "")
        check("16 clients: mely-all MB per CPU-s / nginx (>= 1.0)", pn["mely-all", 16] >= 1.0, pn["mely-all", 16], "")
        for (n in seen) if (r1["mely-all", n] != "")
            check(n " clients: mely-all / mely (>= 0.95)", r1["mely-all", n] >= 0.95, r1["mely-all", n], r1lo["mely-all", n])
        for (n in seen) if (r2["mely-all", n] != "")
            check(n " clients: mely-all / legacy-steal (>= 1.0)", r2["mely-all", n] >= 1.0, r2["mely-all", n], r2lo["mely-all", n])
    }' "$csv"

# ---- chart -----------------------------------------------------------------
if [ -z "$png" ]; then
    :
elif [ -z "$GNUPLOT" ]; then
    echo "gnuplot not found (Debian package gnuplot-nox): PNG chart skipped"
else
    dat="$tmp/plot.dat"
    cols="$configs_sel${nginx:+ nginx}"
    awk -F, -v cols="$cols" 'NR > 1 { v[$1, $2] = $3; if (!($2 in s)) { s[$2] = 1; o[++n] = $2 } }
        END { m = split(cols, c, " "); printf "clients"; for (j = 1; j <= m; j++) printf " %s", c[j]; print ""
              for (i = 1; i <= n; i++) { printf "%s", o[i]; for (j = 1; j <= m; j++) printf " %s", v[c[j], o[i]] + 0; print "" } }' \
        "$csv" >"$dat"
    ncol=$(echo "$cols" | wc -w)
    "$GNUPLOT" <<EOF 2>/dev/null && echo "PNG: bench/results/sfs.png"
set terminal png size 1000,520
set output "bench/results/sfs.png"
set title "SFS (Figure 7): aggregate MB/s, runs of ${file_mb:+${file_mb} MB per client}${file_mb:->= $seconds s}, $workers workers; crypto ceiling ${ceiling:-?} MB/s"
set style data histogram
set style histogram cluster gap 1
set style fill solid 0.8 border -1
set key outside right top
set xlabel "clients"
set ylabel "MB/s"
set yrange [0:*]
plot for [i=2:$((ncol + 1))] "$dat" using i:xtic(1) title columnhead(i)
EOF
fi
exit $status
