#!/bin/sh
# SPDX-License-Identifier: MIT
# The runtime's .c files call each other without a cycle (scripts/callgraph.sh;
# the layers of doc/runtime.md). Run by make check, which sets CORE_OBJECTS.
set -eu
[ -n "${CORE_OBJECTS:-}" ] || { echo "CORE_OBJECTS is not set (run through make check)"; exit 99; }
# shellcheck disable=SC2086
exec "${srcdir:-.}/scripts/callgraph.sh" $CORE_OBJECTS
