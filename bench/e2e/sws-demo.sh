#!/bin/sh
# SPDX-License-Identifier: MIT
# sws-demo.sh: SWS under load, in one command. Builds nothing: it expects a
# built tree in build/ (scripts/quickstart.sh, or `mkdir build && cd build &&
# ../configure && make && make bench/e2e/injector`; BUILD=DIR picks another).
#
#   bench/e2e/sws-demo.sh [--no-wait] [INJECTOR OPTIONS...]
#
# Starts build/apps/sws/sws on its built-in sample site on a free loopback
# port, runs build/bench/e2e/injector against it for 5 s with 50 clients and the
# site's four pages (extra options go to the injector after these: a later
# --duration or --clients wins, a --url adds a URL), prints the injector's
# report, and stops SWS with SIGTERM. On a terminal it first waits for Enter,
# so that you can browse the site; --no-wait stops SWS at once.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=apps/sws/tests/sws-lib.sh
. "$top/apps/sws/tests/sws-lib.sh"
build=${BUILD:-$top/build}
sws=$build/apps/sws/sws
inj=$build/bench/e2e/injector
wait_enter=1
[ -t 0 ] || wait_enter=0
if [ "${1:-}" = "--no-wait" ]; then
    wait_enter=0
    shift
fi
for p in "$sws" "$inj"; do
    if [ ! -x "$p" ]; then
        echo "sws-demo: $p is not built; build first, e.g.:" >&2
        echo "  mkdir -p build && cd build && ../configure && make -j && make bench/e2e/injector" >&2
        exit 1
    fi
done

test_tmpdir sws-demo TERM
trap 'exit 130' INT TERM

"$sws" --port 0 >"$tmp/sws.out" 2>&1 &
pid=$!
if ! port=$(sws_port "$tmp/sws.out" "$pid" 100); then
    echo "sws-demo: sws did not start within 10 s:" >&2
    cat "$tmp/sws.out" >&2
    exit 1
fi
url=http://127.0.0.1:$port/
head -n 1 "$tmp/sws.out"
echo "Browse $url (status page: ${url}server-status) while the injector runs."
echo

timeout 660 "$inj" --port "$port" --clients 50 --duration 5 \
    --url / --url /about.html --url /style.css --url /hello.txt "$@"
status=$?
echo
if [ $status -eq 0 ]; then
    echo "sws-demo: the injector saw no error."
else
    echo "sws-demo: the injector exited $status (errors above)."
fi

if [ $wait_enter -eq 1 ]; then
    printf 'SWS still serves %s; press Enter to stop it. ' "$url"
    read -r _ || true
fi
sws_stop "$pid" 300
src=$?
pid=
echo "sws-demo: SWS stopped (exit $src$([ $src -eq 124 ] && echo ': killed after 30 s'))."
[ $src -eq 0 ] && exit $status
exit 1
