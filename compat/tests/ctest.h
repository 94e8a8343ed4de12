/* SPDX-License-Identifier: MIT */
/*
 * ctest.h: helpers of the compat tests (plain programs: exit 0 on success,
 * non-zero with a message on failure).
 */
#ifndef MELY_COMPAT_CTEST_H
#define MELY_COMPAT_CTEST_H

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* Kills the test (SIGALRM) if it runs longer than `sec` seconds, scaled by
 * CK_TIMEOUT_MULTIPLIER as the Check tests are (sanitizer builds). */
static inline void ct_watchdog(unsigned sec)
{
    const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
    unsigned mult = m ? (unsigned)atoi(m) : 1;
    alarm(sec * (mult ? mult : 1));
}

/* Runs fn in a child process (stderr captured), returns its wait status and
 * its stderr in *err. Call before the runtime exists (no threads yet). */
template <class F> static inline int ct_fork(F fn, std::string *err)
{
    int p[2];
    if (pipe(p) < 0)
        abort();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        abort();
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 2);
        close(p[1]);
        /* The tests compare stderr exactly; a stall warning (a handler held
         * past 100 ms, as a loaded sanitizer build does: ThreadSanitizer,
         * fdfiles' stdin reader at 101 ms) is not what they check. */
        setenv("MELY_STALL_MS", "0", 1);
        fn();
        _exit(0);
    }
    close(p[1]);
    char buf[512];
    ssize_t n;
    err->clear();
    while ((n = read(p[0], buf, sizeof buf)) > 0)
        err->append(buf, (size_t)n);
    close(p[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        ;
    return st;
}

static inline bool ct_exited(int st, int code)
{
    return WIFEXITED(st) && WEXITSTATUS(st) == code;
}

/* The port (host order) a socket is bound to. */
static inline unsigned short ct_port_of(int fd)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof sin;
    CHECK(getsockname(fd, (struct sockaddr *)&sin, &len) == 0);
    return ntohs(sin.sin_port);
}

static inline bool ct_contains(const std::string &s, const char *what)
{
    return s.find(what) != std::string::npos;
}

#endif

/* Tests with an event loop: each pending check holds one unit of ct_left;
 * the last one to finish ends the program with exit(0). */
#include <atomic>
#include <time.h>
static std::atomic<int> ct_left;
static inline void ct_expect(int n) { ct_left.fetch_add(n); }
static inline void ct_done()
{
    if (ct_left.fetch_sub(1) == 1) {
        fflush(stdout);
        exit(0);
    }
}
static inline double ct_now_ms()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
