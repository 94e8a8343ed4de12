#!/bin/sh
# SPDX-License-Identifier: MIT
# pubsub-self-test.sh: every publish/subscribe broker (protocol:
# bench/e2e/pubsub.h) checked by bench/e2e/pubsub_client, from the build
# directory (make check).
#
#   examples/tests/pubsub-self-test.sh [BROKER...]
#
# Brokers: the arguments, else $PUBSUB_SERVERS, else $required (the
# bufferevent broker, and examples/pubsub, which make check builds). Each broker, as fresh processes (with $SERVER_RUNNER before
# it if set, as examples/tests/serve-lib.sh does):
#   - `--help` exits 0, a bad option exits 2;
#   - with --max-output 65536 --idle-ms 0: --check-protocol, --check-slow,
#     a small load on 1 and on 2 client threads; then SIGTERM: exit 0 and the
#     one stderr line, with exactly 1 cut (the slow subscriber);
#   - with --idle-ms 300: --check-idle 300;
#   - with --max-output 64 MiB: --check-drain (a load, SIGTERM mid-run; the
#     client reads the broker's stderr once it exited); exit 0. Its load has
#     ~5 MB in flight per subscriber (3 subscribers in both of 2 rooms, 5
#     publishers x 1024 messages of 1 KB), more than the kernel holds for a
#     connection (pubsub_load.c), so that the broker has output of its own to
#     send when the signal comes: a broker that drops it fails (with smaller
#     loads it passed), and X = 3 x the window puts the signal mid-run.
# Bounded: the client bounds each of its runs (--seconds-limit, and 10 s per
# read in the checks), a broker gets 60 s to say its port and 60 s to end
# (then SIGKILL).

required="bench/e2e/pubsub_bufferevent examples/pubsub"
optional=""
client=./bench/e2e/pubsub_client
load="--subs 20 --rooms 4 --rooms-per-sub 2 --pubs 5 --seconds-limit 50"

if [ $# -gt 0 ]; then
    brokers="$*"
elif [ -n "${PUBSUB_SERVERS:-}" ]; then
    brokers=$PUBSUB_SERVERS
else
    brokers=$required
    for b in $optional; do
        if [ -x "$b" ]; then
            brokers="$brokers $b"
        else
            echo "pubsub-self-test: $b is not built: not checked"
        fi
    done
fi

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
failed=0

fail() {
    echo "FAIL: $*"
    failed=1
}

# await_exit PID: waits up to 60 s until the process has exited (gone, or a
# zombie: after --check-drain the client has waited for it, we reap it), then
# kills it. (kill -0, as examples/tests/serve-lib.sh uses it, succeeds on a zombie.)
await_exit() {
    n=0
    while [ $n -lt 1200 ]; do
        case $(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) in '' | Z) return 0 ;; esac
        sleep 0.05
        n=$((n + 1))
    done
    kill -9 "$1" 2>/dev/null && fail "process $1 did not end in 60 s: killed"
}

# start BROKER ARGS...: starts it on a free port; sets pid and port; its
# stdout and stderr go to $tmp/out and $tmp/err.
start() {
    case $1 in /*) path=$1 ;; *) path=./$1 ;; esac
    shift
    ${SERVER_RUNNER:-} "$path" --port 0 "$@" >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    port=
    n=0
    while [ -z "$port" ] && [ $n -lt 1200 ] && kill -0 $pid 2>/dev/null; do
        sleep 0.05
        n=$((n + 1))
        port=$(sed -n 's/^pubsub: serving 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$tmp/out")
    done
    [ -n "$port" ] && return 0
    fail "$path $*: no \"pubsub: serving 127.0.0.1:PORT\" line:"
    sed 's/^/  /' "$tmp/out" "$tmp/err"
    kill $pid 2>/dev/null
    await_exit $pid
    wait $pid
    return 1
}

# finish WHAT [CUTS]: SIGTERM (unless the broker already ended), at most 60 s
# to end, then exit status 0 and stderr exactly the one line (with CUTS cut
# if given) are checked.
finish() {
    kill -TERM $pid 2>/dev/null
    await_exit $pid
    wait $pid
    st=$?
    [ $st -eq 0 ] || fail "$1: the broker exited with status $st"
    if [ "$(wc -l <"$tmp/err")" -ne 1 ] ||
        ! grep -Eq '^pubsub: [0-9]+ published, [0-9]+ delivered, [0-9]+ cut$' "$tmp/err"; then
        fail "$1: the broker's stderr is not the one line \"pubsub: P published, D delivered, C cut\":"
        sed 's/^/  /' "$tmp/err"
    elif [ -n "${2:-}" ] && ! grep -q " $2 cut\$" "$tmp/err"; then
        fail "$1: the broker should have cut $2: $(cat "$tmp/err")"
    fi
}

# run WHAT CLIENT-ARGS...: the client against the running broker.
run() {
    what=$1
    shift
    if $client --port "$port" "$@" >"$tmp/client" 2>&1; then
        echo "  $what: pass"
    else
        fail "$what (exit $?): pubsub_client --port $port $*"
    fi
    sed 's/^/    /' "$tmp/client"
}

# ($load is a list of options: split on purpose)
# shellcheck disable=SC2086
for b in $brokers; do
    echo "$b:"
    case $b in /*) path=$b ;; *) path=./$b ;; esac
    "$path" --help >"$tmp/help" 2>&1 || fail "$b --help: exit $?"
    grep -q -- --max-output "$tmp/help" || fail "$b --help: no usage"
    "$path" --no-such-option >/dev/null 2>&1
    st=$?
    [ $st -eq 2 ] || fail "$b --no-such-option: exit $st, want 2"

    if start "$b" --max-output 65536 --idle-ms 0; then
        run "protocol" --check-protocol
        run "slow subscriber" --check-slow --max-output 65536
        run "load, 1 thread" $load --msgs 2000 --threads 1 --server-pid $pid
        run "load, 2 threads" $load --msgs 2000 --threads 2
        finish "$b (protocol, slow, load)" 1
    fi
    if start "$b" --idle-ms 300; then
        run "idle" --check-idle 300
        finish "$b (idle)"
    fi
    if start "$b" --max-output 67108864; then
        run "drain" --subs 3 --rooms 2 --rooms-per-sub 2 --pubs 5 --window 1024 --payload 1000 \
            --msgs 3072 --check-drain --server-pid $pid --server-log "$tmp/err"
        finish "$b (drain)"
    fi
done
[ $failed -eq 0 ] && echo "pubsub-self-test: pass ($brokers)"
exit $failed
