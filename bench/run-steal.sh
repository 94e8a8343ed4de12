#!/bin/sh
# SPDX-License-Identifier: MIT
# run-steal.sh: runs bench/steal's four workloads and draws their plots, in one
# command. Builds nothing: run `make bench` first.
#
#   bench/run-steal.sh [--quick] [other bench/steal options]
#
# Run from the top of the source tree. The program is looked for in
# $STEAL_BIN, then build/bench/steal, then bench/steal (an in-tree build).
# CSV files and PNG plots go to bench/results/. Exit status: bench/steal's (1
# if a row has no figures), or the plot script's if that fails.
set -u
bin=${STEAL_BIN:-}
for b in build/bench/steal bench/steal; do
    [ -z "$bin" ] && [ -x "$b" ] && bin=$b
done
if [ ! -x "${bin:-/}" ]; then
    echo "run-steal.sh: bench/steal not built: run 'make bench' (in build/ or the source" \
        "tree), or set STEAL_BIN" >&2
    exit 1
fi
"$bin" all --csv-dir bench/results "$@"
status=$?
sh "$(dirname "$0")/plot-steal.sh" bench/results || status=$?
exit "$status"
