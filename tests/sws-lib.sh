# shellcheck shell=sh
# sws-lib.sh: starting and stopping apps/sws/sws from shell scripts. Sourced
# (POSIX sh) by tests/injector-sws.sh, tests/sws-curl.sh, bench/e2e/sws-demo.sh
# and bench/e2e/sws-memory.sh; it defines functions only.

# sws_port OUT PID TENTHS: waits at most TENTHS tenths of a second until sws,
# running as PID with its standard output in the file OUT, prints the address
# it serves ("... on http://127.0.0.1:PORT/ ..."), and prints PORT. Returns 1
# if PID exits first or the time runs out.
sws_port() {
    _sws_i=0
    while [ "$_sws_i" -lt "$3" ]; do
        _sws_p=$(sed -n 's|.*on http://127\.0\.0\.1:\([0-9][0-9]*\)/.*|\1|p' "$1")
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

# sws_stop PID TENTHS: sends SIGTERM to PID (a child of this shell) and waits
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
