#!/bin/sh
# check-move.sh: model-checks the move protocol (tests/model/move.pml) with
# SPIN: the protocol must show no error in an exhaustive search, and each of
# its two broken variants (-DSKIP_B, -DSHORT_C) must be caught, so that the
# model is known to be able to fail. Needs spin and a C compiler (Debian
# package: spin); fails loudly without them. Prints the states explored.
set -eu

model=$(cd "$(dirname "$0")" && pwd)/move.pml
command -v spin >/dev/null 2>&1 || { echo "check-move.sh: spin not found (apt-get install spin)" >&2; exit 1; }
cc=${CC:-cc}
command -v "$cc" >/dev/null 2>&1 || { echo "check-move.sh: no C compiler ($cc)" >&2; exit 1; }

dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"

# run VARIANT: prints pan's summary; its exit status is 0 if pan found no
# error, 1 if it did, 2 if the model did not build.
run() {
    rm -f pan pan.* ./*.trail
    # shellcheck disable=SC2086
    spin $1 -a "$model" >spin.out 2>&1 || { cat spin.out; return 2; }
    # -w: pan's generated code has warnings of its own; -DSAFETY: no cycles.
    "$cc" -O2 -w -DSAFETY -o pan pan.c || return 2
    ./pan -m100000 >pan.out 2>&1 || true
    grep -E '^pan:|errors:|states, stored|search depth too small' pan.out | sed 's/^/    /'
    if grep -q 'search depth too small' pan.out; then
        return 2
    fi
    if grep -q 'errors: 0' pan.out; then
        return 0
    fi
    return 1
}

status=0
echo "move protocol (steps a-d as in mely/deliver.c):"
if run ""; then
    echo "  ok: no error in the exhaustive search"
else
    echo "  FAIL: the protocol model has an error (or did not build)"
    status=1
fi
for v in -DSKIP_B -DSHORT_C; do
    echo "broken variant $v (must fail):"
    set +e
    run "$v"
    rc=$?
    set -e
    if [ "$rc" -eq 1 ]; then
        echo "  ok: SPIN found the violation"
    else
        echo "  FAIL: SPIN did not find the violation (exit $rc): the model is vacuous"
        status=1
    fi
done
exit "$status"
