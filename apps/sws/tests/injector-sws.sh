#!/bin/sh
# SPDX-License-Identifier: MIT
# injector-sws.sh: bench/e2e/injector against apps/sws/sws on loopback. SWS serves
# its built-in sample site on a free port; the injector runs 2 s with 4
# clients (keep-alive, 3 URLs round robin), then 1 s with Connection: close,
# then 1 s of connections the client ends with a reset (--reset), and must report requests > 0 and no error; a URL SWS does not have must make
# it count bad statuses and exit 1. SIGTERM then stops SWS, which must exit 0.
# Every step is bounded by `timeout`; any failure is a failure (no skip).
set -u
# shellcheck source=apps/sws/tests/sws-lib.sh
. "$(dirname "$0")/sws-lib.sh"
sws=./apps/sws/sws
inj=./bench/e2e/injector
for p in "$sws" "$inj"; do
    [ -x "$p" ] || { echo "FAIL: $p not built (run from the build directory)"; exit 1; }
done
test_tmpdir injector-sws

"$sws" --port 0 --workers 2 --no-pin >"$tmp/sws.out" 2>"$tmp/sws.err" &
pid=$!
# up to 20 s (sanitizer builds start slowly)
port=$(sws_port "$tmp/sws.out" "$pid" 200) || fail "sws exited, or did not print its port in 20 s"
echo "sws serves port $port"

# run NAME ARGS...: runs the injector, its output in $tmp/NAME.out, status in $rc.
run() {
    name=$1
    shift
    timeout 60 "$inj" --port "$port" --workers 2 "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
    cat "$tmp/$name.out"
}
field() { # field NAME KEY: the number after KEY in $tmp/NAME.out
    sed -n "s/^$2  *\([0-9][0-9]*\).*/\1/p" "$tmp/$1.out" | head -n 1
}

run keepalive --clients 4 --duration 2 --requests-per-conn 20 --url / --url /hello.txt --url /style.css
[ $rc -eq 0 ] || fail "injector (keep-alive) exited $rc"
n=$(field keepalive requests)
[ "${n:-0}" -gt 0 ] || fail "keep-alive: no requests reported"
[ "$(field keepalive errors)" = 0 ] || fail "keep-alive: errors reported"
[ "$(field keepalive 'bytes checked')" -gt 0 ] || fail "keep-alive: no bytes checked"

run close --clients 4 --duration 1 --close --url /about.html --quiet
[ $rc -eq 0 ] || fail "injector (close) exited $rc"
n=$(field close requests)
[ "${n:-0}" -gt 0 ] || fail "close: no requests reported"
[ "$(field close errors)" = 0 ] || fail "close: errors reported"

run reset --clients 4 --duration 1 --reset --url /hello.txt --quiet
[ $rc -eq 0 ] || fail "injector (reset) exited $rc"
n=$(field reset requests)
[ "${n:-0}" -gt 0 ] || fail "reset: no requests reported"
[ "$(field reset errors)" = 0 ] || fail "reset: errors reported"

run missing --clients 2 --duration 0.5 --url /no-such-file --quiet
[ $rc -eq 1 ] || fail "injector (404) exited $rc, expected 1"
grep -q 'bad status [1-9]' "$tmp/missing.out" || fail "404: no bad status counted"

sws_stop "$pid" 300 # up to 30 s
src=$?
pid=
[ $src -eq 124 ] && fail "sws still ran 30 s after SIGTERM"
[ $src -eq 0 ] || fail "sws exited $src after SIGTERM"
echo "PASS"
