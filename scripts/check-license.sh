#!/bin/sh
# SPDX-License-Identifier: MIT
# check-license.sh [ROOT]: every source file of the tree names its license,
# "SPDX-License-Identifier: MIT", in its first five lines (LICENSE has the
# text). Source files: C and C++ (.c .h .C .cc .cpp .hpp), XDR (.x), Promela
# (.pml), shell (.sh), Python (.py), Makefile.am, configure.ac, pkg-config
# templates (.pc.in), and every other file that starts with "#!"; not data
# (test fixtures, fuzzing corpora), nor what autotools generate. The tree is
# what git tracks under ROOT (default: the top of this script's tree), or,
# out of a git work tree, what ROOT holds but build folders, m4/ and
# build-aux/. Prints each file without the line; exit status 1 if there is
# one, 0 if not.
set -eu
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

list() {
    if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        git ls-files
    else
        find . \( -name .git -o -name 'build*' -o -name autom4te.cache -o -path ./m4 \
            -o -path ./build-aux \) -prune -o -type f -print | sed 's|^\./||'
    fi
}

is_source() {
    case $1 in
    configure | config.status | libtool) return 1 ;; # autotools' (a dist tarball, an in-tree build)
    *.c | *.h | *.C | *.cc | *.cpp | *.hpp | *.x | *.pml | *.sh | *.py | *.pc.in) return 0 ;;
    Makefile.am | */Makefile.am | configure.ac) return 0 ;;
    esac
    [ "$(head -c 2 "$1" 2>/dev/null)" = "#!" ]
}

missing=0
list | {
    while IFS= read -r f; do
        [ -f "$f" ] && [ ! -L "$f" ] || continue
        is_source "$f" || continue
        if ! head -n 5 "$f" | grep -q 'SPDX-License-Identifier: MIT'; then
            echo "$f: no \"SPDX-License-Identifier: MIT\" in its first 5 lines"
            missing=$((missing + 1))
        fi
    done
    if [ "$missing" -ne 0 ]; then
        echo "check-license: $missing source file(s) without their license line" >&2
        exit 1
    fi
}
