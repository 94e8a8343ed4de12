#!/bin/sh
# SPDX-License-Identifier: MIT
# run.sh: builds SWS's request-parser fuzzer with clang (libFuzzer, ASan, UBSan)
# outside the normal build and runs it for a bounded time on the seed corpus.
#   apps/sws/fuzz/run.sh [SECONDS]     (default 30)
# The build goes to $TMPDIR (or /tmp); new interesting inputs go to a copy of the
# corpus there, so the checked-in seeds stay as they are. Exits non-zero when
# the fuzzer finds a crash (the input is left in the work directory).
set -eu
secs=${1:-30}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/sws-fuzz.XXXXXX")
CC=${CC:-clang}
"$CC" -g -O1 -std=gnu11 -D_GNU_SOURCE -I"$top/include" -I"$top" -fsanitize=fuzzer,address,undefined \
    -fno-sanitize-recover=undefined -o "$work/fuzz_http" "$here/fuzz_http.c" "$top/apps/sws/http.c"
mkdir -p "$work/corpus"
cp "$here"/corpus/* "$work/corpus/"
cd "$work"
echo "fuzzing the request parser for ${secs}s in $work"
set +e
./fuzz_http -max_total_time="$secs" -rss_limit_mb=1024 -max_len=16384 -dict="$here/http.dict" -print_final_stats=1 corpus \
    >fuzz.log 2>&1
status=$?
set -e
tail -n 20 fuzz.log
[ $status -eq 0 ] && rm -rf "$work"
exit $status
