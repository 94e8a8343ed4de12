#!/bin/sh
# SPDX-License-Identifier: MIT
# run.sh: builds compat's arpc fuzzers with clang++ (libFuzzer, ASan, UBSan)
# outside the normal build and runs each for a bounded time on its seed
# corpus, as apps/sws/fuzz/run.sh does for SWS's parser:
#   fuzz_recmark   RFC 5531 record marking, the receiving side (recmark.h,
#                  what axprt_pipe runs on its input), against a model
#   fuzz_xdr       the XDR decoders (xdr.cpp, rpctypes.h) through
#                  mely-rpcc's output for compat/tests/rpc_test_prot.x
#   compat/fuzz/run.sh [SECONDS [TARGET...]]   (default 30, both targets)
# The build goes to $TMPDIR (or /tmp); new interesting inputs go to a copy of
# each corpus there, so the checked-in seeds stay as they are. Exits non-zero
# when a fuzzer finds a crash (the input is left in the work directory).
# CXX: the C++ compiler (default clang++; it must support -fsanitize=fuzzer).
set -eu
secs=${1:-30}
[ $# -gt 0 ] && shift
targets=${*:-recmark xdr}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/arpc-fuzz.XXXXXX")
CXX_FUZZ=${CXX_FUZZ:-clang++}
flags="-g -O1 -std=gnu++17 -D_GNU_SOURCE -I$top/compat/include -I$top/compat/lib -I$work
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
status=0
for t in $targets; do
    case $t in
    recmark)
        # shellcheck disable=SC2086
        "$CXX_FUZZ" $flags -o "$work/fuzz_recmark" "$here/fuzz_recmark.cpp"
        ;;
    xdr)
        python3 "$top/tools/mely-rpcc" -h "$top/compat/tests/rpc_test_prot.x" -o "$work/rpc_test_prot.h"
        python3 "$top/tools/mely-rpcc" -c "$top/compat/tests/rpc_test_prot.x" -o "$work/rpc_test_prot.C"
        # shellcheck disable=SC2086
        "$CXX_FUZZ" $flags -o "$work/fuzz_xdr" "$here/fuzz_xdr.cpp" "$work/rpc_test_prot.C" \
            "$top/compat/lib/xdr.cpp" "$top/compat/lib/str.cpp" "$top/compat/lib/uprintf.cpp" \
            "$top/compat/lib/err.cpp"
        ;;
    *)
        echo "run.sh: no target $t (recmark, xdr)" >&2
        exit 2
        ;;
    esac
    mkdir -p "$work/corpus-$t"
    cp "$here/corpus-$t"/* "$work/corpus-$t/"
    echo "fuzzing $t for ${secs}s in $work"
    set +e
    (cd "$work" && "./fuzz_$t" -max_total_time="$secs" -rss_limit_mb=1024 -max_len=4096 \
        -print_final_stats=1 "corpus-$t" >"fuzz-$t.log" 2>&1)
    s=$?
    set -e
    grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)|ERROR|runtime error' \
        "$work/fuzz-$t.log" | head -n 10
    [ $s -eq 0 ] || { status=$s; tail -n 30 "$work/fuzz-$t.log"; }
done
[ $status -eq 0 ] && rm -rf "$work"
exit $status
