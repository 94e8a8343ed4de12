#!/bin/sh
# SPDX-License-Identifier: MIT
# sws-fuzz.sh: `make check` runs SWS's request-parser fuzzer for a few seconds
# (apps/sws/fuzz/run.sh; SWS_FUZZ_SECONDS, default 5). Without clang and its
# libFuzzer runtime it fails (exit 99, a hard error) and names the Debian
# packages: scripts/quickstart.sh installs them.
secs=${SWS_FUZZ_SECONDS:-5}
fuzzdir="${srcdir:-.}/apps/sws/fuzz"
missing="install the Debian packages clang and libclang-rt-14-dev (scripts/quickstart.sh does)"
command -v clang >/dev/null 2>&1 || { echo "clang not found: $missing"; exit 99; }
probe=$(mktemp -d "${TMPDIR:-/tmp}/sws-fuzz-probe.XXXXXX")
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
    >"$probe/p.c"
if ! clang -fsanitize=fuzzer,address -o "$probe/p" "$probe/p.c" >/dev/null 2>&1; then
    rm -rf "$probe"
    echo "clang cannot build a libFuzzer target: $missing"
    exit 99
fi
rm -rf "$probe"
exec "$fuzzdir/run.sh" "$secs"
