# SPDX-License-Identifier: MIT
# sfslite-compat-flags.sh: sourced by the sfslite-*.sh scripts (run by hand
# against an sfslite tree). Sets CFLAGS_COMPAT and LIBS_COMPAT, the flags a
# program gets from pkg-config for compat: the build tree's
# (mely-compat-uninstalled) when MELY_BUILD is set or the current directory
# is a mely build directory, else the installed mely-compat. Exits 2 if
# pkg-config finds neither.
PKG_CONFIG=${PKG_CONFIG:-pkg-config}
if [ -z "${MELY_BUILD:-}" ] && [ -f compat/mely-compat-uninstalled.pc ]; then
    MELY_BUILD=$(pwd)
fi
if [ -n "${MELY_BUILD:-}" ]; then
    PKG_CONFIG_PATH="$MELY_BUILD/compat${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    export PKG_CONFIG_PATH
    PC=mely-compat-uninstalled
else
    PC=mely-compat
fi
CFLAGS_COMPAT=$($PKG_CONFIG --cflags $PC) || exit 2
LIBS_COMPAT=$($PKG_CONFIG --libs $PC) || exit 2
