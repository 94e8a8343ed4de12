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
#include <unistd.h>

#include "amisc.h"
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
