# SPDX-License-Identifier: MIT
# lib.sh: what the end-to-end benchmark scripts (run-web.sh, run-sfs.sh,
# run-kv.sh, run-pubsub.sh, sws-trace.sh) share.
# Source it after setting ME (the script's name, for messages). Functions
# set or read the caller's variables: server_pid (stop_server, server_ticks).

# pick OPTION LIST ALLOWED: the values of the comma-separated LIST, in the
# order of ALLOWED; exits 2 on an unknown value or an empty list.
pick() {
    local v out=
    for v in ${2//,/ }; do
        case " $3 " in *" $v "*) ;; *)
            echo "$ME: $1: unknown value '$v' (expected one of: ${3// /,})" >&2
            exit 2 ;;
        esac
    done
    for v in $3; do case ",$2," in *",$v,"*) out="$out $v" ;; esac; done
    [ -n "$out" ] || { echo "$ME: $1 expects a list out of: ${3// /,}" >&2; exit 2; }
    echo "${out# }"
}

# whole NAME VALUE LO HI: exits 2 unless VALUE is a whole number in LO..HI
whole() {
    case "$2" in '' | *[!0-9]*) false ;; *) [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] ;; esac ||
        { echo "$ME: $1 expects a whole number in $3..$4" >&2; exit 2; }
}

find_bin() { # override, candidates...: the override, or the first executable
    [ -n "$1" ] && { echo "$1"; return; }
    shift
    for b in "$@"; do [ -x "$b" ] && { echo "$b"; return; }; done
}

# The machine, as every benchmark prints it beside its figures.
machine_line() {
    local model
    model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
    [ -n "$model" ] || model=$(uname -m)
    echo "machine: ${model}, $(nproc) CPUs online, $(uname -sr)"
}

# At exit (or on INT/TERM): the running server stopped, $tmp removed.
cleanup_on_exit() {
    server_pid=
    # shellcheck disable=SC2317 # called by the EXIT trap
    cleanup() {
        if [ -n "$server_pid" ]; then stop_server; fi
        rm -rf "$tmp"
    }
    trap cleanup EXIT
    trap 'exit 130' INT TERM
}

# said_port FILE: the port the server (server_pid) printed in FILE ("...
# serving 127.0.0.1:PORT"), waited for at most 10 s, while it runs; empty
# if it did not say it.
said_port() {
    local port=
    for _ in $(seq 100); do
        port=$(sed -n 's/.*serving 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p' "$1")
        [ -n "$port" ] || ! kill -0 "$server_pid" 2>/dev/null && break
        sleep 0.1
    done
    echo "$port"
}

wait_port() { # port: wait (at most 5 s) until it accepts
    for _ in $(seq 50); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    return 1
}

stop_server() { # TERM, at most 5 s, then KILL
    local pid=$server_pid
    server_pid=
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        echo "$ME: server $pid did not stop in 5 s: killed" >&2
        kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null
}

server_ticks() { # utime+stime of the server and its children (nginx workers)
    local pids t=0 p
    pids="$server_pid $(pgrep -P "$server_pid" 2>/dev/null | tr '\n' ' ')"
    for p in $pids; do
        [ -r "/proc/$p/stat" ] || continue
        # fields after the ")" that ends the command name: utime is 12th, stime 13th
        t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{ print $12 + $13 }')))
    done
    echo "$t"
}

# An awk function for the scripts' tables: median(list) of space-separated
# numbers (insertion sort: mawk has no asort); an even count gives the mean
# of the two middle values; "" for an empty list.
AWK_MEDIAN='
    function median(list,   n, v, i, j, t) {
        n = split(list, v, " ")
        if (n == 0) return ""
        for (i = 2; i <= n; i++) {
            t = v[i] + 0
            for (j = i - 1; j >= 1 && v[j] + 0 > t; j--) v[j + 1] = v[j]
            v[j + 1] = t
        }
        if (n % 2) return v[(n + 1) / 2] + 0
        return (v[n / 2] + v[n / 2 + 1]) / 2
    }'
