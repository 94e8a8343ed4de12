#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# quickstart.sh: set up, build and run mely on Debian 12 (as root, or with sudo).
#   scripts/quickstart.sh demo   install what is missing, build, run the main demo
#   scripts/quickstart.sh test   install what is missing, build, run every test
# Builds out of tree in build/ (configure flags: $MELY_CONFIGURE_FLAGS).
# Each step is skipped when it is already done, so a second run is quick.
set -eu

usage() { echo "usage: $0 demo|test" >&2; exit 2; }
[ $# -eq 1 ] || usage
mode=$1
case $mode in demo|test) ;; *) usage ;; esac

top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

# Debian packages: the toolchain, the libraries the runtime builds on (libevent,
# hwloc's headers, Check), PCRE2 (compat's rxx), OpenSSL's libcrypto (SFS's crypto;
# libsodium beside it for bench/aead's comparison), Boost (headers only, for the benchmark's peer) and
# clang with its libFuzzer runtime (make check fuzzes SWS's request parser),
# curl (make check drives SWS with it: apps/sws/tests/sws-curl.sh), spin (make check
# model-checks the move protocol: tests/model/check-move.sh), python3 and
# gnuplot-nox (tools/mely-trace reads traces and draws their pictures; make
# check runs it).
PACKAGES="build-essential autoconf automake libtool pkg-config libevent-dev libhwloc-dev
check libsubunit-dev libpcre2-dev libssl-dev libsodium-dev libboost-dev clang libclang-rt-14-dev curl spin
python3 gnuplot-nox"

install_missing() {
    missing=
    for p in $PACKAGES; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    echo "== installing:$missing"
    if [ "$(id -u)" -eq 0 ]; then
        sudo=
    elif command -v sudo >/dev/null 2>&1; then
        sudo=sudo
    else
        echo "error: these Debian packages are missing and I am not root:$missing" >&2
        exit 1
    fi
    $sudo apt-get update -qq
    # shellcheck disable=SC2086
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing
}

build() {
    if [ ! -x configure ] || [ configure.ac -nt configure ] || [ Makefile.am -nt configure ]; then
        echo "== bootstrapping (autoreconf)"
        autoreconf -fi
    fi
    mkdir -p build
    if [ ! -f build/Makefile ] || [ configure -nt build/config.status ]; then
        echo "== configuring build/ ${MELY_CONFIGURE_FLAGS:-}"
        # shellcheck disable=SC2086
        (cd build && ../configure ${MELY_CONFIGURE_FLAGS:-})
    fi
    echo "== building"
    make -C build -j"$(nproc)"
}

# Sums the Check summaries of the test logs into one closing line.
summarize() {
    find "$1" -path "*/tests/*.log" ! -path "*/_build/*" -exec cat {} + 2>/dev/null | awk '
        /^[0-9]+%: Checks: / {
            gsub(",", ""); n += $3; f += $5 + $7 }
        END { printf "%d passed, %d failed\n", n - f, f }'
}

install_missing
build
case $mode in
demo)
    make -C build bench/e2e/injector
    echo "== SWS, the web server, on its sample site, under the load injector (bench/e2e/sws-demo.sh)"
    exec bench/e2e/sws-demo.sh
    ;;
test)
    status=0
    make -C build -j"$(nproc)" check || status=$?
    for f in $(find build -path "*/tests/*.log" ! -path "*/_build/*" | sort); do
        # Check's own lines, and any failure detail (scripts say "FAIL: why"),
        # for the reader of the CI log.
        grep -E '^[0-9]+%: Checks:|:[FE]:|^FAIL: ' "$f" | sed "s|^|$(basename "$f" .log): |"
    done
    summarize build
    exit $status
    ;;
esac
