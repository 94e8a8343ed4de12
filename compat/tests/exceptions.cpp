/* SPDX-License-Identifier: MIT */
/*
 * exceptions.cpp: an exception that escapes a callback ends the process the
 * same way whatever the callback and the worker (doc/porting.md): one line on
 * stderr, "mely-compat: uncaught exception in a callback: <exception> (color
 * <c>, worker <w>, <source>, handler <h>); aborting", then abort() (SIGABRT).
 * pthread_exit() and a cancellation in a callback too.
 * Each case runs in a child process with two workers; pinned colors (-1:
 * worker 0, -2: worker 1) fix the worker. Linked with -export-dynamic, so that
 * the handler's symbol name appears in the line (dladdr).
 */
#include "async.h"

#include <mely/mely.h>

#include <stdexcept>
#include <sys/resource.h>

#include "ctest.h"

/* The handlers: external names, so that dladdr finds them. */
void throw_runtime() { throw std::runtime_error("boom on worker 0"); }
void throw_int() { throw 42; }
void throw_in_timer() { throw std::logic_error("from a timer"); }
void throw_in_lazycb() { throw std::runtime_error("from a lazycb"); }
void throw_on_signal() { throw std::runtime_error("from a signal"); }
void throw_on_connect(int fd) { throw std::runtime_error(fd < 0 ? "refused" : "connected"); }
void throw_when_idle() { throw std::runtime_error("from an idle hook"); }
void native_throw(void *) { throw std::runtime_error("from a native handler"); }
void exit_thread() { pthread_exit(nullptr); }
void cancel_thread()
{
    pthread_cancel(pthread_self());
    pthread_testcancel(); /* the deferred cancellation acts here */
}

static int g_fd = -1;
void throw_on_fd()
{
    char c;
    CHECK(read(g_fd, &c, 1) == 1);
    throw std::out_of_range("from an fd");
}
void throw_when_writable() { throw std::runtime_error("from /dev/null"); }

struct conn {
    int n = 0;
    void readable(int k) { throw std::length_error(k == 7 ? "member" : "?"); }
    virtual void virt() { throw std::runtime_error("virtual member"); }
    virtual ~conn() {}
};

/* Runs body in a child with two workers, no core file; checks that it died
 * of SIGABRT with exactly one line on stderr, holding each of `needles`. */
template <class F> static void expect_abort(const char *name, F body,
                                            std::initializer_list<const char *> needles)
{
    std::string err;
    int st = ct_fork(
        [&] {
            struct rlimit no_core = {0, 0};
            setrlimit(RLIMIT_CORE, &no_core);
            setenv("MELY_WORKERS", "2", 1);
            body();
            amain();
        },
        &err);
    bool ok = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT &&
              std::count(err.begin(), err.end(), '\n') == 1 && err.back() == '\n' &&
              ct_contains(err, "mely-compat: uncaught exception in a callback: ") &&
              ct_contains(err, "); aborting\n");
    for (const char *n : needles)
        ok = ok && ct_contains(err, n);
    if (!ok) {
        fprintf(stderr, "case %s: status %#x, stderr:\n%s", name, st, err.c_str());
        for (const char *n : needles)
            fprintf(stderr, "  expected: %s\n", n);
        exit(1);
    }
    printf("%s: %s", name, err.c_str());
}

static void connect_refused()
{
    int tmp = inetsocket(SOCK_STREAM, 0, INADDR_LOOPBACK);
    CHECK(tmp >= 0);
    unsigned short port = ct_port_of(tmp);
    close(tmp); /* nobody listens there now */
    in_addr lo;
    lo.s_addr = htonl(INADDR_LOOPBACK);
    tcpconnect(lo, port, cwrap(throw_on_connect, -2));
}

int main()
{
    ct_watchdog(60);
    /* Posted before amain(), run by worker 0 (the thread that called amain). */
    expect_abort(
        "worker 0", [] { cpucb(cwrap(throw_runtime, -1)); },
        {"std::runtime_error: boom on worker 0 (color -1, worker 0, cpucb, handler "
         "throw_runtime() [exceptions+0x"});
    expect_abort(
        "worker 1, not a std::exception", [] { cpucb_tail(cwrap(throw_int, -2)); },
        {"unknown exception (of type int) (color -2, worker 1, cpucb, handler throw_int() ["});
    /* An unpinned color: its worker is whichever runs it. */
    expect_abort(
        "color 5", [] { cpucb(cwrap(throw_int, 5)); },
        {"unknown exception (of type int) (color 5, worker "});
    expect_abort(
        "member function", [] { cpucb(cwrap(new conn, &conn::readable, 7, -2)); },
        {"std::length_error: member (color -2, worker 1, cpucb, handler conn::readable(int) ["});
    expect_abort(
        "virtual member function", [] { cpucb(cwrap(new conn, &conn::virt, -1)); },
        {"std::runtime_error: virtual member (color -1, worker 0, cpucb, handler of type "
         "void (conn::*)()"});
    expect_abort(
        "a callback wrapping a callback", [] {
            callback<void>::ref inner = wrap(throw_runtime);
            cpucb(cwrap(inner, -2));
        },
        {"(color -2, worker 1, cpucb, handler throw_runtime() ["});
    expect_abort(
        "timer", [] { delaycb(0, 1000000, cwrap(throw_in_timer, -2)); },
        {"std::logic_error: from a timer (color -2, worker 1, timecb, handler "
         "throw_in_timer() ["});
    expect_abort(
        "lazycb", [] { lazycb(0, cwrap(throw_in_lazycb, -1)); },
        {"std::runtime_error: from a lazycb (color -1, worker 0, lazycb, handler "
         "throw_in_lazycb() ["});
    expect_abort(
        "fd", [] {
            int p[2];
            CHECK(pipe(p) == 0 && write(p[1], "x", 1) == 1);
            g_fd = p[0];
            make_async(g_fd);
            fdcb(g_fd, selread, cwrap(throw_on_fd, -2));
        },
        {"std::out_of_range: from an fd (color -2, worker 1, fdcb(selread) on fd ",
         ", handler throw_on_fd() ["});
    expect_abort(
        "always-ready fd", [] {
            int fd = open("/dev/null", O_WRONLY);
            CHECK(fd >= 0);
            fdcb(fd, selwrite, cwrap(throw_when_writable, -1));
        },
        {"std::runtime_error: from /dev/null (color -1, worker 0, fdcb(selwrite) on fd "});
    expect_abort(
        "signal", [] {
            sigcb(SIGUSR2, cwrap(throw_on_signal, -2));
            cpucb(wrap(+[] { CHECK(kill(getpid(), SIGUSR2) == 0); }));
        },
        {"std::runtime_error: from a signal (color -2, worker 1, sigcb of signal 12, handler "
         "throw_on_signal() ["});
    expect_abort("tcpconnect", connect_refused,
                 {"std::runtime_error: refused (color -2, worker 1, tcpconnect, handler "
                  "throw_on_connect(int) ["});
    expect_abort(
        "idle hook", [] { register_atempty_handler(throw_when_idle); },
        {"std::runtime_error: from an idle hook (color none, worker ",
         "register_atempty_handler, handler throw_when_idle() ["});
    /* pthread_exit and a cancellation unwind the thread with a forced
     * unwind (not a C++ exception): the same line, not glibc's "FATAL:
     * exception not rethrown" (which a catch block that ends prints). */
    expect_abort(
        "pthread_exit on worker 0", [] { cpucb(cwrap(exit_thread, -1)); },
        {"the worker's thread exited (pthread_exit or cancellation) (color -1, worker 0, cpucb, "
         "handler exit_thread() ["});
    expect_abort(
        "pthread_exit on worker 1, in a timer", [] { delaycb(0, 1000000, cwrap(exit_thread, -2)); },
        {"the worker's thread exited (pthread_exit or cancellation) (color -2, worker 1, timecb, "
         "handler exit_thread() ["});
#if defined(__SANITIZE_ADDRESS__)
    /* AddressSanitizer (GCC 12) fails one of its own checks in a cancelled
     * thread that calls a noreturn function ("CHECK failed: asan_thread.cpp:
     * 371", from __asan_handle_no_return's sigaltstack): not compat's line
     * to check there. pthread_exit above runs the same path in compat. */
    printf("cancellation: skipped under AddressSanitizer\n");
#else
    expect_abort(
        "cancellation", [] { cpucb(cwrap(cancel_thread, -2)); },
        {"the worker's thread exited (pthread_exit or cancellation) (color -2, worker 1, cpucb, "
         "handler cancel_thread() ["});
#endif
    /* Not a compat callback: a native handler, posted by the program itself.
     * On worker 0 its exception unwinds through the runtime to amain(),
     * which reports it the same way. */
    expect_abort(
        "native handler on worker 0", [] {
            CHECK(mely_post(mely_compat_runtime(), MELY_COLOR_PINNED(0), native_throw,
                            nullptr) == 0);
        },
        {"std::runtime_error: from a native handler (color ",
         ", worker 0, a native handler, unwound through the runtime, handler unknown)"});
    printf("compat exceptions: ok\n");
    return 0;
}
