/* SPDX-License-Identifier: MIT */
/* amisc.cpp: socket and descriptor helpers, SIGIO, descriptor passing,
 * fdwait, convertint, crypt.h's rnd, tcpconnect. */
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "amisc.h"
#include "crypt.h"
#include "err.h"
#include "rwfd.h"
#include "handles.h"
#include "internal.h"

using namespace mely_compat;

int inetsocket(int type, u_int16_t port, u_int32_t addr)
{
    int fd = socket(AF_INET, type, 0);
    if (fd < 0)
        return -1;
    if (type == SOCK_STREAM && port) {
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    }
    sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons(port);
    sin.sin_addr.s_addr = htonl(addr);
    if (bind(fd, (sockaddr *)&sin, sizeof sin) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int unix_addr(const char *path, sockaddr_un *sun)
{
    memset(sun, 0, sizeof *sun);
    sun->sun_family = AF_UNIX;
    if (!path || strlen(path) >= sizeof sun->sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(sun->sun_path, path);
    return 0;
}

/* A Unix stream socket at `path`, bound or connected by `how` (bind or
 * connect); -1 with errno set. */
static int unix_socket_at(const char *path, int (*how)(int, const sockaddr *, socklen_t))
{
    sockaddr_un sun;
    if (unix_addr(path, &sun) < 0)
        return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    if (how(fd, (sockaddr *)&sun, sizeof sun) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int unixsocket(const char *path)
{
    return unix_socket_at(path, ::bind);
}

int unixsocket_connect(const char *path)
{
    return unix_socket_at(path, ::connect);
}

void make_async(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && !(fl & O_NONBLOCK))
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

void make_sync(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0 && (fl & O_NONBLOCK))
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

void close_on_exec(int fd, bool on)
{
    int fl = fcntl(fd, F_GETFD);
    if (fl >= 0)
        fcntl(fd, F_SETFD, on ? (fl | FD_CLOEXEC) : (fl & ~FD_CLOEXEC));
}

void tcp_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* ---- SIGIO ------------------------------------------------------------------------ */

int sigio_set(int fd)
{
    if (fcntl(fd, F_SETOWN, getpid()) < 0) {
        warn("sigio_set: F_SETOWN: %m\n");
        return -1;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) {
        warn("sigio_set: F_GETFL: %m\n");
        return -1;
    }
    if (fcntl(fd, F_SETFL, fl | O_ASYNC) < 0) {
        warn("sigio_set: F_SETFL: %m\n");
        return -1;
    }
    return 0;
}

int sigio_clear(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0) {
        warn("sigio_clear: F_GETFL: %m\n");
        return -1;
    }
    if (fcntl(fd, F_SETFL, fl & ~O_ASYNC) < 0) {
        warn("sigio_clear: F_SETFL: %m\n");
        return -1;
    }
    return 0;
}

/* ---- Descriptor passing (rwfd.h) ------------------------------------------------------ */

namespace {
/* A message of iov with room for one descriptor (SCM_RIGHTS). */
struct fd_msg {
    struct msghdr mh;
    union { /* aligned for a cmsghdr (last: its flexible array member) */
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;

    fd_msg(const struct iovec *iov, int iovcnt)
    {
        memset(&ctl, 0, sizeof ctl);
        memset(&mh, 0, sizeof mh);
        mh.msg_iov = const_cast<struct iovec *>(iov);
        mh.msg_iovlen = (size_t)iovcnt;
        mh.msg_control = ctl.buf;
        mh.msg_controllen = sizeof ctl.buf;
    }
};
} // namespace

extern "C" ssize_t writevfd(int fd, const struct iovec *iov, int iovcnt, int wfd)
{
    fd_msg m(iov, iovcnt);
    struct msghdr &mh = m.mh;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &wfd, sizeof wfd);
    /* MSG_NOSIGNAL: libasync ignored SIGPIPE, so a closed peer was EPIPE. */
    return sendmsg(fd, &mh, MSG_NOSIGNAL);
}

extern "C" ssize_t writefd(int fd, const void *buf, size_t len, int wfd)
{
    struct iovec iov;
    iov.iov_base = const_cast<void *>(buf);
    iov.iov_len = len;
    return writevfd(fd, &iov, 1, wfd);
}

extern "C" ssize_t readvfd(int fd, const struct iovec *iov, int iovcnt, int *rfdp)
{
    fd_msg m(iov, iovcnt);
    struct msghdr &mh = m.mh;
    ssize_t n = recvmsg(fd, &mh, 0);
    if (n < 0)
        return n;
    *rfdp = -1;
    bool got = false;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        std::size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t k = 0; k < nfd; k++) {
            int r;
            memcpy(&r, CMSG_DATA(c) + k * sizeof(int), sizeof r);
            if (!got) {
                *rfdp = r;
                got = true;
            } else {
                close(r); /* only one was asked for: the others would leak */
            }
        }
    }
    if (got && n == 0) {
        /* A descriptor with no byte: libasync's readfd said "try again"
         * (a byte count of 0 would read as the end of the stream). */
        errno = EAGAIN;
        return -1;
    }
    return n;
}

extern "C" ssize_t readfd(int fd, void *buf, size_t len, int *rfdp)
{
    struct iovec iov;
    iov.iov_base = buf;
    iov.iov_len = len;
    return readvfd(fd, &iov, 1, rfdp);
}

/* ---- fdwait -------------------------------------------------------------------------- */

namespace {

[[noreturn]] void bad_fdwait(const char *why, int a, int b)
{
    fprintf(stderr, "mely-compat: fdwait: %s (%d, %d)\n", why, a, b);
    exit(EXIT_FAILURE);
}

double mono_now()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

} // namespace

int fdwait(int rfd, int wfd, bool r, bool w, struct timeval *tvp)
{
    if (rfd < 0 || wfd < 0)
        bad_fdwait("negative descriptor", rfd, wfd);
    /* ppoll rather than select: any descriptor number, no FD_SETSIZE. */
    timespec ts, *tsp = nullptr;
    if (tvp) {
        /* As glibc's select: a negative part is EINVAL, microseconds past a
         * second carry over. */
        if (tvp->tv_sec < 0 || tvp->tv_usec < 0) {
            errno = EINVAL;
            return -1;
        }
        time_t carry = (time_t)(tvp->tv_usec / 1000000);
        if (__builtin_add_overflow(tvp->tv_sec, carry, &ts.tv_sec))
            ts.tv_sec = std::numeric_limits<time_t>::max();
        ts.tv_nsec = (long)(tvp->tv_usec % 1000000) * 1000;
        tsp = &ts;
    }
    struct pollfd p[2];
    nfds_t np = 0;
    const short rd = POLLIN | POLLRDNORM | POLLRDBAND, wr = POLLOUT | POLLWRNORM | POLLWRBAND;
    if (r) {
        p[np].fd = rfd;
        p[np].events = rd;
        np++;
    }
    if (w) {
        if (np && rfd == wfd) {
            p[0].events |= wr;
        } else {
            p[np].fd = wfd;
            p[np].events = wr;
            np++;
        }
    }
    double t0 = tvp ? mono_now() : 0;
    int n = ppoll(np ? p : nullptr, np, tsp, nullptr);
    int saved = errno;
    if (tvp) { /* the time left, as Linux's select leaves it */
        double left = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9 - (mono_now() - t0);
        if (n == 0 || left < 0)
            left = 0;
        tvp->tv_sec = (time_t)left;
        tvp->tv_usec = (suseconds_t)((left - (double)tvp->tv_sec) * 1e6);
    }
    if (n < 0) {
        errno = saved;
        return -1;
    }
    /* Counted as select counts: the read set's fd and the write set's. */
    int ready = 0;
    for (nfds_t k = 0; k < np; k++) {
        short re = p[k].revents;
        if (re & POLLNVAL) {
            errno = EBADF;
            return -1;
        }
        if ((p[k].events & rd) && (re & (rd | POLLHUP | POLLERR)))
            ready++;
        if ((p[k].events & wr) && (re & (wr | POLLERR)))
            ready++;
    }
    return ready;
}

int fdwait(int fd, bool r, bool w, struct timeval *tvp)
{
    return fdwait(fd, fd, r, w, tvp);
}

int fdwait(int fd, selop op, struct timeval *tvp)
{
    if (op != selread && op != selwrite)
        bad_fdwait("bad operation (selread or selwrite)", fd, (int)op);
    return fdwait(fd, fd, op == selread, op == selwrite, tvp);
}

/* ---- convertint -------------------------------------------------------------------------- */

bool mely_compat_convertint(const char *cp, int base, int64_t *res)
{
    if (!*cp)
        return false;
    char *end;
    int saved = errno; /* a saturated value is the answer, as libasync's */
    long long v = strtoll(cp, &end, base);
    errno = saved;
    if (*end)
        return false;
    *res = (int64_t)v;
    return true;
}

/* ---- rnd (crypt.h) ------------------------------------------------------------------------- */

prng rnd;

void prng::getbytes(void *buf, std::size_t n)
{
    char *p = static_cast<char *>(buf);
    while (n > 0) {
        ssize_t k = getrandom(p, n, 0);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "mely-compat: rnd: getrandom: %s\n", strerror(errno));
            exit(EXIT_FAILURE);
        }
        p += k;
        n -= (std::size_t)k;
    }
}

/* ---- tcpconnect ------------------------------------------------------------------ */

/* A tcpconnect_t * is a handle of connect_table() (handles.h), never an
 * address: tcpconnect_cancel() after the callback ran, or a second one, does
 * nothing. A connection's generation ends when its callback starts or when
 * it is cancelled. */

namespace {

struct connect_rec {
    int fd;
    int err;            /* an immediate failure, reported by a posted event */
    bool watching;      /* connecting under a write watch (else: failed at once) */
    mely_watch_t *w;    /* that watch */
    callback<void, int> *cb; /* counted */
};
typedef handle_table<connect_rec> connect_tab;

connect_tab &connect_table()
{
    static connect_tab *t = new connect_tab("tcpconnect"); /* never destroyed */
    return *t;
}

/* Ends the live generation of h's slot, or tells that it had ended
 * (cancelled): then *rec is not filled. */
bool connect_claim(void *h, connect_rec *rec)
{
    connect_tab::slot &s = connect_table().at(connect_tab::index_of(h));
    std::lock_guard<std::mutex> g(s.mu);
    if (s.gen != connect_tab::gen_of(h))
        return false;
    s.gen++;
    *rec = s.val;
    return true;
}

/* Frees a cancelled connection's slot and drops its callback's count, once
 * no event of it will run. */
void connect_free(void *h) noexcept
{
    connect_tab &tab = connect_table();
    callback<void, int> *cb = tab.at(connect_tab::index_of(h)).val.cb;
    tab.release(connect_tab::index_of(h));
    cb->refcount_dec();
}

/* Frees a claimed connection's slot and runs its callback with fd, or -1
 * and errno err. */
void connect_finish(void *h, callback<void, int> *cb, int fd, int err) noexcept
{
    connect_table().release(connect_tab::index_of(h));
    guard(cb, "tcpconnect", -1, [cb, fd, err] {
        if (fd < 0)
            errno = err;
        (*cb)(fd);
    });
    cb->refcount_dec();
}

void connect_ready(int fd, unsigned, void *h) noexcept
{
    connect_rec rec;
    if (!connect_claim(h, &rec))
        return; /* cancelled: the watch's fin frees the slot */
    mely_watch_remove(rec.w); /* from its own color: synchronous */
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
        soerr = errno;
    if (soerr) {
        close(fd);
        connect_finish(h, rec.cb, -1, soerr);
    } else {
        connect_finish(h, rec.cb, fd, 0);
    }
}

void connect_failed(void *h) noexcept
{
    connect_rec rec;
    if (connect_claim(h, &rec))
        connect_finish(h, rec.cb, -1, rec.err);
    else
        connect_free(h); /* cancelled */
}

/* Starts the connection (the slot's lock held): a write watch on a
 * connecting socket, or else a posted failure with errno. */
void connect_start(connect_tab::slot &s, void *h, in_addr addr, u_int16_t port)
{
    mely_t *rt = runtime();
    connect_rec &c = s.val;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        sockaddr_in sin;
        memset(&sin, 0, sizeof sin);
        sin.sin_family = AF_INET;
        sin.sin_port = htons(port);
        sin.sin_addr = addr;
        if (connect(fd, (sockaddr *)&sin, sizeof sin) == 0 || errno == EINPROGRESS) {
            /* The watch may fire on another worker before mely_watch()
             * returns: connect_ready then waits for the slot's lock. */
            int err = mely_watch(rt, fd, MELY_WRITE | MELY_ONESHOT, target(c.cb), connect_ready,
                                 h, &c.w);
            if (err == 0) {
                c.fd = fd;
                c.watching = true;
                return;
            }
            errno = -err;
        }
        int e = errno;
        close(fd);
        errno = e;
    }
    c.err = errno;
    mely_to_t to = target(c.cb);
    int err = mely_post_ex(rt, to.color, to.prio, to.handler, connect_failed, h, 0);
    if (err)
        die("tcpconnect", err);
}

} // namespace

tcpconnect_t *tcpconnect(in_addr addr, u_int16_t port, callback<void, int> *cb)
{
    uint32_t i;
    connect_tab::slot &s = new_handle(connect_table(), cb, "tcpconnect", &i);
    std::lock_guard<std::mutex> g(s.mu);
    s.val = connect_rec{-1, 0, false, nullptr, cb};
    void *h = connect_tab::encode(i, s.gen);
    connect_start(s, h, addr, port);
    return static_cast<tcpconnect_t *>(h);
}

void tcpconnect_cancel(tcpconnect_t *tc)
{
    if (!connect_table().find(tc))
        return;
    connect_rec rec;
    if (!connect_claim(tc, &rec))
        return; /* its callback has started, or it was cancelled already */
    if (!rec.watching)
        return; /* an immediate failure: its posted event frees the slot */
    mely_watch_remove_then(rec.w, connect_free, tc);
    close(rec.fd);
}
