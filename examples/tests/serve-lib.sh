# SPDX-License-Identifier: MIT
# serve-lib.sh: sourced by the example servers' tests (echo-self-test.sh,
# kv-self-test.sh), from the build directory.
#
# serve_and_check SERVER CLIENT: starts ./SERVER (or SERVER, an absolute path) on a free port (port 0; the
# server prints "... serving 127.0.0.1:PORT"), with $SERVER_RUNNER before it
# if set (CI's valgrind: "./libtool --mode=execute valgrind ..."), runs
# ./CLIENT PORT PID, which ends the server with SIGTERM, and checks that both
# exit 0. Bounded: 60 s for the port, 60 s for the server to end after the
# client (then SIGKILL).

# Waits up to 60 s for process $1 to end; kills it after that.
await_end() {
    n=0
    while kill -0 "$1" 2>/dev/null && [ $n -lt 600 ]; do
        sleep 0.1
        n=$((n + 1))
    done
    kill -9 "$1" 2>/dev/null && echo "serve-lib: process $1 did not end: killed"
}

serve_and_check() {
    out=$(mktemp) || return 1
    case $1 in /*) server=$1 ;; *) server=./$1 ;; esac
    ${SERVER_RUNNER:-} "$server" 0 >"$out" &
    pid=$!
    port=
    n=0
    while [ -z "$port" ] && [ $n -lt 600 ] && kill -0 $pid 2>/dev/null; do
        sleep 0.1
        n=$((n + 1))
        port=$(sed -n 's/.*serving 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$out")
    done
    if [ -z "$port" ]; then
        echo "FAIL: $1 did not say its port"
        kill $pid 2>/dev/null
        await_end $pid
        rm -f "$out"
        return 1
    fi
    ./"$2" "$port" $pid
    client=$?
    [ $client -eq 0 ] || kill $pid 2>/dev/null # a client that failed early may not have
    await_end $pid
    wait $pid
    server=$?
    rm -f "$out"
    if [ $client -ne 0 ] || [ $server -ne 0 ]; then
        echo "FAIL: $1 under $2: client exit $client, server exit $server"
        return 1
    fi
    echo "$1 under $2: pass"
}
