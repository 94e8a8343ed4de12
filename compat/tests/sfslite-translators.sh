#!/bin/sh
# SPDX-License-Identifier: MIT
# sfslite-translators.sh: builds sfslite's two source translators, rpcc (XDR
# protocol files, .x, to C++) and tame (.T to C++), from sfslite's sources
# UNCHANGED against mely-compat, and checks that they write byte-identical
# output to sfslite's own builds for every .x file (rpcc -h and rpcc -c) and
# every .T file (tame, and tame -n) in sfslite's tree.
#
# Not run by `make check`: it needs an sfslite tree, configured and built
# (its rpcc/rpcc and tame/tame are the reference; it is GPL and not part of
# mely). Nothing in that tree is modified: the sources are copied to a
# temporary directory, and the parsers generated there with bison and flex
# as sfslite's Makefiles do.
#
#   SFSLITE=/path/to/sfslite compat/tests/sfslite-translators.sh
#
# Environment:
#   SFSLITE     the sfslite tree (required)
#   MELY_BUILD  a mely build directory (holding compat/mely-compat-uninstalled.pc);
#               default: the current directory if it is one, else the
#               installed mely-compat (pkg-config)
#   CXX         the C++ compiler (default g++); YACC (default "bison -y"),
#               LEX (default flex)
#   KEEP=1      keep the temporary directory (its path is printed)
#   VERBOSE=1   name the runs that differ only in hash_string values
#   SFSLITE_PRELUDE=1
#               a stopgap, until compat's amisc.h and err.h give what
#               libasync's did transitively (async.h's names, progname):
#               compiles every source with -include async.h (and declares
#               progname, defined empty, if compat has none). Off by default:
#               the sources are then compiled exactly as they are.
#
# tame names its closures after a hash of the function's name and file
# (hash_string): where compat's hash_string is not libasync's, those names
# differ. Such files are counted apart ("differ only in hash_string values",
# every 8-hex-digit name part masked); they do not fail the run. Anything
# else that differs fails it (exit status 1), as does a build failure.
set -u

: "${SFSLITE:?set SFSLITE to an sfslite tree (configured and built)}"
CXX=${CXX:-g++}
YACC=${YACC:-bison -y}
LEX=${LEX:-flex}

for t in rpcc/rpcc tame/tame; do
    if [ ! -x "$SFSLITE/$t" ]; then
        echo "sfslite-translators: $SFSLITE/$t is missing: build sfslite first" >&2
        exit 2
    fi
done

. "$(dirname "$0")/sfslite-compat-flags.sh"

# What sfslite's config.h gives these two programs.
cfg() {
    sed -n "s/^#define $1 //p" "$SFSLITE/config.h" | head -n 1
}
VERSION_DEF=$(cfg VERSION)
PATH_CPP_DEF=$(cfg PATH_CPP)
[ -n "$PATH_CPP_DEF" ] || PATH_CPP_DEF='"/usr/bin/cpp"'

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sfslite-translators.XXXXXX") || exit 2
if [ "${KEEP:-0}" = 1 ]; then
    echo "sfslite-translators: working in $WORK"
else
    trap 'rm -rf "$WORK"' EXIT
fi

# build NAME EXTRA-CPPFLAGS...: copies SFSLITE/NAME, generates its parser
# and scanner, compiles and links $WORK/NAME/NAME against compat.
build() {
    name=$1
    shift
    d="$WORK/$name"
    mkdir -p "$d"
    cp "$SFSLITE/$name"/*.C "$SFSLITE/$name"/*.h "$SFSLITE/$name"/parse.yy \
        "$SFSLITE/$name"/scan.ll "$d"/ || return 1
    rm -f "$d/parse.h" # generated below, as sfslite's Makefile does
    (
        cd "$d" || exit 1
        $YACC -d parse.yy || exit 1
        sed -e 's/union yyalloc/struct yyalloc/g' < y.tab.c > parse.cc && rm -f y.tab.c
        mv y.tab.h parse.h
        $LEX scan.ll && mv lex.yy.c scan.cc || exit 1
        objs=
        ok=1
        for src in *.C parse.cc scan.cc; do
            obj=${src%.*}.o
            # shellcheck disable=SC2086
            $CXX -O2 -c $CFLAGS_COMPAT $PRELUDE -I. "$@" "$src" -o "$obj" || ok=0
            objs="$objs $obj"
        done
        [ $ok = 1 ] || exit 1
        # shellcheck disable=SC2086
        $CXX $objs $EXTRA_OBJ -o "$name" $LIBS_COMPAT
    ) > "$WORK/$name.build.log" 2>&1
}

EXTRA_OBJ=
PRELUDE=
if [ "${SFSLITE_PRELUDE:-0}" = 1 ]; then
    printf '#include "async.h"\n' > "$WORK/prelude.h"
    # shellcheck disable=SC2086
    if ! printf '#include "async.h"\nint main() { return progname ? 0 : 1; }\n' |
        $CXX -x c++ -fsyntax-only $CFLAGS_COMPAT - > /dev/null 2>&1; then
        printf 'extern str progname;\n' >> "$WORK/prelude.h"
        printf '#include "async.h"\nstr progname;\n' > "$WORK/progname.cc"
        # shellcheck disable=SC2086
        $CXX -c $CFLAGS_COMPAT "$WORK/progname.cc" -o "$WORK/progname.o" || exit 2
        EXTRA_OBJ="$WORK/progname.o"
    fi
    PRELUDE="-include $WORK/prelude.h"
fi

fail=0
if ! build rpcc "-DPATH_CPP=$PATH_CPP_DEF"; then
    echo "sfslite-translators: rpcc does not build against compat:" >&2
    grep -E 'error|undefined' "$WORK/rpcc.build.log" | head -n 40 >&2
    exit 1
fi
if ! build tame ${VERSION_DEF:+"-DVERSION=$VERSION_DEF"}; then
    echo "sfslite-translators: tame does not build against compat:" >&2
    grep -E 'error|undefined' "$WORK/tame.build.log" | head -n 40 >&2
    exit 1
fi

# run REF-OR-NEW DIR PROG ARGS...: PROG's output file, stdout, stderr and exit
# status in DIR.
run() {
    dir=$1
    prog=$2
    shift 2
    rm -rf "$dir"
    mkdir -p "$dir"
    (cd "$dir" && "$prog" "$@" > stdout 2> stderr; echo $? > status)
}

mask() {
    sed -E 's/_[0-9a-f]{8}__/_HASH__/g' "$1"
}

# compare WHAT: compares the runs in $WORK/r and $WORK/n; counts into
# same, hash or other.
compare() {
    if diff -r "$WORK/r" "$WORK/n" > /dev/null; then
        same=$((same + 1))
        return
    fi
    for f in "$WORK"/r/* "$WORK"/n/*; do
        b=$(basename "$f")
        if [ ! -f "$WORK/r/$b" ] || [ ! -f "$WORK/n/$b" ]; then
            other=$((other + 1))
            echo "DIFFERS: $1 ($b is missing on one side)"
            return
        fi
        cmp -s "$WORK/r/$b" "$WORK/n/$b" && continue
        mask "$WORK/r/$b" > "$WORK/r.masked"
        mask "$WORK/n/$b" > "$WORK/n.masked"
        if ! cmp -s "$WORK/r.masked" "$WORK/n.masked"; then
            other=$((other + 1))
            echo "DIFFERS: $1 ($b)"
            diff "$WORK/r/$b" "$WORK/n/$b" | head -n 6
            return
        fi
    done
    hash=$((hash + 1))
    if [ "${VERBOSE:-0}" = 1 ]; then
        echo "hash_string only: $1"
    fi
}

same=0 hash=0 other=0
xfiles=$(find "$SFSLITE" -name '*.x' -type f | sort)
for x in $xfiles; do
    base=$(basename "$x" .x)
    for mode in h c; do
        out=$base.$mode
        [ $mode = c ] && out=$base.C
        run "$WORK/r" "$SFSLITE/rpcc/rpcc" -$mode -o "$out" "$x"
        run "$WORK/n" "$WORK/rpcc/rpcc" -$mode -o "$out" "$x"
        compare "rpcc -$mode $x"
    done
done
echo "rpcc: $((same + hash + other)) runs over $(echo "$xfiles" | grep -c .) .x files:" \
    "$same identical, $hash differ only in hash_string values, $other differ otherwise"
[ $other = 0 ] || fail=1

same=0 hash=0 other=0
tfiles=$(find "$SFSLITE" -name '*.T' -type f | sort)
for t in $tfiles; do
    base=$(basename "$t" .T)
    for flags in "" "-n"; do
        # shellcheck disable=SC2086
        run "$WORK/r" "$SFSLITE/tame/tame" $flags -o "$base.C" "$t"
        # shellcheck disable=SC2086
        run "$WORK/n" "$WORK/tame/tame" $flags -o "$base.C" "$t"
        compare "tame $flags $t"
    done
done
echo "tame: $((same + hash + other)) runs over $(echo "$tfiles" | grep -c .) .T files:" \
    "$same identical, $hash differ only in hash_string values, $other differ otherwise"
[ $other = 0 ] || fail=1

exit $fail
