/* SPDX-License-Identifier: MIT */
/*
 * init.h (mely-compat): libasync's code run at start-up and exit.
 *   INITFN(f)   f() runs before main(), with the file's static constructors
 *   EXITFN(f)   f() runs at exit, with the file's static destructors
 *   INIT(name)  a counted initializer: name::start() runs once before the
 *               first file that has the declaration, name::stop() after the
 *               last one
 * async.h includes it, as libasync's did.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_INIT_H
#define MELY_COMPAT_INIT_H

/* libasync's attribute wrapper for these statics (empty with g++ >= 3). */
#ifndef __init_attribute__
#define __init_attribute__(x)
#endif

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

#endif /* MELY_COMPAT_INIT_H */
