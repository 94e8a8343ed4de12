#!/bin/sh
# SPDX-License-Identifier: MIT
# examples/echo under examples/tests/echoclient: 50 clients' messages checked byte by
# byte, a 4 MB stream, then SIGTERM with the clients connected: each is
# closed and the server exits 0 (examples/tests/serve-lib.sh; SERVER_RUNNER runs the
# server under a tool, as CI's valgrind step does).
. "${srcdir:-.}/examples/tests/serve-lib.sh"
serve_and_check examples/echo examples/tests/echoclient
