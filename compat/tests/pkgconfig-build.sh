#!/bin/sh
# SPDX-License-Identifier: MIT
# pkgconfig-build.sh: builds an original-Mely-style program the way a user
# would, with nothing but `$CXX prog.C $(pkg-config --cflags --libs mely-compat)`
# (the build tree's mely-compat-uninstalled.pc), runs it and checks its output.
# $CXX and $SAN_FLAGS come from the Makefile (sanitizer builds must link the
# sanitizer runtime too).
set -u
srcdir=${srcdir:-.}
CXX=${CXX:-g++}
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
if ! command -v "$PKG_CONFIG" >/dev/null 2>&1; then
    echo "pkg-config not found: skipped"
    exit 77
fi
PKG_CONFIG_PATH=$(pwd)/compat
export PKG_CONFIG_PATH
flags=$($PKG_CONFIG --cflags --libs mely-compat) || exit 1
echo "flags: $flags"
out=compat/tests/pkgconfig-prog
# shellcheck disable=SC2086
$CXX ${SAN_FLAGS:-} "$srcdir/compat/tests/legacy_mely.C" -o "$out" $flags || exit 1
result=$(timeout 120 "./$out" 2>/dev/null | sort)
want='mely style: ok
reader: 5 messages, watch finished
reused callback ran 3 times'
if [ "$result" != "$want" ]; then
    echo "FAIL: unexpected output:"
    echo "$result"
    exit 1
fi
echo "ok: built with pkg-config and ran"
rm -f "$out"
