#!/bin/sh
# SPDX-License-Identifier: MIT
# legacy-programs.sh: runs the three whole legacy programs (built with the
# compat include directory only, as pkg-config gives it) and checks their
# output: libasync style once, libasync-smp and Mely style with work stealing
# off and on.
set -u
dir=compat/tests
status=0

run() { # name expected-file env...
    name=$1 expect=$2
    shift 2
    out=$(env "$@" timeout 120 "$dir/$name" 2>"$dir/$name.err")
    rc=$?
    if [ $rc -ne 0 ]; then
        echo "FAIL: $name ($*): exit $rc"; cat "$dir/$name.err"; status=1; return
    fi
    if [ "$out" != "$expect" ]; then
        echo "FAIL: $name ($*): output differs"; echo "--- got"; echo "$out"; echo "--- expected"
        echo "$expect"; status=1; return
    fi
    echo "ok: $name ($*)"
}

libasync_out='tick 1
tick 2
tick 3
client: connected (attempt 1)
client: echo msg0
client: echo msg1
client: echo msg2
client: echo msg3
client: echo msg4
echo done: 5 messages
signal 1 seen
child exited with 3
done'
run legacy_libasync "$libasync_out" MELY_STEAL=off
run legacy_libasync "$libasync_out" MELY_STEAL=base

for steal in off base; do
    out=$(MELY_STEAL=$steal timeout 120 "$dir/legacy_smp" 2>"$dir/legacy_smp.err")
    rc=$?
    sorted=$(echo "$out" | sort)
    want='counters: 16000 increments on 64 colors
libasync-smp style: ok
order: cpucb before cpucb_tail
pinned: every worker ran its own colors'
    if [ $rc -ne 0 ] || [ "$sorted" != "$want" ]; then
        echo "FAIL: legacy_smp (MELY_STEAL=$steal): exit $rc"; echo "$out"; cat "$dir/legacy_smp.err"
        status=1
    else
        echo "ok: legacy_smp (MELY_STEAL=$steal)"
    fi
    # Mely style: the two parts finish in either order
    out=$(MELY_STEAL=$steal timeout 120 "$dir/legacy_mely" 2>"$dir/legacy_mely.err")
    rc=$?
    sorted=$(echo "$out" | sort)
    want='mely style: ok
reader: 5 messages, watch finished
reused callback ran 3 times'
    if [ $rc -ne 0 ] || [ "$sorted" != "$want" ] ||
        ! grep -q 'start(42) on worker' "$dir/legacy_mely.err"; then
        echo "FAIL: legacy_mely (MELY_STEAL=$steal): exit $rc"; echo "$out"; cat "$dir/legacy_mely.err"
        status=1
    else
        echo "ok: legacy_mely (MELY_STEAL=$steal)"
    fi
done
exit $status
