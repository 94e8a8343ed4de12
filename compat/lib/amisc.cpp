/* amisc.cpp: socket and descriptor helpers, tcpconnect. */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sched.h>
#include <unistd.h>

#include "amisc.h"
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

/* ---- tcpconnect ------------------------------------------------------------------ */

struct tcpconnect_t {
    int fd;
    int err;                  /* an immediate failure, reported by a posted event */
    bool watching;            /* connecting under a write watch (else: failed at once) */
    std::atomic<mely_watch_t *> w{nullptr}; /* that watch, once mely_watch returned */
    callback<void, int> *cb;  /* counted */
    std::atomic<bool> cancelled{false};
};

static void tc_finish(tcpconnect_t *tc, int fd, int err)
{
    callback<void, int> *cb = tc->cb;
    delete tc;
    if (fd < 0)
        errno = err;
    (*cb)(fd);
    cb->refcount_dec();
}

static void tc_ready(int fd, unsigned, void *arg)
{
    tcpconnect_t *tc = static_cast<tcpconnect_t *>(arg);
    mely_watch_t *w;
    /* The watch may fire on another worker before mely_watch() returned it. */
    while ((w = tc->w.load(std::memory_order_acquire)) == nullptr)
        sched_yield();
    mely_watch_remove(w); /* from its own color: synchronous */
    int soerr = 0;
    socklen_t len = sizeof soerr;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
        soerr = errno;
    if (soerr) {
        close(fd);
        tc_finish(tc, -1, soerr);
    } else {
        tc_finish(tc, fd, 0);
    }
}

static void tc_failed(void *arg)
{
    tcpconnect_t *tc = static_cast<tcpconnect_t *>(arg);
    if (tc->cancelled.load(std::memory_order_acquire)) {
        tc->cb->refcount_dec();
        delete tc;
        return;
    }
    tc_finish(tc, -1, tc->err);
}

static void tc_free(void *arg)
{
    tcpconnect_t *tc = static_cast<tcpconnect_t *>(arg);
    tc->cb->refcount_dec();
    delete tc;
}

tcpconnect_t *tcpconnect(in_addr addr, u_int16_t port, callback<void, int> *cb)
{
    if (!cb) {
        fprintf(stderr, "mely-compat: tcpconnect with a NULL callback\n");
        exit(EXIT_FAILURE);
    }
    mely_t *rt = runtime();
    tcpconnect_t *tc = new tcpconnect_t;
    tc->fd = -1;
    tc->err = 0;
    tc->watching = false;
    tc->cb = cb;
    cb->refcount_inc();
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd >= 0) {
        sockaddr_in sin;
        memset(&sin, 0, sizeof sin);
        sin.sin_family = AF_INET;
        sin.sin_port = htons(port);
        sin.sin_addr = addr;
        if (connect(fd, (sockaddr *)&sin, sizeof sin) == 0 || errno == EINPROGRESS) {
            tc->fd = fd;
            tc->watching = true;
            mely_watch_t *w;
            int err = mely_watch(rt, fd, MELY_WRITE | MELY_ONESHOT, target(cb), tc_ready, tc, &w);
            if (err == 0) {
                tc->w.store(w, std::memory_order_release);
                return tc;
            }
            tc->watching = false;
            errno = -err;
        }
        int e = errno;
        close(fd);
        errno = e;
        tc->fd = -1;
    }
    tc->err = errno;
    mely_to_t to = target(cb);
    int err = mely_post_ex(rt, to.color, to.prio, to.handler, tc_failed, tc, 0);
    if (err)
        die("tcpconnect", err);
    return tc;
}

void tcpconnect_cancel(tcpconnect_t *tc)
{
    if (!tc)
        return;
    if (!tc->watching) { /* an immediate failure: its posted event drops it */
        tc->cancelled.store(true, std::memory_order_release);
        return;
    }
    int fd = tc->fd;
    mely_watch_remove_then(tc->w.load(std::memory_order_acquire), tc_free, tc);
    close(fd);
}
