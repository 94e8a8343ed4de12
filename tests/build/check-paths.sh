#!/bin/sh
# SPDX-License-Identifier: MIT
# check-paths.sh: every file path named in the docs and in source comments
# exists (scripts/check-paths.py), and the check can fail: in a copy of the
# tree, a doc and a source comment that name a missing file, and the files
# that name one deleted, are each reported as FILE:LINE: PATH.
# Needs git and python3; skipped (77) unless at the top of a git work tree (a dist tarball
# does not hold every file the docs name, such as .ci/run).
set -eu
top=$(cd "${srcdir:-.}" && pwd)
check="$top/scripts/check-paths.py"
command -v python3 >/dev/null || { echo "python3 is missing"; exit 1; }
# The top of a work tree, not a folder inside another one's (make distcheck
# unpacks the tarball inside the checkout it was made from).
if [ "$(git -C "$top" rev-parse --show-toplevel 2>/dev/null)" != "$top" ]; then
    echo "not the top of a git work tree: skipped"
    exit 77
fi

echo "--- the tree"
python3 "$check" --root "$top"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git -C "$top" ls-files -z | tar -C "$top" --null -T - -cf - | tar -C "$tmp" -xf -
allow="$top/scripts/check-paths.allow"

echo "--- the copy, unchanged (no git there: the tree is what it holds)"
python3 "$check" --root "$tmp" --allow "$allow"

expect() { # expect WHAT LINE...: the check fails and prints each LINE
    what=$1
    shift
    if python3 "$check" --root "$tmp" --allow "$allow" >"$tmp/out" 2>&1; then
        echo "FAIL: the check passed with $what"
        exit 1
    fi
    for want; do
        grep -qxF "$want" "$tmp/out" || { echo "FAIL: $what: no \"$want\" in:"; cat "$tmp/out"; exit 1; }
    done
    echo "ok: $what"
}

n=$(($(wc -l <"$tmp/doc/runtime.md") + 1))
echo 'See `mely/no-such-file.c` and [the notes](doc/no-such-doc.md).' >>"$tmp/doc/runtime.md"
expect "a doc naming missing files" "doc/runtime.md:$n: mely/no-such-file.c" \
    "doc/runtime.md:$n: doc/no-such-doc.md"
cp "$top/doc/runtime.md" "$tmp/doc/runtime.md"

n=$(($(wc -l <"$tmp/mely/sched/post.c") + 1))
echo '/* the rest is in io/no-such-file.c and gone.h */' >>"$tmp/mely/sched/post.c"
expect "a source comment naming missing files" "mely/sched/post.c:$n: io/no-such-file.c" \
    "mely/sched/post.c:$n: gone.h"
cp "$top/mely/sched/post.c" "$tmp/mely/sched/post.c"

rm "$tmp/mely/io/drain.c"
expect "a file the docs name deleted" \
    "$(cd "$top" && grep -n 'mely/io/drain.c' doc/io.md | head -n 1 | cut -d: -f1 | sed 's|^|doc/io.md:|;s|$|: mely/io/drain.c|')"
echo "PASS"
