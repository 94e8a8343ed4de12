/* SPDX-License-Identifier: MIT */
/*
 * self.c: which worker, and which color, the calling thread is running.
 * Set by the worker loops (worker.c, legacy.c) and read everywhere: a file
 * of its own, at the bottom of the call graph, so that reading them makes
 * no file depend on the loops.
 */
#include "mely/runtime.h"

_Thread_local struct mely__worker *mely__self __attribute__((tls_model("initial-exec")));
_Thread_local int mely__current_color __attribute__((tls_model("initial-exec"))) = -1;
