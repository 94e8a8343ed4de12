#!/bin/sh
# SPDX-License-Identifier: MIT
# check-move.sh: model-checks the move protocol of mely/remote/deliver.c with SPIN
# (tests/model/move.pml; its opening comment has the details).
#
# What is modeled: workers W0 and W1, each with a bounded MPSC inbox (2
# slots: a CAS on tail reserves, the writer marks a slot ready, the owner
# reads ready slots in order under its lock); color C, moved W0 -> W1 -> W0
# by a mover, and color D on W0; two posting worker threads (a chain of 3
# events to C whose handlers may move between the two threads, posted one or
# two per flush, and one event to D) and a thread that is not a worker (one
# event to C through the foreign lock); in a second search, W1's own thread
# posting a chain to C, each event staged or, when it reads W1 as C's owner,
# queued directly after a flush and a drain (the engine's post_now,
# postpath.h).
# Mapping to the protocol: a flush is steps 1 (seq odd), 2 (owner loads in
# post order, one CAS per run of events with one owner, each slot written
# and marked ready; a full inbox ends the flush) and 3 (seq even), then a
# retry and the locked fallback (lock the owner, re-check, drain its inbox
# whole, queue directly); a move is a (owner store), b (wait for each odd
# seq to change; take and drop from's foreign lock), c (until = from's tail;
# drain every position before it, waiting for slots being written) and d
# (C's queue moves to the new owner), under both workers' locks.
# Checked: each chain's events are queued exactly once, in post order, only
# on the color's owner (or on the worker a move is taking it from, until
# step d); no invalid end state (no lost event, no endless wait).
# Abstracted away: memory (allocation failures, step c's reserve), position
# wrap-around, runs and handlers (a queue is FIFO and moves whole), wake-ups
# and parking, a worker's posts to its own colors other than W1's chain;
# sequential consistency (Promela's interleavings) stands for the C code's
# seq_cst operations.
# Passes (exit 0) only if
#  - the protocol's model shows no error in an exhaustive search, and
#  - SPIN finds the error in every broken variant (SKIP_B: no wait for
#    flushes; SKIP_FLOCK: no foreign lock in step b; SHORT_C: step c stops
#    at a slot not yet written; SHORT_ALL: so does the locked fallback's
#    drain; STAY_STAGED: a full inbox leaves the rest staged; OWN_NODRAIN:
#    a worker's post to a color it read as its own skips the drain when the
#    color moved away before its lock), which shows the model can fail.
# Exit 1 otherwise, or if spin or a C compiler is missing (Debian/Ubuntu:
# apt-get install -y spin). Prints the states each search explored.
#
# Options: -v      print the counterexample SPIN found in each broken variant;
#          --full  also search larger and other configurations (minutes).
# The search is exhaustive: pan is built with -DSAFETY (safety properties
# only: no cycles to look for) and -DCOLLAPSE (lossless state compression),
# never with bitstate or hash compaction. The default run takes about 30 s
# and 1 GB of memory.
set -u

usage() {
    echo "usage: $0 [-v] [--full]" >&2
    exit 1
}

verbose=0
full=0
for arg in "$@"; do
    case $arg in
    -v) verbose=1 ;;
    --full) full=1 ;;
    *) usage ;;
    esac
done

here=$(cd "$(dirname "$0")" && pwd) || exit 1
model=$here/move.pml
if [ ! -r "$model" ]; then
    echo "check-move.sh: FAIL: $model not found" >&2
    exit 1
fi
if ! command -v spin >/dev/null 2>&1; then
    echo "check-move.sh: FAIL: spin not found; install it (Debian/Ubuntu: apt-get install -y spin)" >&2
    exit 1
fi
cc=
for c in "${CC:-}" cc gcc clang; do
    if [ -n "$c" ] && command -v "$c" >/dev/null 2>&1; then
        cc=$c
        break
    fi
done
if [ -z "$cc" ]; then
    echo "check-move.sh: FAIL: no C compiler found to build SPIN's verifier" >&2
    exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-move.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

n=0
# search EXPECT OPT FLAGS...: builds the model with spin FLAGS, compiles pan
# with OPT and runs it. EXPECT is "pass" (no error allowed) or "fail" (SPIN
# must find one). Prints one line of results; returns 0 if as expected.
search() {
    expect=$1
    opt=$2
    shift 2
    n=$((n + 1))
    dir=$tmp/$n
    mkdir "$dir" || return 1
    cp "$model" "$dir/move.pml" || return 1
    label=${*:-"(defaults)"}
    printf '  %-32s ' "$label"
    if ! (cd "$dir" && spin "$@" -a move.pml >spin.out 2>&1); then
        echo "FAIL: spin -a failed:"
        sed 's/^/    /' "$dir/spin.out"
        return 1
    fi
    # -w: pan.c's own warnings are not ours to fix.
    if ! (cd "$dir" && "$cc" "$opt" -w -DSAFETY -DCOLLAPSE -o pan pan.c >cc.out 2>&1); then
        echo "FAIL: $cc could not build pan:"
        sed 's/^/    /' "$dir/cc.out"
        return 1
    fi
    (cd "$dir" && ./pan -m100000 >pan.out 2>&1)
    out=$dir/pan.out
    states=$(sed -n 's/^ *\([0-9][0-9]*\) states, stored.*/\1/p' "$out")
    trans=$(sed -n 's/^ *\([0-9][0-9]*\) transitions.*/\1/p' "$out")
    errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$out")
    secs=$(sed -n 's/^pan: elapsed time \([0-9.e+-]*\) seconds.*/\1/p' "$out")
    printf '%s states, %s transitions, %s s, errors: %s: ' \
        "${states:-?}" "${trans:-?}" "${secs:-?}" "${errors:-?}"
    if grep -q 'out of memory' "$out" || grep -q 'search depth too small' "$out" ||
        [ -z "$errors" ] || [ -z "$states" ]; then
        echo "FAIL: the search did not complete:"
        sed 's/^/    /' "$out"
        return 1
    fi
    if [ "$expect" = pass ]; then
        if [ "$errors" -eq 0 ]; then
            echo "ok"
            return 0
        fi
        echo "FAIL: SPIN found an error in the protocol:"
        trail "$dir" "$@"
        return 1
    fi
    if [ "$errors" -ne 0 ]; then
        echo "ok, caught"
        if [ "$verbose" -eq 1 ]; then
            trail "$dir" "$@"
        fi
        return 0
    fi
    echo "FAIL: SPIN found no error in this broken variant: the model is vacuous"
    return 1
}

# trail DIR FLAGS...: the counterexample, as the model's narration.
trail() {
    tdir=$1
    shift
    grep -E '^pan:[0-9]' "$tdir/pan.out" | sed 's/^/    /'
    (cd "$tdir" && spin "$@" -T -t move.pml 2>&1) |
        grep -E '^@ |^spin: text of failed|^spin: trail ends|invalid end state' |
        sed 's/^/    /'
}

status=0
echo "check-move.sh: SPIN $(spin -V 2>/dev/null | sed -n 's/^Spin Version \([^ ]*\).*/\1/p'), $cc"
echo "the protocol (move.pml: must show no error):"
search pass -O2 || status=1
# A worker's posts to a color it reads as its own (the chain L of W1's
# thread), against three moves of that color.
search pass -O2 -DNL=3 -DNG=1 -DNF=0 -DND=0 -DNMOVES=3 || status=1
if [ "$full" -eq 1 ]; then
    for flags in "-DCAP=1" "-DCAP=3" "-DPER_EVENT" "-DHOP=0" "-DNMOVES=3" \
        "-DNG=2 -DNF=2" "-DND=2" "-DSTAY_STAGED -DHOP=0" "-DNL=2 -DNG=2 -DND=0"; do
        # shellcheck disable=SC2086 # $flags is a list of options
        search pass -O2 $flags || status=1
    done
fi
# Smaller sizes (G posts 2 events, one move): each error is found within a
# few hundred thousand states.
echo "broken variants (SPIN must find an error in each):"
for v in SKIP_B SKIP_FLOCK SHORT_C SHORT_ALL STAY_STAGED; do
    search fail -O1 -DNG=2 -DNMOVES=1 "-D$v" || status=1
done
# The code before issue 26: a post to a color read as the poster's own
# drained the owner's inbox only if the owner was still the poster.
search fail -O1 -DNL=2 -DNG=1 -DNF=0 -DND=0 -DOWN_NODRAIN || status=1
if [ "$status" -eq 0 ]; then
    echo "check-move.sh: ok"
else
    echo "check-move.sh: FAIL"
fi
exit "$status"
