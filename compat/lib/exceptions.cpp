/* SPDX-License-Identifier: MIT */
/*
 * exceptions.cpp: what happens when an exception escapes a legacy callback.
 *
 * Callbacks run inside the C runtime's frames: a worker's loop (C, built
 * without -fexceptions) calls compat's trampoline, which calls the callback.
 * An exception that left the trampoline would unwind through those C frames
 * without running anything in them (x86-64 and AArch64 give C code unwind
 * tables, not cleanups): the worker's lock and queue state would stay as the
 * throw left it. On worker 0 it came out of amain() and left the runtime
 * marked running (mely_run then said EBUSY forever); on another worker it
 * reached the top of the worker's thread and std::terminate.
 *
 * So every trampoline catches (guard() in internal.h) and calls
 * callback_threw(), which prints one line on stderr and aborts: the same
 * outcome on every worker, for every kind of callback (doc/porting.md has the
 * line's format). abort() rather than std::terminate(): the status is always
 * SIGABRT and the line is the only message (a terminate handler the program
 * installed could exit with any status, and libstdc++'s default one prints
 * two more lines).
 */
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <typeinfo>

#include <cxxabi.h>
#include <dlfcn.h>
#include <unistd.h>

#include "internal.h"

namespace {

/* Demangles name into buf (the mangled name if it cannot be). No exception,
 * and no allocation but __cxa_demangle's (the failure may be bad_alloc). */
const char *demangle(const char *name, char *buf, std::size_t n)
{
    int st = -1;
    char *d = abi::__cxa_demangle(name, nullptr, nullptr, &st);
    snprintf(buf, n, "%s", st == 0 && d ? d : name);
    free(d);
    return buf;
}

/* "std::runtime_error: what", or "unknown exception (of type T)". Called
 * from a catch handler: rethrows the exception being handled to see it. */
void describe_exception(char *buf, std::size_t n)
{
    char type[256];
    try {
        throw;
    } catch (const std::exception &e) {
        snprintf(buf, n, "%s: %s", demangle(typeid(e).name(), type, sizeof type), e.what());
    } catch (...) {
        const std::type_info *t = abi::__cxa_current_exception_type();
        if (t)
            snprintf(buf, n, "unknown exception (of type %s)",
                     demangle(t->name(), type, sizeof type));
        else
            snprintf(buf, n, "unknown exception");
    }
}

/* What the callback calls: "name() [module+0xoffset]" (the symbol when the
 * dynamic symbol table has it: a shared library's, or a program linked with
 * -rdynamic; the offset, for addr2line -f -e module, in any case), else its
 * type ("of type void (conn::*)(int)": a virtual member function), else
 * "unknown". */
void describe_handler(const callback_base *cb, const void *fn, char *buf, std::size_t n)
{
    const std::type_info *type = nullptr;
    if (cb) {
        fn = cb->target_fn();
        type = cb->target_type();
    }
    char name[512];
    Dl_info di;
    if (fn && dladdr(fn, &di) && di.dli_fname) {
        const char *mod = strrchr(di.dli_fname, '/');
        mod = mod ? mod + 1 : di.dli_fname;
        unsigned long off = (unsigned long)((const char *)fn - (const char *)di.dli_fbase);
        if (di.dli_sname && di.dli_saddr == fn)
            snprintf(buf, n, "%s [%s+0x%lx]", demangle(di.dli_sname, name, sizeof name), mod,
                     off);
        else
            snprintf(buf, n, "%s+0x%lx", mod, off);
    } else if (type) {
        snprintf(buf, n, "of type %s", demangle(type->name(), name, sizeof name));
    } else {
        snprintf(buf, n, "unknown");
    }
}

/* The legacy color of the event running on this thread ("none" outside one). */
void describe_color(char *buf, std::size_t n)
{
    int c = mely_current_color();
    if (c < 0)
        snprintf(buf, n, "none");
    else if ((unsigned)c >= MELY_COLORS)
        snprintf(buf, n, "%d", -(int)((unsigned)c - MELY_COLORS) - 1);
    else
        snprintf(buf, n, "%d", c);
}

std::atomic<bool> g_aborting{false};

/* Writes the line with one write(), whole even if other threads print, and
 * aborts. One line only: a second worker that throws meanwhile (two idle
 * hooks, say) waits for the first one's abort. */
[[noreturn]] void report_and_abort(const char *exc, const char *where)
{
    if (g_aborting.exchange(true))
        for (;;)
            pause();
    char color[32], line[2048];
    describe_color(color, sizeof color);
    int len = snprintf(line, sizeof line,
                       "mely-compat: uncaught exception in a callback: %s (color %s, worker %d, "
                       "%s); aborting\n",
                       exc, color, mely_current_worker(), where);
    if (len < 0 || (std::size_t)len >= sizeof line) { /* truncated: keep the newline */
        len = (int)sizeof line - 1;
        line[len - 1] = '\n';
    }
    if (write(2, line, (std::size_t)len) < 0) {
        /* nothing more to tell anyone */
    }
    abort();
}

} // namespace

namespace mely_compat {

namespace {

/* Prints the line for exc, thrown from what cb (or fn) wraps, and aborts. */
[[noreturn]] void report(const callback_base *cb, const void *fn, const char *via, int arg,
                         const char *exc)
{
    char handler[768], where[1024];
    describe_handler(cb, fn, handler, sizeof handler);
    if (arg >= 0)
        snprintf(where, sizeof where, "%s %d, handler %s", via, arg, handler);
    else
        snprintf(where, sizeof where, "%s, handler %s", via, handler);
    report_and_abort(exc, where);
}

} // namespace

void callback_threw(const callback_base *cb, const void *fn, const char *via, int arg) noexcept
{
    /* pthread_exit() or a cancellation inside a callback: the worker's
     * thread would leave the runtime's frames just the same. glibc unwinds
     * the thread with a foreign exception (not a C++ one), for which
     * std::current_exception() is empty. It is told apart that way rather
     * than by a handler of abi::__forced_unwind &: such a handler binds the
     * reference to a null object (UBSan's "reference binding to null
     * pointer"), and a nested try block's handler that ends destroys the
     * unwind, which glibc answers with its own "FATAL: exception not
     * rethrown" and abort instead of the line. Here the handler of the
     * caller (guard) never ends: report() aborts. */
    if (!std::current_exception())
        report(cb, fn, via, arg, "the worker's thread exited (pthread_exit or cancellation)");
    char exc[1024];
    describe_exception(exc, sizeof exc);
    report(cb, fn, via, arg, exc);
}

} // namespace mely_compat
