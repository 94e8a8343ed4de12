#!/bin/sh
# SPDX-License-Identifier: MIT
# link-user.sh: programs built against the just-built library the way a user
# builds them, with the flags of the build tree's own mely.pc (pkg-config with
# libdir and includedir pointed at the build and source trees), then run:
#   1. shared: `cc hello.c $(pkg-config --cflags --libs mely)`; neither
#      libmely.so nor the program needs tcmalloc, libstdc++ or hwloc;
#   1b. a program that calls libevent's evbuffer functions itself (stream.h
#      hands out evbuffers) links with the same flags: mely.pc requires
#      libevent_core publicly (with it private, the link failed: "DSO missing
#      from command line");
#   2. static libmely, the rest as the system has it: `pkg-config --static`
#      flags with only libmely.a in libdir (what --disable-shared installs);
#   3. fully static: `cc -static ... $(pkg-config --static ...)`, run also
#      with MELY_TOPOLOGY=hwloc (hwloc is opened at run time, also from a
#      static program); not in sanitizer builds (no static sanitizer runtime);
#   4. a user's sanitizer build: examples/hello.c and examples/echo.c with
#      -fsanitize=address (the build's own $SAN_FLAGS in a sanitizer build,
#      whose library is instrumented), run with detect_leaks=1: any report,
#      or any other exit than 0, fails.
# Every step that cannot run fails the test, with the reason; none is skipped.
# Run by make check (from the top build directory), which sets USER_CC (the
# build's C compiler), SAN_FLAGS, PKG_CONFIG and srcdir.
set -u
srcdir=${srcdir:-.}
CC=${USER_CC:-cc}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
top_src=$(cd "$srcdir" && pwd)
top_build=$(pwd)
libs=$top_build/mely/.libs
status=0

fail() { echo "FAIL: $*"; status=1; }

for f in "$libs/libmely.so" "$libs/libmely.a" "$top_build/mely.pc"; do
    [ -f "$f" ] || { echo "FAIL: $f is missing (build the library first)"; exit 1; }
done
command -v "$PKG_CONFIG" >/dev/null 2>&1 || { echo "FAIL: pkg-config ($PKG_CONFIG) not found"; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/link-user.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/static-lib"
ln -s "$libs/libmely.a" "$tmp/static-lib/libmely.a"

# pkg-config FLAGS...: the build tree's mely.pc, its libdir $libdir and its
# includedir the source tree (a copy of it edited: pkg-config's
# --define-variable would move libevent's libdir too).
pc() {
    mkdir -p "$tmp/pc"
    sed -e "s|^libdir=.*|libdir=$libdir|" -e "s|^includedir=.*|includedir=$top_src/include|" \
        "$top_build/mely.pc" >"$tmp/pc/mely.pc"
    PKG_CONFIG_PATH=$tmp/pc $PKG_CONFIG "$@" mely
}

# check_hello OUTPUT-FILE WHAT: hello's 32 lines, each color's in order.
check_hello() {
    if ! awk '
        !/^(one|two|three|four) on worker [0-9]+, color [1-8]$/ { bad = 1 }
        { n++; c = $NF; k = seen[c]++
          if ($1 != (k == 0 ? "one" : k == 1 ? "two" : k == 2 ? "three" : "four")) bad = 1 }
        END { exit bad || n != 32 }' "$1"; then
        fail "$2: hello printed something else:"
        head -40 "$1"
        return 1
    fi
    echo "ok: $2: hello's 32 lines, in order per color"
}

# needs BINARY: the libraries it names (DT_NEEDED)
needs() { readelf -d "$1" | awk '/\(NEEDED\)/ { gsub(/[][]/, "", $NF); print $NF }'; }

# build WHAT OUT SOURCE FLAGS...: compiles and links, failing the step loudly.
build() {
    what=$1 out=$2 src=$3
    shift 3
    echo "$what: $CC $src $*"
    if ! "$CC" "$src" -o "$out" "$@" >"$out.log" 2>&1; then
        fail "$what: the build failed:"
        cat "$out.log"
        return 1
    fi
    # glibc's notes on getaddrinfo and dlopen in a static program are expected.
    grep -v "requires at runtime the shared libraries\|in function \`" "$out.log" | grep . &&
        echo "(the link's output, above)"
    return 0
}

# ---- 1. shared ------------------------------------------------------------------
libdir=$libs
for lib in "$libs/libmely.so"; do
    bad=$(needs "$lib" | grep -E 'tcmalloc|stdc\+\+|hwloc' || true)
    [ -z "$bad" ] || fail "libmely.so needs $bad"
done
flags=$(pc --cflags --libs) || fail "pkg-config --cflags --libs mely"
# shellcheck disable=SC2086
if build shared "$tmp/hello-shared" "$top_src/examples/hello.c" ${SAN_FLAGS:-} $flags \
    -Wl,-rpath,"$libs"; then
    bad=$(needs "$tmp/hello-shared" | grep -E 'tcmalloc|stdc\+\+|hwloc' || true)
    [ -z "$bad" ] || fail "a C program linked with mely needs $bad"
    timeout 60 "$tmp/hello-shared" >"$tmp/out" 2>"$tmp/err" || { fail "shared: hello failed"; cat "$tmp/err"; }
    check_hello "$tmp/out" shared
fi

# ---- 1b. a program of its own calling libevent ----------------------------------------
cat >"$tmp/evbuf.c" <<'EOF'
#include <event2/buffer.h>
#include <stdio.h>
#include <mely/stream.h>
int main(void)
{
    struct evbuffer *b = evbuffer_new();
    int ok = b && evbuffer_add(b, "x", 1) == 0 && evbuffer_get_length(b) == 1 &&
             mely_stream_output(NULL) == NULL;
    if (b)
        evbuffer_free(b);
    puts(ok ? "evbuffer ok" : "evbuffer wrong");
    return ok ? 0 : 1;
}
EOF
# shellcheck disable=SC2086
if build "shared, evbuffer calls" "$tmp/evbuf" "$tmp/evbuf.c" ${SAN_FLAGS:-} $flags \
    -Wl,-rpath,"$libs"; then
    timeout 60 "$tmp/evbuf" >"$tmp/out" 2>&1 || { fail "shared, evbuffer calls: the program failed"; cat "$tmp/out"; }
    grep -q "evbuffer ok" "$tmp/out" && echo "ok: a program calling evbuffer functions links with pkg-config --libs mely"
fi

# ---- 2. static libmely, --static flags ----------------------------------------------
libdir=$tmp/static-lib
flags=$(pc --static --cflags --libs) || fail "pkg-config --static --cflags --libs mely"
echo "pkg-config --static: $flags"
# shellcheck disable=SC2086
if build "static libmely" "$tmp/hello-alib" "$top_src/examples/hello.c" ${SAN_FLAGS:-} $flags; then
    needs "$tmp/hello-alib" | grep -q mely && fail "static libmely: the program still needs a shared libmely"
    timeout 60 "$tmp/hello-alib" >"$tmp/out" 2>"$tmp/err" || { fail "static libmely: hello failed"; cat "$tmp/err"; }
    check_hello "$tmp/out" "static libmely"
fi

# ---- 3. fully static ------------------------------------------------------------------
if [ -n "${SAN_FLAGS:-}" ]; then
    echo "note: no -static link in a sanitizer build ($SAN_FLAGS: the sanitizer runtimes are shared);" \
        "the plain build runs it"
else
    # shellcheck disable=SC2086
    if build "-static" "$tmp/hello-static" "$top_src/examples/hello.c" -static $flags; then
        if readelf -l "$tmp/hello-static" | grep -q INTERP || [ -n "$(needs "$tmp/hello-static")" ]; then
            fail "-static: the program is not static"
        fi
        timeout 60 "$tmp/hello-static" >"$tmp/out" 2>"$tmp/err" || { fail "-static: hello failed"; cat "$tmp/err"; }
        check_hello "$tmp/out" "-static"
        MELY_TOPOLOGY=hwloc timeout 60 "$tmp/hello-static" >"$tmp/out" 2>"$tmp/err" ||
            { fail "-static, MELY_TOPOLOGY=hwloc: hello failed"; cat "$tmp/err"; }
        if [ -s "$tmp/err" ]; then
            fail "-static, MELY_TOPOLOGY=hwloc: hello's stderr is not empty:"
            cat "$tmp/err"
        fi
        check_hello "$tmp/out" "-static, MELY_TOPOLOGY=hwloc"
    fi
fi

# ---- 4. a user's sanitizer build ---------------------------------------------------------
libdir=$libs
user_san=${SAN_FLAGS:--fsanitize=address -fno-omit-frame-pointer -g}
flags=$(pc --cflags --libs) || fail "pkg-config --cflags --libs mely"
ASAN_OPTIONS=detect_leaks=1:exitcode=23
TSAN_OPTIONS=halt_on_error=1:exitcode=23
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
export ASAN_OPTIONS TSAN_OPTIONS UBSAN_OPTIONS
. "$top_src/examples/tests/serve-lib.sh"
for prog in hello echo; do
    # shellcheck disable=SC2086
    build "$user_san" "$tmp/$prog-san" "$top_src/examples/$prog.c" $user_san $flags \
        -Wl,-rpath,"$libs" || continue
    if [ $prog = echo ]; then # served to examples/tests/echoclient, then SIGTERM: the drain
        if serve_and_check "$tmp/echo-san" examples/tests/echoclient >"$tmp/out" 2>"$tmp/err"; then
            echo "ok: $user_san: echo served examples/tests/echoclient clean"
        else
            fail "$user_san: echo under examples/tests/echoclient failed, or a sanitizer reported:"
            cat "$tmp/out" "$tmp/err"
        fi
        continue
    fi
    timeout 120 "$tmp/$prog-san" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc != 0 ] || grep -q 'Sanitizer\|runtime error' "$tmp/err"; then
        fail "$user_san: $prog exited $rc, or a sanitizer reported:"
        cat "$tmp/err"
    else
        echo "ok: $user_san: $prog ran clean"
    fi
    check_hello "$tmp/out" "$user_san"
done

[ $status = 0 ] && echo "link-user: all passed"
exit $status
