#!/bin/sh
# SPDX-License-Identifier: MIT
# examples/tests/kvclient against examples/kv (streams, a color per key) and against
# bench/e2e/kv_bufferevent (the same server on libevent bufferevents): the
# same protocol, so the same checks (examples/tests/kvclient.c lists them).
. "${srcdir:-.}/examples/tests/serve-lib.sh"
serve_and_check examples/kv examples/tests/kvclient &&
    serve_and_check bench/e2e/kv_bufferevent examples/tests/kvclient
