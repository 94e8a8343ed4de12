/*
 * async.h (mely-compat): what libasync and libasync-smp programs include.
 * The standard and system headers and portability macros (sysconf.h),
 * callbacks and wrap (callback.h), reference counts (refcnt.h), diagnostics
 * (err.h), socket helpers (amisc.h), the event loop, and the small helpers
 * libasync's amisc.h, err.h, init.h and litetime.h gave with them (below).
 * Build with: g++ prog.C $(pkg-config --cflags --libs mely-compat)
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_ASYNC_H
#define MELY_COMPAT_ASYNC_H

#ifdef MELY_COMPAT_LEGACY_MELY_H
#error "mely-compat: async.h and the original Mely's mely.h give cbv different types; include one of them"
#endif
#define MELY_COMPAT_ASYNC_FLAVOR 1

#include "sysconf.h"

/* The C++ headers libasync's own headers pulled in. */
#include <algorithm>
#include <initializer_list>
#include <new>
#include <typeinfo>
#include <utility>

#include "refcnt.h"
#include "callback.h"
#include "err.h"
#include "str.h"
#include "amisc.h"
#include "melycompat_loop.h"

typedef callback<void>::ref cbv;
typedef callback<void, int>::ref cbi;
typedef callback<void, bool>::ref cbb;

/* Callbacks that do nothing. */
extern const cbv &cbv_null;
extern const cbi &cbi_null;
extern const cbb &cbb_null;

/* `New` for callbacks, as libasync's callback.h named it. */
#define wNew New

/* ---- TIMESPEC_* (libasync's litetime.h) ----------------------------------------- */

/* One nanosecond later. */
#define TIMESPEC_INC(ts)                                                                      \
    do {                                                                                      \
        if (++(ts)->tv_nsec == 1000000000L) {                                                 \
            (ts)->tv_sec++;                                                                   \
            (ts)->tv_nsec = 0L;                                                               \
        }                                                                                     \
    } while (0)
#define TIMESPEC_LT(a, b)                                                                     \
    ((a).tv_sec < (b).tv_sec || ((a).tv_sec == (b).tv_sec && (a).tv_nsec < (b).tv_nsec))
#define TIMESPEC_EQ(a, b) ((a).tv_sec == (b).tv_sec && (a).tv_nsec == (b).tv_nsec)

/* ---- Code run at start-up and exit (libasync's init.h) ------------------------------ */

/* INITFN(f): f() runs before main() (with the file's static constructors);
 * EXITFN(f): f() runs at exit. Both declare f, which the file then defines. */
class initfn {
public:
    explicit initfn(void (*fn)()) { fn(); }
};
class exitfn {
    void (*const fn_)();

public:
    explicit exitfn(void (*fn)()) : fn_(fn) {}
    ~exitfn() { fn_(); }
};
#define INITFN(fn)                                                                            \
    static void fn();                                                                         \
    [[maybe_unused]] static initfn init_##fn(fn)
#define EXITFN(fn)                                                                            \
    static void fn();                                                                         \
    [[maybe_unused]] static exitfn exit_##fn(fn)
/* INIT(name): name::start() runs once before the first file that includes
 * the declaration starts, name::stop() after the last one; the program
 * defines start, stop and `int name::count;`. */
#define INIT(name)                                                                            \
    static class name {                                                                       \
        static int count;                                                                     \
        static void start();                                                                  \
        static void stop();                                                                   \
                                                                                              \
    public:                                                                                   \
        name()                                                                                \
        {                                                                                     \
            if (count++ == 0)                                                                 \
                start();                                                                      \
        }                                                                                     \
        ~name()                                                                               \
        {                                                                                     \
            if (--count == 0)                                                                 \
                stop();                                                                       \
        }                                                                                     \
    } init_##name [[maybe_unused]]

/* assert (never compiled out) and myabort: err.h, as in libasync. */

#endif /* MELY_COMPAT_ASYNC_H */
