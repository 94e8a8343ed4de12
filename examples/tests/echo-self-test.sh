#!/bin/sh
# SPDX-License-Identifier: MIT
# examples/echo under examples/tests/echoclient: 50 clients' messages checked byte by
# byte, a 4 MB stream, then SIGTERM with the clients connected: each is
# closed and the server exits 0 (examples/tests/serve-lib.sh; SERVER_RUNNER runs the
# server under a tool, as CI's valgrind step does).
. "${srcdir:-.}/examples/tests/serve-lib.sh"
# A bad argument gets the usage and status 2, and serves nothing.
for arg in --help abc 65536 -1 7007x; do
    timeout 5 ./examples/echo "$arg" >/dev/null 2>echo-usage.err
    st=$? # 124: it served until the timeout
    [ "$st" = 2 ] && grep -q '^usage: echo' echo-usage.err ||
        { echo "FAIL: examples/echo $arg: status $st, stderr: $(cat echo-usage.err)"; exit 1; }
done
rm -f echo-usage.err
serve_and_check examples/echo examples/tests/echoclient
