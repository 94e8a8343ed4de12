# SPDX-License-Identifier: MIT
# shellcheck shell=sh
# sws-lib.sh: starting and stopping servers (apps/sws/sws, apps/sfs/sfsd)
# from shell scripts. Sourced (POSIX sh) by apps/sws/tests/injector-sws.sh,
# apps/sws/tests/sws-curl.sh, apps/sfs/tests/sfs-multio.sh, bench/e2e/sws-demo.sh and
# bench/e2e/sws-memory.sh; it defines functions only.

# server_port OUT PID TENTHS SED: waits at most TENTHS tenths of a second
# until the server running as PID, its standard output in the file OUT,
# prints the line from which the sed script SED (run with -n) prints its
# port, and prints that port. Returns 1 if PID exits first or the time runs out.
server_port() {
    _sws_i=0
    while [ "$_sws_i" -lt "$3" ]; do
        _sws_p=$(sed -n "$4" "$1" | head -n 1)
        if [ -n "$_sws_p" ]; then
            echo "$_sws_p"
            return 0
        fi
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
        _sws_i=$((_sws_i + 1))
    done
    return 1
}

# sws_port OUT PID TENTHS: server_port for sws, which prints the address it
# serves as "... on http://127.0.0.1:PORT/ ...".
sws_port() {
    server_port "$1" "$2" "$3" 's|.*on http://127\.0\.0\.1:\([0-9][0-9]*\)/.*|\1|p'
}

# sfsd_port OUT PID TENTHS: server_port for sfsd, which prints
# "sfsd: serving ROOT on 127.0.0.1:PORT (...".
sfsd_port() {
    server_port "$1" "$2" "$3" 's/^sfsd: serving .* on 127\.0\.0\.1:\([0-9][0-9]*\) .*/\1/p'
}

# sws_script_init TOOL...: LC_ALL=C, sws=./apps/sws/sws (fails unless built:
# run from the build directory), and each TOOL installed (fails otherwise).
sws_script_init() {
    LC_ALL=C
    export LC_ALL
    sws=./apps/sws/sws
    [ -x "$sws" ] || { echo "FAIL: $sws not built (run from the build directory)"; exit 1; }
    for _sws_t in "$@"; do
        command -v "$_sws_t" >/dev/null 2>&1 || { echo "FAIL: $_sws_t is not installed"; exit 1; }
    done
}

# test_tmpdir NAME [SIGNAL]: sets tmp to a fresh temporary directory and pid
# to ""; at exit, the process $pid (a server, once set) is sent SIGNAL (KILL
# unless told: a test that failed has no use for a clean stop, a demo does)
# and $tmp removed.
test_tmpdir() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX") || exit 1
    pid=
    _sws_sig=${2:-KILL}
    trap '[ -n "$pid" ] && kill -"$_sws_sig" "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
}

# fail MESSAGE...: says FAIL with MESSAGE, then every $tmp/*.out and
# $tmp/*.err (their last $fail_lines lines if set, else whole), and exits 1.
fail() {
    echo "FAIL: $*"
    for _sws_f in "$tmp"/*.out "$tmp"/*.err; do
        [ -f "$_sws_f" ] || continue
        echo "--- $_sws_f"
        if [ -n "${fail_lines:-}" ]; then tail -n "$fail_lines" "$_sws_f"; else cat "$_sws_f"; fi
    done
    exit 1
}

# sws_stop PID TENTHS: sends SIGTERM to PID (a child of this shell: sws, sfsd) and waits
# at most TENTHS tenths of a second. Returns its exit status, or 124 if it was
# still running (it is then killed).
sws_stop() {
    kill -TERM "$1" 2>/dev/null
    _sws_i=0
    while kill -0 "$1" 2>/dev/null && [ "$_sws_i" -lt "$2" ]; do
        sleep 0.1
        _sws_i=$((_sws_i + 1))
    done
    if kill -0 "$1" 2>/dev/null; then
        kill -KILL "$1" 2>/dev/null
        wait "$1" 2>/dev/null
        return 124
    fi
    wait "$1"
}
