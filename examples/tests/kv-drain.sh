#!/bin/sh
# SPDX-License-Identifier: MIT
# examples/tests/kv-drain.sh: 0 replies lost when a key-value server is SIGTERMed
# under load. examples/tests/kvdrain (examples/tests/kvdrain.c says how) runs rounds against
# examples/kv (streams, a color per key), then against
# bench/e2e/kv_bufferevent (the same server on libevent bufferevents): a
# fresh server on port 0 each round, 100 clients of pipelined SETs, SIGTERM
# after 50-300 ms of load; replies received must equal the server's "kv: N
# commands executed", and the server must exit 0 within 10 s.
#
# KV_DRAIN_ROUNDS: rounds per server (default 20, in sanitizer builds too:
# both servers' 20 rounds took 7.5 s in the plain build, 8 s under
# AddressSanitizer, 9.5 s under ThreadSanitizer on the 2-vCPU guest; fewer
# for a quick look, e.g. 3).
# KV_DRAIN_SERVERS: the servers (default: both above). KV_DRAIN_SEED: the
# seed of the load times (default: from the clock; each run prints it).
# $SERVER_RUNNER goes before the server, as in examples/tests/serve-lib.sh. Run from
# the build directory.
rounds=${KV_DRAIN_ROUNDS:-20}
seed=
[ -n "${KV_DRAIN_SEED:-}" ] && seed="--seed $KV_DRAIN_SEED"
status=0
for server in ${KV_DRAIN_SERVERS:-examples/kv bench/e2e/kv_bufferevent}; do
    case $server in /*) path=$server ;; *) path=./$server ;; esac
    # shellcheck disable=SC2086 # $seed and $SERVER_RUNNER are words on purpose
    ./examples/tests/kvdrain --rounds "$rounds" $seed -- ${SERVER_RUNNER:-} "$path" 0 || status=1
done
exit $status
