/* SPDX-License-Identifier: MIT */
/*
 * internal.h: what the compat library's sources share. Includes the native
 * API by its full path (<mely/mely.h>), never the legacy "mely.h".
 */
#ifndef MELY_COMPAT_INTERNAL_H
#define MELY_COMPAT_INTERNAL_H

#include <mely/mely.h>

#include <atomic>

#include "callback.h"
#include "melycompat_loop.h"

namespace mely_compat {

/* Hidden: the library's own, reached without a GOT load. */
#define MELY_COMPAT_HIDDEN __attribute__((visibility("hidden")))
extern MELY_COMPAT_HIDDEN mely_t g_rt;
extern MELY_COMPAT_HIDDEN std::atomic<bool> g_ready;
extern MELY_COMPAT_HIDDEN unsigned g_workers;

void create_runtime();

/* The runtime's idle hook: runs the register_atempty_handler handlers
 * (hooks.cpp). */
void run_atempty(void *arg) noexcept;
[[noreturn]] void bad_native_color(int color);
extern MELY_COMPAT_HIDDEN std::atomic<const mely_handler_t *> g_default_handler;

/* The one runtime of the process, created on first use from the environment
 * (MELY_WORKERS, MELY_STEAL, ...). Exits with a message if it cannot be. */
inline mely_t *runtime()
{
    if (__builtin_expect(!g_ready.load(std::memory_order_acquire), 0))
        create_runtime();
    return &g_rt;
}

/* Its worker count (creates the runtime). */
inline unsigned workers()
{
    runtime();
    return g_workers;
}

/* native_color() of a color outside 0..MAX_COLORS-1. */
mely_color_t native_color_slow(int color);

/* A legacy color (negative: pinned) as a native one; exits on a bad color. */
inline mely_color_t native_color(int color)
{
    if (__builtin_expect((unsigned)color < (unsigned)MAX_COLORS, 1))
        return (mely_color_t)color;
    return native_color_slow(color);
}

/* Where a callback's events go: its color, priority and handler descriptor. */
inline mely_to_t target(const callback_base *cb)
{
    mely_to_t to;
    to.color = native_color(cb->color_);
    to.prio = cb->prio_ < 0 ? 0 : cb->prio_ > MELY_PRIO_MAX ? MELY_PRIO_MAX : cb->prio_;
    to.handler = static_cast<const mely_handler_t *>(cb->handler_);
    if (!to.handler)
        to.handler = g_default_handler.load(std::memory_order_relaxed);
    return to;
}

/* Called from a catch handler, when an exception escaped the program's code
 * that a trampoline called (cb, or the function fn when there is no
 * callback): prints one line on stderr (the exception, the color, the worker,
 * via and arg (if >= 0), the handler) and aborts. exceptions.cpp. */
[[noreturn]] void callback_threw(const callback_base *cb, const void *fn, const char *via,
                                 int arg) noexcept;

/* Calls f(), the program's code behind cb, from a trampoline the C runtime
 * called: an exception must not unwind through the runtime's C frames, so
 * one that escapes f() ends the process here (callback_threw). The try block
 * costs nothing until something throws (the Itanium ABI's unwind tables). */
template <class F>
inline void guard(const callback_base *cb, const char *via, int arg, F &&f) noexcept
{
    try {
        f();
    } catch (...) {
        callback_threw(cb, nullptr, via, arg);
    }
}

/* Exits with "mely-compat: what of a NULL callback" if cb is NULL. */
[[noreturn]] void null_callback(const char *what);
inline void require_callback(const void *cb, const char *what)
{
    if (__builtin_expect(!cb, 0))
        null_callback(what);
}

/* Prints "mely-compat: what: error" and exits with EXIT_FAILURE. */
[[noreturn]] void die(const char *what, int err);

} // namespace mely_compat

#endif
