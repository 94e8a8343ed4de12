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
# for 1, 2, 3, 4 and 16 clients, in interleaved passes (medians). In the same
# run: the machine's crypto ceiling (bench/aead: the AEAD's single-core
# sealing rate on 64 KB blocks, times the workers), and the peer a user would
# pick instead: nginx serving the same file over HTTPS (TLS 1.3,
# TLS_AES_128_GCM_SHA256, the same two workers, pinned), N curl clients each
# downloading the whole file.
#
#   bench/e2e/run-sfs.sh [--passes P] [--file-mb M] [--clients LIST]
#                        [--configs LIST] [--inflight K] [--no-nginx] [--no-png]
#
#   --passes P     interleaved passes (default 3, 1..20)
#   --file-mb M    the file each client reads (default 200, the paper's; 1..4096)
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

usage="usage: bench/e2e/run-sfs.sh [--passes P] [--file-mb M] [--clients LIST]
       [--configs LIST] [--inflight K] [--no-nginx] [--no-png]"
all_configs="legacy legacy-steal mely mely-all mely-measured"
all_clients="1 2 3 4 16"

passes=3 file_mb=200 inflight=4 nginx=yes png=yes
configs_sel=$all_configs clients_sel=$all_clients
while [ $# -gt 0 ]; do
    case "$1" in
    --passes) whole --passes "${2:-}" 1 20; passes=$2; shift ;;
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
file="multio-${file_mb}mb.bin"
cleanup_on_exit

machine_line
echo "server: sfsd ($SFSD), $workers workers pinned; client: bench/multio, --no-verify," \
    "${file_mb} MB per client, $inflight READs of 64 KB in flight; $passes pass(es)"

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

# The file, written once by multio itself (deterministic content), then read
# once so that it is in the page cache.
"$MULTIO" --port 1 --root "$root" --file-mb "$file_mb" --prepare-only >"$tmp/prep.out" 2>&1 || {
    echo "$ME: multio could not create the file:" >&2
    sed 's/^/  /' "$tmp/prep.out" >&2
    exit 1
}
cat "$root/$file" >/dev/null

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
# run_multio N: prints "mbps p50_us p99_us errors"
run_multio() {
    local out
    out=$(timeout 300 "$MULTIO" --port "$port" --clients "$1" --inflight "$inflight" \
        --root "$root" --file "$file" --no-verify --timeout 240 2>&1)
    echo "$out" >>"$tmp/multio.log"
    echo "$out" | awk '/^multio: / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
        END { printf "%s %s %s %s\n", v["aggregate_mbps"] + 0, v["p50_us"] + 0, v["p99_us"] + 0,
              (("errors" in v) ? v["errors"] : 1) }'
}

# run_curl N: N curl clients each download the whole file over HTTPS; prints
# "mbps - - errors" (aggregate: all bytes over the wall time of the slowest).
run_curl() {
    local n=$1 i t0 t1 bytes=0 err=0 b
    t0=$(date +%s%N)
    for i in $(seq "$n"); do
        timeout 300 curl -k -s -o /dev/null -w '%{size_download} %{http_code}\n' \
            "https://127.0.0.1:$port/$file" >"$tmp/curl.$i" 2>&1 &
    done
    wait
    t1=$(date +%s%N)
    for i in $(seq "$n"); do
        read -r b code <"$tmp/curl.$i" || { err=$((err + 1)); continue; }
        bytes=$((bytes + b))
        [ "$code" = 200 ] && [ "$b" = $((file_mb * 1048576)) ] || err=$((err + 1))
    done
    awk -v b="$bytes" -v ns=$((t1 - t0)) -v e="$err" 'BEGIN { printf "%.1f - - %d\n", b / 1e6 / (ns / 1e9), e }'
}

mkdir -p bench/results
csv=bench/results/sfs.csv
raw="$tmp/raw.csv"
echo "config,clients,mbps,p50_us,p99_us,server_cpu_s,mb_per_cpu_s,steals,errors,pass" >"$raw"
status=0

# One run: a fresh server, one load, the server's CPU and statistics.
run_one() { # config clients pass
    local cfg=$1 n=$2 pass=$3 ok t0 t1 res mbps p50 p99 err cpu steals
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
    if [ "$cfg" = nginx ]; then res=$(run_curl "$n"); else res=$(run_multio "$n"); fi
    t1=$(server_ticks)
    stop_server
    read -r mbps p50 p99 err <<<"$res"
    steals=$(awk '/^sfsd: connections/ { for (i = 1; i <= NF; i++) if ($i == "steals") print $(i + 1) }' "$tmp/server.log")
    cpu=$(awk -v d=$((t1 - t0)) -v hz="$HZ" 'BEGIN { printf "%.2f", d / hz }')
    local per
    per=$(awk -v c="$cpu" -v n="$n" -v mb="$file_mb" 'BEGIN { if (c > 0) printf "%.0f", n * mb * 1.048576 / c }')
    [ "$err" = 0 ] || status=1
    echo "$cfg,$n,$mbps,$p50,$p99,$cpu,$per,${steals:-},$err,$pass" >>"$raw"
    printf "  %-14s %2d clients %9s MB/s  p99 %7s us  server CPU %6s s  steals %s%s\n" \
        "$cfg" "$n" "$mbps" "$p99" "$cpu" "${steals:--}" "$([ "$err" = 0 ] || echo "  ERRORS: $err")" >&2
}

runs=$configs_sel
[ -n "$nginx" ] && runs="$runs nginx"
for pass in $(seq "$passes"); do
    echo "pass $pass/$passes ($(date +%H:%M:%S))" >&2
    for n in $clients_sel; do
        for cfg in $runs; do
            run_one "$cfg" "$n" "$pass"
        done
    done
done
echo >&2

# ---- table and CSV: medians over the passes; ratios to mely (stealing off)
# and to the legacy engine with its stealing, same client count -------------
awk -F, -v ceiling="${ceiling:-0}" "$AWK_MEDIAN"'
    NR == 1 { next }
    { k = $1 SUBSEP $2
      if (!(k in seen)) { seen[k] = 1; order[++nk] = k }
      mb[k] = mb[k] " " $3; p99[k] = p99[k] " " $5; cpu[k] = cpu[k] " " $6
      per[k] = per[k] " " $7; st[k] = st[k] " " $8; err[k] += $9; np[k]++ }
    END {
        for (i = 1; i <= nk; i++) { k = order[i]; med[k] = median(mb[k]) }
        print "config,clients,mbps,ratio_to_mely_off,ratio_to_legacy_steal,pct_of_ceiling,p99_us,server_cpu_s,mb_per_cpu_s,ratio_per_cpu_to_nginx,steals,errors,passes"
        for (i = 1; i <= nk; i++) {
            k = order[i]; split(k, f, SUBSEP)
            off = med["mely" SUBSEP f[2]]; ls = med["legacy-steal" SUBSEP f[2]]
            ng = median(per["nginx" SUBSEP f[2]]); mine = median(per[k])
            printf("%s,%s,%.1f,%s,%s,%s,%s,%s,%s,%s,%s,%d,%d\n", f[1], f[2], med[k],
                (off > 0 ? sprintf("%.2f", med[k] / off) : ""),
                (ls > 0 ? sprintf("%.2f", med[k] / ls) : ""),
                (ceiling > 0 ? sprintf("%.1f", 100 * med[k] / ceiling) : ""),
                median(p99[k]), median(cpu[k]), mine,
                ((ng > 0 && mine != "") ? sprintf("%.2f", mine / ng) : ""),
                median(st[k]), err[k], np[k])
        }
    }' "$raw" >"$csv"

printf "%-14s %7s %9s %8s %9s %8s %9s %8s %8s %8s %7s\n" config clients "MB/s" "/mely" \
    "/legacy+" "%ceil" "p99 us" "MB/CPUs" "/nginx" steals errors
awk -F, 'NR > 1 { printf "%-14s %7s %9s %8s %9s %8s %9s %8s %8s %8s %7s\n", $1, $2, $3,
    ($4 == "" ? "-" : $4), ($5 == "" ? "-" : $5), ($6 == "" ? "-" : $6), ($7 == "" ? "-" : $7),
    ($9 == "" ? "-" : $9), ($10 == "" ? "-" : $10), ($11 == "" ? "-" : $11), $12 }' "$csv"
echo
echo "MB/s: median aggregate over the passes (all clients' bytes over the run's wall"
echo "time); /mely: over Mely's engine without stealing, same clients; /legacy+: over"
echo "the libasync-smp engine with its stealing; %ceil: of the crypto ceiling"
echo "(${ceiling:-?} MB/s); MB/CPUs: MB served per second of server CPU (user+system,"
echo "/proc); /nginx: that over nginx's (HTTPS, curl clients, same file and count)."
echo "CSV: $csv"

# ---- targets (issue 14) -------------------------------------------------------
awk -F, 'NR > 1 { v[$1, $2] = $3; r1[$1, $2] = $4; r2[$1, $2] = $5; pc[$1, $2] = $6; pn[$1, $2] = $10
        seen[$2] = 1 }
    function check(name, ok, val) { printf("  %-58s %-8s %s\n", name, (val == "" ? "-" : val), (val == "" ? "not run" : (ok ? "met" : "MISSED"))) }
    END {
        print "targets:"
        check("3 clients: mely-all / mely (>= 1.25)", r1["mely-all", 3] >= 1.25, r1["mely-all", 3])
        check("3 clients: mely-all / legacy-steal (>= 0.97)", r2["mely-all", 3] >= 0.97, r2["mely-all", 3])
        check("16 clients: mely-all, % of the crypto ceiling (>= 70)", pc["mely-all", 16] >= 70, pc["mely-all", 16])
        check("16 clients: mely-all MB per CPU-s / nginx (>= 1.0)", pn["mely-all", 16] >= 1.0, pn["mely-all", 16])
        for (n in seen) if (r1["mely-all", n] != "")
            check(n " clients: mely-all / mely (>= 0.95)", r1["mely-all", n] >= 0.95, r1["mely-all", n])
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
set title "SFS (Figure 7): aggregate MB/s, ${file_mb} MB per client, $workers workers; crypto ceiling ${ceiling:-?} MB/s"
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
