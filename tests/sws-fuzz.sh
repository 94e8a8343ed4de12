#!/bin/sh
# sws-fuzz.sh: `make check` runs SWS's request-parser fuzzer for a few seconds
# (apps/sws/fuzz/run.sh; SWS_FUZZ_SECONDS, default 5). Skipped (exit 77) when
# clang cannot build a libFuzzer target here.
secs=${SWS_FUZZ_SECONDS:-5}
fuzzdir="${srcdir:-.}/apps/sws/fuzz"
command -v clang >/dev/null 2>&1 || { echo "clang not found: skipped"; exit 77; }
probe=$(mktemp -d "${TMPDIR:-/tmp}/sws-fuzz-probe.XXXXXX")
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
    >"$probe/p.c"
if ! clang -fsanitize=fuzzer,address -o "$probe/p" "$probe/p.c" >/dev/null 2>&1; then
    rm -rf "$probe"
    echo "clang cannot build a libFuzzer target: skipped"
    exit 77
fi
rm -rf "$probe"
exec "$fuzzdir/run.sh" "$secs"
