#!/bin/sh
# SPDX-License-Identifier: MIT
# rpcc.sh: mely-rpcc's command line and errors, and its output for
# rpc_test_prot.x and examples/arpc/*.x compiling with -Wall -Wextra -Werror
# against the compat headers (compat/tests/xdr runs the code).
set -u
srcdir=${srcdir:-.}
RPCC="$(cd "$srcdir" && pwd)/tools/mely-rpcc"
CXX=${CXX:-g++}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "rpcc.sh: $*" >&2; exit 1; }

command -v python3 >/dev/null || { echo "python3 not found"; exit 77; }

# Usage errors: status 1 and the usage line.
"$RPCC" >"$tmp/out" 2>&1 && fail "no arguments accepted"
grep -q '^usage: mely-rpcc' "$tmp/out" || fail "no usage line"
"$RPCC" -h -c x.x >/dev/null 2>&1 && fail "-h and -c together accepted"

# Default output names: file.h / file.C in the current directory.
cp "$srcdir/compat/tests/rpc_test_prot.x" "$tmp/"
(cd "$tmp" && "$RPCC" -h rpc_test_prot.x && "$RPCC" -c rpc_test_prot.x) || fail "default names"
test -s "$tmp/rpc_test_prot.h" && test -s "$tmp/rpc_test_prot.C" || fail "no rpc_test_prot.h/.C"
grep -q 'extern const rpc_program test_prog_1;' "$tmp/rpc_test_prot.h" || fail "no program table"
grep -q '^#define RPC_TEST_PASSTHROUGH 42' "$tmp/rpc_test_prot.h" || fail "%-line not passed through"

# -D reaches cpp; -o FILE and -oFILE.
printf '#ifdef WANT\nconst X = 1;\n#endif\nconst Y = 2;\n' >"$tmp/d.x"
"$RPCC" -h -DWANT "$tmp/d.x" -o "$tmp/d1.h" || fail "-D"
grep -q 'X = 1' "$tmp/d1.h" || fail "-DWANT not seen"
"$RPCC" -h "$tmp/d.x" -o"$tmp/d2.h" || fail "-oFILE"
grep -q 'X = 1' "$tmp/d2.h" && fail "X defined without -DWANT"

# Syntax errors: file:line: message, status 1, no output file left.
printf 'const A = 1;\n\nstruct s {\n  int x\n};\n' >"$tmp/bad.x"
"$RPCC" -h "$tmp/bad.x" -o "$tmp/bad.h" 2>"$tmp/err" && fail "bad.x accepted"
grep -q 'bad.x:5: ' "$tmp/err" || { cat "$tmp/err"; fail "no file:line in the message"; }
test -e "$tmp/bad.h" && fail "output written for a bad file"
printf 'struct a { int x; };\nstruct a { int y; };\n' >"$tmp/dup.x"
"$RPCC" -h "$tmp/dup.x" -o "$tmp/dup.h" 2>"$tmp/err" && fail "redefinition accepted"
grep -q "redefinition of 'a'" "$tmp/err" || fail "no redefinition message"
printf 'program P { version V { void N(void) = 0; void M(void) = 0; } = 1; } = 9;\n' >"$tmp/p.x"
"$RPCC" -h "$tmp/p.x" -o "$tmp/p.h" 2>"$tmp/err" && fail "duplicate procedure number accepted"
grep -q 'used twice' "$tmp/err" || fail "no duplicate procedure message"

# Every .x of ours compiles, header and source, warning-free.
for x in "$srcdir"/compat/tests/rpc_test_prot.x "$srcdir"/examples/arpc/*.x; do
    [ -f "$x" ] || continue
    b=$(basename "$x" .x)
    "$RPCC" -h "$x" -o "$tmp/$b.h" && "$RPCC" -c "$x" -o "$tmp/$b.C" || fail "$x"
    $CXX -std=c++17 -Wall -Wextra -Werror -I"$tmp" -I"$srcdir/compat/include" \
        -c "$tmp/$b.C" -o "$tmp/$b.o" || fail "$b.C does not compile"
done
exit 0
