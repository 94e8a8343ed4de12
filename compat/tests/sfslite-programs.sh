#!/bin/sh
# SPDX-License-Identifier: MIT
# sfslite-programs.sh: builds sfslite's standalone libasync programs unchanged,
# once against sfslite's own libasync and once against compat, runs both and
# compares exit status, stdout and stderr. Run by hand (not by make check):
# sfslite is GPL and not in this tree. See doc/porting.md, "Checking
# sfslite's programs".
#
#   SFSLITE=/path/to/sfslite (configured; `make -C async` done)
#   MELY_BUILD=a mely build directory (default: the current one)
#
# The programs: tests/test_{rxx,itree,rctree,passfd,backoff,timecb,bbuddy,
# bitvec,vec,aiod}.C, tutorial/sfs-hashes.C, async/aiod.C (the aiod helper:
# sfslite's test_aiod runs against it, built on compat) and async/mmcd.c (a C
# program: it runs, is stopped by SIGTERM, and must leave the same output).
# Each is copied alone into a temporary directory first, so that it sees no
# header of sfslite's tree but what the build line gives.
#
# Where sfslite's own build needs what its libasync lacks, the reference side
# gets it (never the compat side): sfscrypt's arc4.C for test_bitvec and
# test_bbuddy (sfslite's crypto library does not build with today's
# compilers), and a two-line crypt.h giving `rnd` for test_timecb.
set -u
: "${SFSLITE:?set SFSLITE to a configured sfslite tree whose async/ is built}"
build=${MELY_BUILD:-$PWD}
R=$SFSLITE
[ -f "$R/async/.libs/libasync.so" ] || { echo "no $R/async/.libs/libasync.so: build sfslite's async/ first" >&2; exit 2; }
[ -f "$build/compat/mely-compat-uninstalled.pc" ] || { echo "$build is not a mely build directory" >&2; exit 2; }
MELY_BUILD=$build
. "$(dirname "$0")/sfslite-compat-flags.sh"
COMPAT="$CFLAGS_COMPAT $LIBS_COMPAT"
REF="-std=gnu++11 -I$R/async -I$R -L$R/async/.libs -lasync -ltirpc -lpcre -Wl,-rpath,$R/async/.libs"

t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/ref/tests" "$t/ref/async" "$t/ref/shim" "$t/mely/tests" "$t/mely/async"
printf '#include "async.h"\nstruct rnd_t { u_int32_t getword () { return random (); } };\nstatic rnd_t rnd;\n' > "$t/ref/shim/crypt.h"

status=0
built=0 same=0
fail() { echo "FAIL: $*"; status=1; }
mask() { sed -E 's/0x[0-9a-f]{8,}/0xADDR/g; s/pid=[0-9]+/pid=PID/g' "$1" >"$1.m" && mv "$1.m" "$1"; }

# build NAME SRC [extra reference sources...]
build() {
    name=$1 src=$2
    shift 2
    cp "$R/$src" "$t/ref/tests/" && cp "$R/$src" "$t/mely/tests/"
    file=$(basename "$src")
    if ! (cd "$t/ref/tests" && g++ -w -I"$t/ref/shim" "$file" "$@" $REF -o "$name") >"$t/$name.ref.err" 2>&1; then
        fail "$name: the reference build failed"; sed -n 1,5p "$t/$name.ref.err"; return 1
    fi
    if ! (cd "$t/mely/tests" && g++ -Wall -Wextra -Wno-unused-parameter "$file" $COMPAT -o "$name") >"$t/$name.mely.err" 2>&1; then
        fail "$name: the compat build failed"; sed -n 1,10p "$t/$name.mely.err"; return 1
    fi
    [ -s "$t/$name.mely.err" ] && { echo "warnings building $name on compat:"; cat "$t/$name.mely.err"; }
    built=$((built + 1))
}

# run NAME [args...]: both builds, the same directory layout, compared.
run() {
    name=$1
    shift
    for side in ref mely; do
        (cd "$t/$side/tests" && timeout 120 "./$name" "$@" >"$t/$name.$side.out" 2>"$t/$name.$side.errout")
        echo $? >"$t/$name.$side.rc"
    done
    for k in rc out errout; do
        for side in ref mely; do mask "$t/$name.$side.$k"; done
        if ! cmp -s "$t/$name.ref.$k" "$t/$name.mely.$k"; then
            fail "$name: $k differs (sfslite, then compat)"; head -c 600 "$t/$name.ref.$k"; echo ---; head -c 600 "$t/$name.mely.$k"
            return 1
        fi
    done
    echo "ok: $name (exit $(cat "$t/$name.ref.rc"), $(wc -c <"$t/$name.ref.out") bytes out, $(wc -c <"$t/$name.ref.errout") bytes err: the same)"
    same=$((same + 1))
}

for p in rxx itree rctree passfd backoff timecb vec; do
    build test_$p tests/test_$p.C && run test_$p
done
for p in bitvec bbuddy; do
    build test_$p tests/test_$p.C "$R/crypt/arc4.C" -I"$R/crypt" && run test_$p
done
build sfs-hashes tutorial/sfs-hashes.C && run sfs-hashes

# test_aiod finds its helper at ../async/aiod: the reference test runs against
# sfslite's helper, and against the helper built on compat; compat's own
# test_aiod needs none (compat's aiod runs on threads).
ln -s "$R/async/aiod" "$t/ref/async/aiod"
if build test_aiod tests/test_aiod.C && run test_aiod; then
    cp "$R/async/aiod.C" "$t/mely/async/"
    if (cd "$t/mely/async" && g++ -Wall -Wextra -Wno-unused-parameter aiod.C $COMPAT -o aiod) >"$t/aiod.err" 2>&1; then
        built=$((built + 1))
        rm "$t/ref/async/aiod" && ln -s "$t/mely/async/aiod" "$t/ref/async/aiod"
        (cd "$t/ref/tests" && timeout 120 ./test_aiod >"$t/aiodh.out" 2>&1)
        rc=$?
        if [ $rc -eq "$(cat "$t/test_aiod.ref.rc")" ] && cmp -s "$t/aiodh.out" "$t/test_aiod.ref.out"; then
            echo "ok: aiod (sfslite's test_aiod against the helper built on compat: exit $rc, the same output)"
            same=$((same + 1))
        else
            fail "aiod: sfslite's test_aiod against the helper built on compat: exit $rc"; cat "$t/aiodh.out"
        fi
    else
        fail "aiod: the compat build of async/aiod.C failed"; sed -n 1,10p "$t/aiod.err"
    fi
fi

# mmcd: a C program over sysconf.h; it keeps a clock file fresh until SIGTERM.
cp "$R/async/mmcd.c" "$t/mely/async/" && cp "$R/async/mmcd.c" "$t/ref/async/"
if (cd "$t/ref/async" && gcc -w -I"$R/async" -I"$R" mmcd.c -o mmcd) >"$t/mmcd.ref.err" 2>&1 &&
   (cd "$t/mely/async" && gcc -I"$build/../compat/include" -I"$(dirname "$0")/../include" mmcd.c -o mmcd) >"$t/mmcd.mely.err" 2>&1; then
    built=$((built + 1))
    for side in ref mely; do
        (cd "$t/$side/async" && { ./mmcd clock >out 2>err & pid=$!; sleep 1; cp clock clock.seen 2>/dev/null; kill -TERM $pid; wait $pid; echo $? >rc; })
    done
    for side in ref mely; do mask "$t/$side/async/out"; mask "$t/$side/async/err"; done
    if cmp -s "$t/ref/async/rc" "$t/mely/async/rc" && cmp -s "$t/ref/async/out" "$t/mely/async/out" &&
       cmp -s "$t/ref/async/err" "$t/mely/async/err" && [ -s "$t/mely/async/clock.seen" ] &&
       [ ! -e "$t/mely/async/clock" ] && [ ! -e "$t/ref/async/clock" ]; then
        echo "ok: mmcd (exit $(cat "$t/ref/async/rc") on SIGTERM, the same output, the clock file written then removed)"
        same=$((same + 1))
    else
        fail "mmcd differs"; cat "$t/ref/async/err" "$t/mely/async/err"
    fi
else
    fail "mmcd: a build failed"; cat "$t/mmcd.ref.err" "$t/mmcd.mely.err"
fi

echo "sfslite programs: $built of 13 built unchanged on compat, $same of 13 behave as on sfslite's libasync"
exit $status
