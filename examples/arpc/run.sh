#!/bin/sh
# SPDX-License-Identifier: MIT
# examples/arpc/run.sh: demo_server and demo_client against each other
# (make check): the client checks every answer and exits 0.
set -u
builddir=${builddir:-.}
dir=$builddir/examples/arpc
out=$(mktemp)
"$dir/demo_server" 0 >"$out" &
spid=$!
trap 'kill $spid 2>/dev/null; rm -f "$out"' EXIT
port=
for i in $(seq 1 100); do
    port=$(sed -n 's/^port //p' "$out")
    [ -n "$port" ] && break
    sleep 0.1
done
[ -n "$port" ] || { echo "run.sh: the server did not start" >&2; exit 1; }
# Two clients at once (two connections, two colors on the server), then one
# on a single worker.
"$dir/demo_client" "$port" 2000 & c1=$!
"$dir/demo_client" "$port" 2000 & c2=$!
wait $c1 || { echo "run.sh: client 1 failed" >&2; exit 1; }
wait $c2 || { echo "run.sh: client 2 failed" >&2; exit 1; }
MELY_WORKERS=1 "$dir/demo_client" "$port" 100 || { echo "run.sh: client 3 failed" >&2; exit 1; }
kill $spid
wait $spid 2>/dev/null
exit 0
