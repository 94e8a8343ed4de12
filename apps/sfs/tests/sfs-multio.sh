#!/bin/sh
# SPDX-License-Identifier: MIT
# sfs-multio.sh: byte-exact reads from apps/sfs/sfsd by bench/multio --verify
# (every reply opened, every byte compared with the file), many clients at
# once, on both engines with stealing off and on:
#   MELY_ENGINE=mely   MELY_STEAL=off, all
#   MELY_ENGINE=legacy MELY_STEAL=off, base (libasync-smp's engine)
# Each server runs on 2 workers and serves 100 concurrent clients reading a
# small file, then 4 reading the 64 MB file, then 16 reading the small file
# with --no-verify (the performance runs' mode: every READ reply checked by
# length, unopened). After SIGTERM, sfsd must exit 0 and its statistics line
# must count the 120 connections and no error (the last clients' closes may
# still be on their way: `closed` is not checked).
# The TSan build (SAN_FLAGS, set by the Makefile) reads a 1 MB small file:
# its server is ~10x slower. A sanitizer's report fails the test (sfsd's exit
# status). Every step is bounded by `timeout`; any failure is a failure (no skip).
set -u
# shellcheck source=apps/sws/tests/sws-lib.sh
. "$(dirname "$0")/../../sws/tests/sws-lib.sh"
sfsd=./apps/sfs/sfsd
multio=./bench/multio
for p in "$sfsd" "$multio"; do
    [ -x "$p" ] || { echo "FAIL: $p not built (run from the build directory)"; exit 1; }
done
case ${SAN_FLAGS:-} in
*thread*) small_mb=1 big_mb=64 ;; # TSan: the 100 clients' 400 MB would take 20 s
*) small_mb=4 big_mb=64 ;;        # ASan's cost is small here: the crypto is libcrypto's
esac
test_tmpdir sfs-multio
root=$tmp/root
mkdir "$root" || exit 1
fail_lines=40

# read_all NAME PORT CLIENTS MB [--no-verify]: CLIENTS clients read
# multio-MBmb.bin (multio creates it under $root the first time), verifying
# unless told; all must complete without error and read CLIENTS * MB MB in all.
read_all() {
    verify=1
    [ "${5:-}" = --no-verify ] && verify=0
    timeout 120 "$multio" --port "$2" --root "$root" --clients "$3" --file-mb "$4" \
        "${5:---verify}" --timeout 100 >"$tmp/$1.out" 2>"$tmp/$1.err"
    rc=$?
    last=$(tail -n 1 "$tmp/$1.out")
    echo "  $last"
    [ $rc -eq 0 ] || fail "$1: multio exited $rc"
    case $last in
    "multio: total_mb=$(($3 * $4)).0 "*" errors=0 clients=$3 complete=$3 verify=$verify") ;;
    *) fail "$1: expected $3 complete clients, $(($3 * $4)).0 MB, no error" ;;
    esac
}

# serve ENGINE STEAL: one server, both loads, then its statistics.
serve() {
    name=$1-$2
    MELY_ENGINE=$1 MELY_STEAL=$2 MELY_WORKERS=2 "$sfsd" --root "$root" --port 0 \
        >"$tmp/sfsd-$name.out" 2>"$tmp/sfsd-$name.err" &
    pid=$!
    port=$(sfsd_port "$tmp/sfsd-$name.out" "$pid" 200) ||
        fail "$name: sfsd exited, or did not print its port in 20 s"
    echo "sfsd (engine $1, stealing $2) on port $port"
    read_all "$name-small" "$port" 100 "$small_mb"
    read_all "$name-big" "$port" 4 "$big_mb"
    read_all "$name-noverify" "$port" 16 "$small_mb" --no-verify
    sws_stop "$pid" 300
    src=$?
    pid=
    [ $src -eq 124 ] && fail "$name: sfsd still ran 30 s after SIGTERM"
    [ $src -eq 0 ] || fail "$name: sfsd exited $src after SIGTERM"
    stats=$(grep '^sfsd: connections' "$tmp/sfsd-$name.out")
    echo "  $stats"
    case $stats in
    "sfsd: connections 120 (closed "*", refused 0),"*"; evicted 0, timeouts: handshake 0, idle 0; errors: hello 0, frame 0, request 0, oversize 0, io 0") ;;
    *) fail "$name: expected 120 connections, none refused, evicted or timed out, and no error in sfsd's statistics" ;;
    esac
}

serve mely off
serve mely all
serve legacy off
serve legacy base
echo "PASS"
