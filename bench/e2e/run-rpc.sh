#!/bin/bash
# SPDX-License-Identifier: MIT
# run-rpc.sh: compat's arpc (asrv, aclnt, axprt_stream) against sfslite's own
# libasync + arpc. One server and one load client (bench/e2e/rpc/:
# rpc_server.C, rpc_load.C, rpcbench_prot.x), written as SFS code is, built
# on compat (mely-rpcc) and, when SFSLITE names a built sfslite tree, on its
# libasync and libarpc (its rpcc). Rows:
#
#   compat-1w   compat server, MELY_WORKERS=1 (a color per connection)
#   compat-2w   compat server, MELY_WORKERS=2
#   sfslite     sfslite's server (libasync: one thread)
#
# each against its own library's client (compat's on one worker), for 1, 2,
# 4, 8 and 16 clients (connections, one call in flight each), two loads:
# null RPCs (round trips/s) and RPCBENCH_SINK with a 64 KB argument
# (argument MB/s), in interleaved passes (the row order rotating by one each
# pass; medians). Server and client share the machine's CPUs. Beside them, the
# machine's loopback floor (kv_load --floor: a loopback TCP write()+read()
# pair of 32 bytes, the least of before and after). The targets, at 16
# clients: compat-2w >= 1.5x sfslite, compat-1w >= 1.0x, in both loads.
#
#   SFSLITE=/path/to/sfslite bench/e2e/run-rpc.sh [--passes P] [--seconds S]
#        [--clients LIST] [--quick]
#
#   --passes P      interleaved passes (default 3)
#   --seconds S     each run's window (default 3; 0.5 s warm-up before it)
#   --clients LIST  of 1,2,4,8,16 (default all)
#   --quick         1 pass of 1 s windows
#   --spin-us N     MELY_SPIN_US for compat's server and client (default: the
#                   runtime's, 50): how long an idle worker spins before it
#                   parks (see bench/README.md: it decides these figures)
#
# Run from the top of the source tree after `make -C build` (and `make -C
# build bench` for the floor). Writes bench/results/rpc.csv; progress on
# stderr. Exit status 0; 1 if a run failed; 2 if a tool is missing.
set -u
ME=run-rpc.sh
# shellcheck source=bench/e2e/lib.sh
. "$(dirname "$0")/lib.sh"

all_clients="1 2 4 8 16"
passes=3 seconds=3 clients_sel=$all_clients spin_us=
while [ $# -gt 0 ]; do
    case "$1" in
    --passes) whole --passes "${2:-}" 1 20; passes=$2; shift ;;
    --seconds) whole --seconds "${2:-}" 1 60; seconds=$2; shift ;;
    --clients) clients_sel=$(pick --clients "${2:-}" "$all_clients") || exit 2; shift ;;
    --quick) passes=1 seconds=1 ;;
    --spin-us) whole --spin-us "${2:-}" 0 1000000; spin_us=$2; shift ;;
    -h | --help) sed -n '3,36p' "$0"; exit 0 ;;
    *) echo "$ME: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done

top=$(cd "$(dirname "$0")/../.." && pwd)
src=$top/bench/e2e/rpc
B=${MELY_BUILD:-$top/build}
[ -f "$B/compat/mely-compat-uninstalled.pc" ] || {
    echo "$ME: no mely build in $B (set MELY_BUILD)" >&2
    exit 2
}
KV_LOAD=$(find_bin "${KV_LOAD_BIN:-}" "$B/bench/e2e/kv_load")
tmp=$(mktemp -d /tmp/run-rpc.XXXXXX)

cleanup_on_exit
mkdir -p "$top/bench/results"
csv=$top/bench/results/rpc.csv

# ---- builds ----------------------------------------------------------------
build() { # build compat|sfslite
    local d=$tmp/$1 flags libs
    mkdir -p "$d"
    cp "$src"/rpcbench_prot.x "$d/"
    if [ "$1" = sfslite ]; then
        local R=$SFSLITE
        (cd "$d" && "$R/rpcc/rpcc" -h rpcbench_prot.x && "$R/rpcc/rpcc" -c rpcbench_prot.x) || return 1
        flags="-std=gnu++11 -DHAVE_CONFIG_H -I$d -I$R/async -I$R/arpc -I$R/crypt -I/usr/include/tirpc -I$R"
        libs="-L$R/arpc/.libs -L$R/async/.libs -larpc -lasync -ltirpc -lpcre -Wl,-rpath,$R/async/.libs -Wl,-rpath,$R/arpc/.libs"
    else
        (cd "$d" && python3 "$top/tools/mely-rpcc" -h rpcbench_prot.x &&
            python3 "$top/tools/mely-rpcc" -c rpcbench_prot.x) || return 1
        flags="-I$d $(PKG_CONFIG_PATH=$B/compat pkg-config --cflags mely-compat-uninstalled)"
        libs=$(PKG_CONFIG_PATH=$B/compat pkg-config --libs mely-compat-uninstalled)
    fi
    for p in rpc_server rpc_load; do
        # shellcheck disable=SC2086
        ${CXX:-g++} -O2 $flags "$src/$p.C" "$d/rpcbench_prot.C" -o "$d/$p" $libs \
            >"$d/build-$p.log" 2>&1 || { cat "$d/build-$p.log" >&2; return 1; }
    done
}
build compat || { echo "$ME: building on compat failed" >&2; exit 2; }
rows="compat-1w compat-2w"
if [ -n "${SFSLITE:-}" ]; then
    if [ -x "$SFSLITE/rpcc/rpcc" ] && [ -e "$SFSLITE/arpc/.libs/libarpc.so" ]; then
        build sfslite || { echo "$ME: building on sfslite failed" >&2; exit 2; }
        rows="$rows sfslite"
    else
        echo "$ME: $SFSLITE has no built rpcc and arpc (make -C \$SFSLITE/arpc): no sfslite row" >&2
    fi
else
    echo "$ME: SFSLITE not set: no sfslite row" >&2
fi

floor() { # ns per loopback write()+read() pair, or empty
    [ -n "$KV_LOAD" ] || return 0
    "$KV_LOAD" --floor >"$tmp/floor.out" 2>&1
    sed -n 's/^kv_load: floor_ns_per_pair=\([0-9]*\)$/\1/p' "$tmp/floor.out"
}

# run ROW CLIENTS LOAD: prints "rps mbps errors" (or "0 0 1" on a failure)
run() {
    local lib=compat workers=1
    case "$1" in
    compat-2w) workers=2 ;;
    sfslite) lib=sfslite ;;
    esac
    [ -n "$spin_us" ] && export MELY_SPIN_US=$spin_us
    MELY_WORKERS=$workers "$tmp/$lib/rpc_server" 0 >"$tmp/server.log" 2>&1 &
    server_pid=$!
    local port
    port=$(said_port "$tmp/server.log")
    if [ -z "$port" ]; then
        echo "$ME: $1, $2 clients, $3: the server did not start:" >&2
        head -n 20 "$tmp/server.log" >&2
        stop_server
        echo "0 0 1"
        return
    fi
    local out
    out=$(MELY_WORKERS=1 timeout $((seconds + 30)) "$tmp/$lib/rpc_load" "$port" "$2" "$3" \
        "$seconds" 500 2>&1)
    echo "$1 $2 $3: $out" >>"$tmp/load.log"
    case "$out" in *"rpc_load: calls="*) ;; *)
        echo "$ME: $1, $2 clients, $3: the run failed:" >&2
        { echo "$out"; sed 's/^/  server: /' "$tmp/server.log"; } | head -n 20 >&2 ;;
    esac
    stop_server
    echo "$out" | awk '/^rpc_load: / { for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
        END { if (!("rps" in v)) print "0 0 1"; else printf "%s %s %s\n", v["rps"], v["mbps"], v["errors"] }'
}

machine_line
echo "rows: $rows; clients: $clients_sel; $passes pass(es) of ${seconds} s windows;" \
    "client on its own library (compat's: 1 worker); MELY_SPIN_US=${spin_us:-default}"
f0=$(floor)
echo "floor before: a loopback TCP write()+read() pair: ${f0:-?} ns"
: >"$tmp/results"
for p in $(seq "$passes"); do
    for n in $clients_sel; do
        for load in null 64k; do
            # The row order rotates by one each pass.
            set -- $rows
            k=$(((p - 1) % $#))
            order="${*:k+1} ${*:1:k}"
            for r in $order; do
                res=$(run "$r" "$n" "$load")
                echo "$p $n $load $r $res" >>"$tmp/results"
                echo "pass $p: $r $n clients $load: $res" >&2
            done
        done
    done
done
f1=$(floor)
echo "floor after: ${f1:-?} ns"

awk -v f0="${f0:-0}" -v f1="${f1:-0}" -v rows="$rows" -v clients="$clients_sel" -v csv="$csv" \
    -v machine="$(machine_line | sed 's/^machine: //; s/,/;/g')" '
function median(a, n,   i, j, t) {
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ k = $2 " " $3 " " $4; if ($7 != 0) { err[k] += $7; if ($5 == 0) { if (!(k in n)) n[k] = 0; next } }
  n[k]++; rps[k, n[k]] = $5; mb[k, n[k]] = $6 }
END {
    floor = (f0 > 0 && (f1 == 0 || f0 < f1)) ? f0 : f1
    split(rows, R, " "); split(clients, C, " ")
    print "date,machine,floor_ns_per_pair,row,clients,load,median_rps,median_mbps,errors" > csv
    printf "\n%-10s %7s   %12s %8s   %12s %8s\n", "row", "clients", "null rt/s", "vs sfs", "64KB MB/s", "vs sfs"
    for (c = 1; c in C; c++) for (r = 1; r in R; r++) {
        kn = C[c] " null " R[r]; kb = C[c] " 64k " R[r]
        delete a; for (i = 1; i <= n[kn]; i++) a[i] = rps[kn, i]; mr = median(a, n[kn])
        delete a; for (i = 1; i <= n[kb]; i++) a[i] = mb[kb, i]; mm = median(a, n[kb])
        MR[R[r], C[c]] = mr; MM[R[r], C[c]] = mm
        sn = C[c] " null sfslite"; sb = C[c] " 64k sfslite"
        vr = "-"; vm = "-"
        if (R[r] != "sfslite" && (sn in n)) {
            delete a; for (i = 1; i <= n[sn]; i++) a[i] = rps[sn, i]; s = median(a, n[sn]); if (s > 0) vr = sprintf("%.2fx", mr / s)
            delete a; for (i = 1; i <= n[sb]; i++) a[i] = mb[sb, i]; s = median(a, n[sb]); if (s > 0) vm = sprintf("%.2fx", mm / s)
        }
        printf "%-10s %7s   %12.0f %8s   %12.1f %8s%s\n", R[r], C[c], mr, vr, mm, vm, (err[kn] + err[kb]) ? "  ERRORS" : ""
        printf "%s,%s,%d,%s,%s,null,%.0f,,%d\n", strftime("%Y-%m-%d"), machine, floor, R[r], C[c], mr, err[kn] + 0 > csv
        printf "%s,%s,%d,%s,%s,64k,,%.1f,%d\n", strftime("%Y-%m-%d"), machine, floor, R[r], C[c], mm, err[kb] + 0 > csv
    }
    if (floor > 0)
        printf "\nloopback floor: %d ns per write()+read() pair (%.0f pairs/s on one core); a null round trip is two pairs\n", floor, 1e9 / floor
    if (("sfslite", 16) in MR) {
        for (t = 1; t <= 2; t++) {
            w = "compat-" t "w"; want = (t == 2) ? 1.5 : 1.0
            if (!((w, 16) in MR)) continue
            xr = MR["sfslite", 16] > 0 ? MR[w, 16] / MR["sfslite", 16] : 0
            xm = MM["sfslite", 16] > 0 ? MM[w, 16] / MM["sfslite", 16] : 0
            printf "target, 16 clients, %s >= %.1fx sfslite: round trips %.2fx %s, MB/s %.2fx %s\n", w, want,
                xr, (xr >= want ? "PASS" : "MISS"), xm, (xm >= want ? "PASS" : "MISS")
        }
    }
}' "$tmp/results"
echo "csv: $csv"
grep -q ' [0-9.]* [0-9.]* [1-9][0-9]*$' "$tmp/results" && exit 1
exit 0
