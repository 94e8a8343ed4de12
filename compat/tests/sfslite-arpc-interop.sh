#!/bin/sh
# SPDX-License-Identifier: MIT
# sfslite-arpc-interop.sh: wire interoperation of compat's arpc with sfslite's
# own libasync + arpc, both directions. The same two sources,
# compat/tests/interop/ex_server.C and ex_client.C (SFS style: asrv::alloc,
# svccb, aclnt::call with wrap), are built twice, once on sfslite's libasync
# and libarpc (types from sfslite's rpcc) and once on mely-compat (types from
# mely-rpcc), for sfslite's tutorial/ex_prot.x. The four pairs
#   sfslite client -> sfslite server   (the reference)
#   compat client  -> compat server
#   compat client  -> sfslite server
#   sfslite client -> compat server
# each run the client's calls (every procedure of EX_PROG 1, a 64 KB opaque,
# and the errors: PROC_UNAVAIL, PROG_MISMATCH, PROG_UNAVAIL, AUTH_TOOWEAK,
# SYSTEM_ERR, GARBAGE_ARGS, a result that does not decode), and the client's
# transcript (each call's clnt_stat and its result as XDR bytes) and the
# server's (each call's argument as XDR bytes) must be byte-identical to the
# reference's.
#
# Not run by `make check`: it needs sfslite (GPL, not part of mely), with
# async/ and arpc/ built (make -C $SFSLITE/arpc). Nothing there is modified.
#
#   SFSLITE=/path/to/sfslite compat/tests/sfslite-arpc-interop.sh
#
# Environment: SFSLITE (required); MELY_BUILD a mely build directory
# (default: the current directory if it is one); CXX (default g++); KEEP=1
# keeps the work directory; PORT (default 41313, and the next one).
#
# One known difference is reported and does not fail the run (see
# doc/porting.md): compat's encoders refuse a value over its type's bound
# (RPC_CANTENCODEARGS, 1), where libasync's send it and the server answers
# GARBAGE_ARGS (RPC_CANTDECODEARGS, 11): the line "EX_REVERSE 256".
set -u

: "${SFSLITE:?set SFSLITE to an sfslite tree (async/ and arpc/ built)}"
CXX=${CXX:-g++}
PORT=${PORT:-41313}
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
R=$SFSLITE

for f in rpcc/rpcc async/.libs/libasync.so arpc/.libs/libarpc.so tutorial/ex_prot.x; do
    if [ ! -e "$R/$f" ]; then
        echo "sfslite-arpc-interop: $R/$f is missing (build sfslite's async and arpc)" >&2
        exit 2
    fi
done
. "$(dirname "$0")/sfslite-compat-flags.sh"
RPCC_MELY=$top/tools/mely-rpcc

WORK=$(mktemp -d "${TMPDIR:-/tmp}/sfslite-arpc-interop.XXXXXX") || exit 2
if [ -n "${KEEP:-}" ]; then
    echo "work directory: $WORK"
else
    trap 'rm -rf "$WORK"' EXIT
fi

build() { # build DIR: the two programs in WORK/DIR
    d=$WORK/$1
    mkdir -p "$d"
    cp "$R/tutorial/ex_prot.x" "$d/"
    (
        cd "$d" || exit 1
        if [ "$1" = sfslite ]; then
            "$R/rpcc/rpcc" -h ex_prot.x && "$R/rpcc/rpcc" -c ex_prot.x || exit 1
            flags="-std=gnu++11 -DHAVE_CONFIG_H -I. -I$R/async -I$R/arpc -I$R/crypt -I/usr/include/tirpc -I$R"
            libs="-L$R/arpc/.libs -L$R/async/.libs -larpc -lasync -ltirpc -lpcre -Wl,-rpath,$R/async/.libs -Wl,-rpath,$R/arpc/.libs"
        else
            "$RPCC_MELY" -h ex_prot.x && "$RPCC_MELY" -c ex_prot.x || exit 1
            flags="-I. $CFLAGS_COMPAT"
            libs=$LIBS_COMPAT
        fi
        for p in ex_server ex_client; do
            # shellcheck disable=SC2086
            $CXX -O2 $flags -I"$here/interop" "$here/interop/$p.C" ex_prot.C -o $p $libs \
                >build-$p.log 2>&1 || { cat build-$p.log; exit 1; }
        done
    ) || { echo "sfslite-arpc-interop: building on $1 failed" >&2; exit 1; }
}
build sfslite || exit 1
build compat || exit 1

run() { # run CLIENT SERVER PORT NAME
    srv=$WORK/$2/ex_server
    cli=$WORK/$1/ex_client
    "$srv" "$3" >"$WORK/$4.srv" 2>"$WORK/$4.srv.err" &
    spid=$!
    i=0
    until grep -q listening "$WORK/$4.srv" 2>/dev/null; do
        i=$((i + 1))
        [ $i -gt 100 ] && { echo "$4: the server did not start" >&2; kill $spid; return 1; }
        sleep 0.05
    done
    timeout 30 "$cli" "$3" >"$WORK/$4.cli" 2>"$WORK/$4.cli.err"
    rc=$?
    wait $spid
    src=$?
    [ $rc -eq 0 ] && [ $src -eq 0 ] || { echo "$4: client exit $rc, server exit $src" >&2; return 1; }
}

fail=0
run sfslite sfslite "$PORT" ref || exit 1
n=$(wc -l <"$WORK/ref.cli")
echo "reference (sfslite client, sfslite server): $n client lines, $(wc -l <"$WORK/ref.srv") server lines"
p=$PORT
for pair in "compat compat" "compat sfslite" "sfslite compat"; do
    set -- $pair
    p=$((p + 1))
    name="$1-client_$2-server"
    run "$1" "$2" "$p" "$name" || { fail=1; continue; }
    if ! cmp -s "$WORK/$name.srv" "$WORK/ref.srv"; then
        echo "FAIL $name: the server's transcript differs:"
        diff "$WORK/ref.srv" "$WORK/$name.srv" | cut -c1-200
        fail=1
    fi
    if cmp -s "$WORK/$name.cli" "$WORK/ref.cli"; then
        echo "PASS $name: client and server transcripts byte-identical"
    else
        # The known difference (see above): only on the compat client.
        grep -v '^EX_REVERSE 256 ' "$WORK/$name.cli" >"$WORK/$name.cli.k"
        grep -v '^EX_REVERSE 256 ' "$WORK/ref.cli" >"$WORK/ref.cli.k"
        if [ "$1" = compat ] && cmp -s "$WORK/$name.cli.k" "$WORK/ref.cli.k" &&
            grep -q '^EX_REVERSE 256 stat=1$' "$WORK/$name.cli"; then
            echo "PASS $name: byte-identical but for the known line:" \
                "$(grep '^EX_REVERSE 256 ' "$WORK/$name.cli") (sfslite: $(grep '^EX_REVERSE 256 ' "$WORK/ref.cli"))"
        else
            echo "FAIL $name: the client's transcript differs:"
            diff "$WORK/ref.cli" "$WORK/$name.cli" | cut -c1-200
            fail=1
        fi
    fi
    for e in "$WORK/$name.srv.err" "$WORK/$name.cli.err"; do
        [ -s "$e" ] && { echo "$name: stderr:"; cat "$e"; }
    done
done
exit $fail
