/* SPDX-License-Identifier: MIT */
/*
 * amisc.h (mely-compat): libasync-style socket and descriptor helpers:
 * sockets, descriptor flags, SIGIO, descriptor passing (rwfd.h), fdwait,
 * convertint, tcpconnect.
 * Written for mely; no line comes from libasync.
 */
#ifndef MELY_COMPAT_AMISC_H
#define MELY_COMPAT_AMISC_H

#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>

/* libasync's amisc.h began with sysconf.h and err.h (and so str.h): a
 * program that includes only amisc.h has str, strbuf, warn, fatal, errno,
 * xmalloc... The original Mely's mely.h, which includes this header too,
 * gave none of them (its programs may use those names). */
#ifndef MELY_COMPAT_LEGACY_MELY_H
#include "sysconf.h"
#include "err.h"
#endif
#include "callback.h"

/* A socket of `type` bound to addr:port (host byte order); SO_REUSEADDR for a
 * TCP socket with a non-zero port; not listening. -1 with errno on failure. */
int inetsocket(int type, u_int16_t port = 0, u_int32_t addr = INADDR_ANY);
/* A Unix stream socket bound to path (not listening); -1 with errno. */
int unixsocket(const char *path);
/* A Unix stream socket connected to path; -1 with errno. */
int unixsocket_connect(const char *path);
void make_async(int fd);
void make_sync(int fd);
void close_on_exec(int fd, bool on = true);
void tcp_nodelay(int fd);

/* SIGIO for fd: the process as its owner (F_SETOWN) and O_ASYNC set
 * (sigio_set), or cleared (sigio_clear). 0, or -1 after a warning. */
int sigio_set(int fd);
int sigio_clear(int fd);

/* Passing a descriptor over a Unix socket (libasync's rwfd.h, also here):
 * writefd sends len bytes and descriptor wfd in one sendmsg (the sender
 * keeps its copy; no SIGPIPE: -1 with EPIPE); readfd receives up to len
 * bytes and sets *rfdp to a descriptor that came with them, else -1. Both
 * return what sendmsg/recvmsg did (-1 with errno; *rfdp untouched then);
 * readfd returns -1 with EAGAIN when a descriptor came with no byte (*rfdp
 * holds it). The v forms take an iovec array. */
extern "C" {
ssize_t readvfd(int fd, const struct iovec *iov, int iovcnt, int *rfdp);
ssize_t writevfd(int fd, const struct iovec *iov, int iovcnt, int wfd);
ssize_t readfd(int fd, void *buf, size_t len, int *rfdp);
ssize_t writefd(int fd, const void *buf, size_t len, int wfd);
}

/* Blocks until fd (rfd) is readable when r, or fd (wfd) writable when w,
 * as select() would: returns how many of the two are ready (0 at the
 * timeout, -1 with errno: EINTR, EBADF for a descriptor not open, EINVAL for
 * a negative timeout); tvp NULL waits for ever, else *tvp becomes the time
 * left (as Linux's select). A negative descriptor, or an op other than
 * selread and selwrite, is fatal (libasync asserted). Not the event loop: it
 * blocks the calling thread (a worker, in a callback). */
#ifndef MELY_COMPAT_SELOP
#define MELY_COMPAT_SELOP /* melycompat_loop.h's fdcb takes it too */
enum selop { selread = 0, selwrite = 1 };
#endif
int fdwait(int fd, bool r, bool w, struct timeval *tvp);
int fdwait(int rfd, int wfd, bool r, bool w, struct timeval *tvp);
int fdwait(int fd, selop op, struct timeval *tvp = nullptr);

/* convertint (libasync's parseopt.h): the whole of cp (leading blanks and a
 * sign allowed; base 0: 0x hex, 0 octal, else decimal) as a 64-bit integer,
 * saturated at its limits, then converted to T (truncated as a cast does);
 * false, *resp untouched, if cp is empty or anything follows the number. The
 * second form takes a str (anything with cstr()). */
#ifndef MELY_COMPAT_CONVERTINT
#define MELY_COMPAT_CONVERTINT
bool mely_compat_convertint(const char *cp, int base, int64_t *res);
template <class T> inline bool convertint(const char *cp, T *resp, int base = 0)
{
    int64_t v;
    if (!mely_compat_convertint(cp, base, &v))
        return false;
    *resp = (T)v;
    return true;
}
template <class S, class T>
inline auto convertint(const S &s, T *resp, int base = 0) -> decltype((void)s.cstr(), true)
{
    return convertint(s.cstr(), resp, base);
}
#endif

struct tcpconnect_t; /* a handle, as timecb_t (melycompat_loop.h) */
/* Connects to addr:port (port in host byte order) without blocking; cb gets
 * the connected, non-blocking fd, or -1 (errno set). Runs with cb's color. */
tcpconnect_t *tcpconnect(in_addr addr, u_int16_t port, callback<void, int> *cb);
/* Before cb's event started: cb never runs and the socket is closed. After,
 * or a second time: nothing. Any thread. */
void tcpconnect_cancel(tcpconnect_t *tc);

#ifndef MELY_COMPAT_LEGACY_MELY_H
/* Not for the original Mely's programs, whose mely.h gave none of these
 * (they may define such operators themselves). */
/* ---- timespec arithmetic and address comparisons (libasync's amisc.h) ------------ */

/* -1, 0 or 1 as a is before, at or after b. */
inline int tscmp(const timespec &a, const timespec &b)
{
    if (a.tv_sec != b.tv_sec)
        return a.tv_sec < b.tv_sec ? -1 : 1;
    if (a.tv_nsec != b.tv_nsec)
        return a.tv_nsec < b.tv_nsec ? -1 : 1;
    return 0;
}
inline bool operator==(const timespec &a, const timespec &b) { return tscmp(a, b) == 0; }
inline bool operator!=(const timespec &a, const timespec &b) { return tscmp(a, b) != 0; }
inline bool operator<(const timespec &a, const timespec &b) { return tscmp(a, b) < 0; }
inline bool operator<=(const timespec &a, const timespec &b) { return tscmp(a, b) <= 0; }
inline bool operator>(const timespec &a, const timespec &b) { return tscmp(a, b) > 0; }
inline bool operator>=(const timespec &a, const timespec &b) { return tscmp(a, b) >= 0; }
/* Sums and differences of normalized timespecs (0 <= tv_nsec < 1e9). */
inline timespec operator+(const timespec &a, const timespec &b)
{
    timespec r;
    r.tv_sec = a.tv_sec + b.tv_sec;
    r.tv_nsec = a.tv_nsec + b.tv_nsec;
    if (r.tv_nsec >= 1000000000L) {
        r.tv_nsec -= 1000000000L;
        r.tv_sec++;
    }
    return r;
}
inline timespec operator-(const timespec &a, const timespec &b)
{
    timespec r;
    r.tv_sec = a.tv_sec - b.tv_sec;
    r.tv_nsec = a.tv_nsec - b.tv_nsec;
    if (r.tv_nsec < 0) {
        r.tv_nsec += 1000000000L;
        r.tv_sec--;
    }
    return r;
}

inline bool operator==(const in_addr &a, const in_addr &b) { return a.s_addr == b.s_addr; }
inline bool operator!=(const in_addr &a, const in_addr &b) { return a.s_addr != b.s_addr; }
/* Same port and address (the family is not compared, as in libasync). */
inline bool operator==(const sockaddr_in &a, const sockaddr_in &b)
{
    return a.sin_port == b.sin_port && a.sin_addr.s_addr == b.sin_addr.s_addr;
}
inline bool operator!=(const sockaddr_in &a, const sockaddr_in &b) { return !(a == b); }

/* Discards a result the compiler wants used (warn_unused_result). */
template <class T> inline void rc_ignore(const T &) {}
/* write() whose result does not matter (best-effort diagnostics). */
inline void v_write(int fd, const void *buf, size_t n)
{
    rc_ignore(write(fd, buf, n));
}
#endif /* !MELY_COMPAT_LEGACY_MELY_H */

#endif /* MELY_COMPAT_AMISC_H */
