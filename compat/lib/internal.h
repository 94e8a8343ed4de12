/*
 * internal.h: what the compat library's sources share. Includes the native
 * API by its full path (<mely/mely.h>), never the legacy "mely.h".
 */
#ifndef MELY_COMPAT_INTERNAL_H
#define MELY_COMPAT_INTERNAL_H

#include <mely/mely.h>

#include "callback.h"
#include "melycompat_loop.h"

namespace mely_compat {

/* The one runtime of the process, created on first use from the environment
 * (MELY_WORKERS, MELY_STEAL, ...). Exits with a message if it cannot be. */
mely_t *runtime();
/* Its worker count (creates the runtime). */
unsigned workers();
/* A legacy color (negative: pinned) as a native one; exits on a bad color. */
mely_color_t native_color(int color);
/* Where a callback's events go: its color, priority and handler descriptor. */
mely_to_t target(const callback_base *cb);
/* Refreshes this thread's tsnow if it may be stale (cheap: a TSC read). */
void tick_now();
/* Prints "mely-compat: what: error" and exits with EXIT_FAILURE. */
[[noreturn]] void die(const char *what, int err);

} // namespace mely_compat

#endif
